package dev.durable.dashboard.internal;

import static dev.durable.dashboard.internal.Guard.id;

import dev.durable.InvalidRequestException;
import dev.durable.NoTargetException;
import dev.durable.admin.BulkRequest;
import dev.durable.admin.DurableAdmin;
import dev.durable.admin.InstanceFilter;
import dev.durable.dashboard.DashboardAction;
import dev.durable.dashboard.internal.Guard.NotFound;
import java.io.IOException;
import java.net.URI;
import org.jspecify.annotations.Nullable;
import org.springframework.http.HttpStatus;
import org.springframework.web.reactive.function.server.ServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;
import reactor.core.publisher.Mono;

/**
 * The routes that act, each a POST through {@link Guard#act}: an instance's actions (retry, cancel, signal,
 * run now, priority, replay, fork, delete), a queue's pause and resume, and a bulk action over a filter.
 * Each answers a redirect (303) to what it changed; a bulk run now, done at once, answers its result.
 */
public final class ActionHandlers {

    private final DurableAdmin admin;
    private final Guard guard;

    ActionHandlers(DurableAdmin admin, Guard guard) {
        this.admin = admin;
        this.guard = guard;
    }

    Mono<ServerResponse> instanceAction(ServerRequest request) {
        long id;
        try {
            id = id(request);
        } catch (NotFound e) {
            return ServerResponse.notFound().build();
        }
        String back = guard.base(request) + "/instances/" + id;
        return switch (request.pathVariable("action")) {
            case "retry" -> guard.act(request, DashboardAction.RETRY, null,
                    form -> admin.retry(id).then(seeOther(back + "?done=retried")));
            case "cancel" -> guard.act(request, DashboardAction.CANCEL, "Cancel instance #" + id + " and its live children?",
                    form -> admin.cancel(id).flatMap(result -> seeOther(back + "?done=" + switch (result) {
                        case CANCELLED -> "cancelled";
                        case REQUESTED -> "cancel-requested";
                        case ALREADY_SETTLED -> "already-settled";
                        case NOT_FOUND -> throw new NoTargetException("no instance has id " + id);
                    })));
            case "signal" -> guard.act(request, DashboardAction.SIGNAL, null, form -> {
                String name = form.getFirst("name");
                if (name == null || name.isBlank()) {
                    return Mono.error(new InvalidRequestException("a signal needs a name"));
                }
                Object payload = payload(form.getFirst("payload"));
                return admin.signal(id, name.strip(), payload).flatMap(result ->
                        seeOther(back + "?done=" + (result == dev.durable.SignalResult.DELIVERED ? "signalled" : "duplicate")));
            });
            case "run-now" -> guard.act(request, DashboardAction.RUN_NOW, null,
                    form -> admin.runNow(id).then(seeOther(back + "?done=run-now")));
            case "priority" -> guard.act(request, DashboardAction.CHANGE_PRIORITY, null,
                    form -> admin.setPriority(id, priority(form.getFirst("priority")))
                            .then(seeOther(back + "?done=priority")));
            case "replay" -> guard.act(request, DashboardAction.REPLAY, "Replay instance #" + id + " from the chosen step?",
                    form -> admin.replay(id, step(form.getFirst("step")), payload(form.getFirst("state")))
                            .then(seeOther(back + "?done=replayed")));
            case "fork" -> guard.act(request, DashboardAction.FORK, "Start a new instance from a step of #" + id + "?",
                    form -> admin.fork(id, step(form.getFirst("step")), payload(form.getFirst("state")))
                            .flatMap(fork -> seeOther(guard.base(request) + "/instances/" + fork + "?done=forked")));
            case "delete" -> guard.act(request, DashboardAction.DELETE, "Delete instance #" + id + " for good?",
                    form -> admin.delete(id).then(seeOther(guard.base(request) + "/instances?done=deleted")));
            default -> ServerResponse.notFound().build();
        };
    }

    private static String step(@Nullable String value) {
        if (value == null || value.isBlank()) {
            throw new InvalidRequestException("a replay or fork needs a step");
        }
        return value.strip();
    }

    private static int priority(@Nullable String value) {
        try {
            return Integer.parseInt(String.valueOf(value).strip());
        } catch (NumberFormatException e) {
            throw new InvalidRequestException("priority: a whole number, was '" + value + "'");
        }
    }

    Mono<ServerResponse> queueAction(ServerRequest request) {
        String queue = request.pathVariable("queue");
        String home = guard.base(request) + "/";
        return switch (request.pathVariable("action")) {
            case "pause" -> guard.act(request, DashboardAction.PAUSE_QUEUE,
                    "Pause queue " + queue + " on every engine? Running work finishes; nothing new is picked.",
                    form -> admin.pauseQueue(queue).then(seeOther(home + "?done=paused")));
            case "resume" -> guard.act(request, DashboardAction.PAUSE_QUEUE, null,
                    form -> admin.resumeQueue(queue).then(seeOther(home + "?done=resumed")));
            default -> ServerResponse.notFound().build();
        };
    }

    /** A payload typed into the form: JSON when it parses as JSON, else the text as a JSON string. */
    private @Nullable Object payload(@Nullable String text) {
        if (text == null || text.isBlank()) {
            return null;
        }
        try {
            return new com.fasterxml.jackson.databind.ObjectMapper().readTree(text);
        } catch (IOException notJson) {
            return text;
        }
    }

    Mono<ServerResponse> bulk(ServerRequest request) {
        return guard.act(request, DashboardAction.BULK, "Act on every instance the filter matches?", form -> {
            FilterForm filterForm = FilterForm.of(form);
            InstanceFilter filter = filterForm.filter();
            String action = String.valueOf(form.getFirst("action"));
            String token = guard.cookieToken(request);
            if (action.equals("run-now")) {
                // Not a bulk job: one statement per batch of due-later rows, answered when done.
                return admin.runNowAll(filter).flatMap(result -> guard.view(request, token == null ? "" : token)
                        .flatMap(view -> guard.html(request, HttpStatus.OK,
                                ActionPages.bulkDone(view, action, filterForm, result), null)));
            }
            BulkRequest bulk = switch (action) {
                case "retry" -> BulkRequest.retry(filter);
                case "cancel" -> BulkRequest.cancel(filter);
                case "delete" -> BulkRequest.delete(filter);
                case "priority" -> BulkRequest.setPriority(filter, priority(form.getFirst("priority")));
                default -> throw new InvalidRequestException(
                        "action: retry, cancel, delete, run-now or priority, was '" + action + "'");
            };
            return admin.startBulk(bulk).flatMap(id -> seeOther(guard.base(request) + "/bulk/" + id));
        });
    }

    private Mono<ServerResponse> seeOther(String path) {
        return ServerResponse.seeOther(URI.create(path)).build();
    }
}
