package dev.durable.dashboard.internal;

import static dev.durable.dashboard.internal.Guard.id;

import dev.durable.DurableEngine;
import dev.durable.Instance;
import dev.durable.InstanceStatus;
import dev.durable.InvalidRequestException;
import dev.durable.JobEvent;
import dev.durable.LiveEngine;
import dev.durable.QueueStats;
import dev.durable.RecurringJob;
import dev.durable.admin.DurableAdmin;
import dev.durable.admin.InstanceDetail;
import dev.durable.admin.InstanceFilter;
import dev.durable.admin.PageRequest;
import dev.durable.admin.QueueDepth;
import dev.durable.admin.StatusCount;
import dev.durable.dashboard.DashboardAction;
import dev.durable.dashboard.internal.Guard.NotFound;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.ZonedDateTime;
import java.util.ArrayList;
import java.util.Collections;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.jspecify.annotations.Nullable;
import org.springframework.http.CacheControl;
import org.springframework.http.HttpStatus;
import org.springframework.http.MediaType;
import org.springframework.web.reactive.function.BodyInserters;
import org.springframework.web.reactive.function.server.ServerRequest;
import org.springframework.web.reactive.function.server.ServerResponse;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.util.Logger;
import reactor.util.Loggers;

/**
 * The routes that read: each page reads through the admin API and the engine, then renders with its page
 * class ({@link Guard#page} checks the reader first and turns errors into pages); the live event stream; the
 * dashboard's own stylesheet and script.
 */
public final class ReadHandlers {

    private static final Logger log = Loggers.getLogger(ReadHandlers.class);

    private static final int TREE_CHILDREN = 20;
    private static final int TREE_GRANDCHILDREN = 10;

    private final DurableEngine engine;
    private final DurableAdmin admin;
    private final EventHub hub;
    private final Guard guard;
    private final Map<String, byte[]> assets;

    ReadHandlers(DurableEngine engine, EventHub hub, Guard guard) {
        this.engine = engine;
        this.admin = engine.admin();
        this.hub = hub;
        this.guard = guard;
        this.assets = Map.of("dashboard.css", asset("dashboard.css"), "dashboard.js", asset("dashboard.js"));
    }

    private static byte[] asset(String name) {
        try (InputStream in = ReadHandlers.class.getResourceAsStream("/dev/durable/dashboard/static/" + name)) {
            if (in == null) {
                throw new IllegalStateException("the dashboard's " + name + " is missing from its jar");
            }
            return in.readAllBytes();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    Mono<String> overview(ServerRequest request, View view) {
        ActivityChart.Range range = ActivityChart.Range.of(request.queryParam("range").orElse(null));
        String chartQueue = request.queryParam("queue").filter(queue -> !queue.isBlank()).orElse(null);
        // The due rows and the chart are read apart from the rest: when one fails (a count timing out on a huge
        // backlog), the page says so in its place and shows everything else.
        Mono<Optional<List<QueueDepth>>> depthsRead = admin.depths().map(Optional::of)
                .onErrorResume(error -> unread("the rows due now", error));
        Mono<Optional<ActivityChart>> chartRead = hub.chart(range, chartQueue).map(Optional::of)
                .onErrorResume(error -> unread("the activity", error));
        return Mono.zip(admin.counts(), engine.liveEngines().collectList(), admin.pausedQueues(), depthsRead,
                chartRead).map(read -> {
            Map<String, dev.durable.admin.QueuePause> paused = new TreeMap<>();
            read.getT3().forEach(pause -> paused.put(pause.queue(), pause));
            Map<String, Map<InstanceStatus, StatusCount>> counts = new TreeMap<>();
            for (StatusCount count : read.getT1()) {
                counts.computeIfAbsent(count.queue(), q -> new EnumMap<>(InstanceStatus.class)).put(count.status(), count);
            }
            Map<String, List<String>> servedBy = new TreeMap<>();
            for (LiveEngine live : read.getT2()) {
                live.queues().forEach(q -> servedBy.computeIfAbsent(q, x -> new ArrayList<>()).add(live.name()));
            }
            Map<String, QueueDepth> depths = new TreeMap<>();
            read.getT4().orElse(List.of()).forEach(depth -> depths.put(depth.queue(), depth));
            Map<String, QueueStats> here = new TreeMap<>();
            engine.queueStats().forEach(stats -> here.put(stats.queue(), stats));
            Set<String> queues = new TreeSet<>(counts.keySet());
            queues.addAll(servedBy.keySet());
            queues.addAll(engine.options().queues().keySet());
            queues.addAll(paused.keySet());
            List<OverviewPage.QueueRow> rows = new ArrayList<>();
            for (String queue : queues) {
                // A copy: a queue no live engine serves gets the immutable empty list, which refuses sort.
                List<String> engines = new ArrayList<>(servedBy.getOrDefault(queue, List.of()));
                Collections.sort(engines);
                rows.add(new OverviewPage.QueueRow(queue, counts.getOrDefault(queue, Map.of()), depths.get(queue),
                        here.get(queue), engines, paused.containsKey(queue)));
            }
            List<JobEvent> recent = hub.recentEvents();
            return OverviewPage.overview(view, rows, true, read.getT4().isPresent(), read.getT5().orElse(null), recent);
        });
    }

    private static <T> Mono<Optional<T>> unread(String what, Throwable error) {
        log.warn("dashboard: {} could not be read: {}", what, error.toString());
        return Mono.just(Optional.empty());
    }

    Mono<String> instances(ServerRequest request, View view) {
        FilterForm form = FilterForm.of(request.queryParams());
        InstanceFilter filter = form.filter();
        boolean newestFirst = !"oldest".equals(request.queryParam("order").orElse("newest"));
        int size = request.queryParam("size").map(ReadHandlers::size).orElse(50);
        PageRequest.Order order = newestFirst ? PageRequest.Order.NEWEST_FIRST : PageRequest.Order.OLDEST_FIRST;
        PageRequest.Order reverse = newestFirst ? PageRequest.Order.OLDEST_FIRST : PageRequest.Order.NEWEST_FIRST;
        String before = request.queryParam("before").orElse(null);
        String after = request.queryParam("after").orElse(null);
        Mono<InstanceListPage.Listing> listing;
        if (before != null) {
            // The page before: read backwards from its first row, then turn it round.
            listing = admin.list(filter, new PageRequest(reverse, size, before)).map(page -> {
                List<Instance> items = new ArrayList<>(page.items());
                Collections.reverse(items);
                String previous = page.hasNext() && !items.isEmpty() ? PageRequest.cursorFor(items.get(0).id()) : null;
                String next = items.isEmpty() ? null : PageRequest.cursorFor(items.get(items.size() - 1).id());
                return new InstanceListPage.Listing(items, newestFirst, size, previous, next);
            });
        } else {
            listing = admin.list(filter, new PageRequest(order, size, after)).map(page -> {
                String previous = after != null && !page.items().isEmpty()
                        ? PageRequest.cursorFor(page.items().get(0).id()) : null;
                return new InstanceListPage.Listing(page.items(), newestFirst, size, previous, page.next());
            });
        }
        return listing.map(page -> InstanceListPage.instances(view, form, page));
    }

    private static int size(String value) {
        try {
            int size = Integer.parseInt(value);
            if (size >= 1 && size <= 500) {
                return size;
            }
        } catch (NumberFormatException e) {
            // the typed error below
        }
        throw new InvalidRequestException("size: a page holds 1 to 500 instances, was '" + value + "'");
    }

    Mono<String> detail(ServerRequest request, View view) {
        long id = id(request);
        return admin.detail(id)
                .switchIfEmpty(Mono.error(() -> new NotFound("No instance has id " + id + ".")))
                .flatMap(detail -> tree(detail).map(tree -> InstanceDetailPage.detail(view, detail, tree, true, true)));
    }

    /** The first children with their own children, one listing per child (bounded, a few at a time). */
    private Mono<List<InstanceDetailPage.ChildNode>> tree(InstanceDetail detail) {
        List<Instance> children = detail.children().subList(0, Math.min(TREE_CHILDREN, detail.children().size()));
        return Flux.fromIterable(children)
                .flatMapSequential(child -> admin.list(InstanceFilter.builder().parentId(child.id()).build(),
                                PageRequest.oldestFirst(TREE_GRANDCHILDREN))
                        .map(page -> new InstanceDetailPage.ChildNode(child, page.items(), page.hasNext())), 4)
                .collectList()
                .map(nodes -> {
                    List<InstanceDetailPage.ChildNode> all = new ArrayList<>(nodes);
                    for (Instance rest : detail.children().subList(children.size(), detail.children().size())) {
                        all.add(new InstanceDetailPage.ChildNode(rest, List.of(), false));
                    }
                    return all;
                });
    }

    Mono<String> bulkProgress(ServerRequest request, View view) {
        long id = id(request);
        return Mono.zip(admin.bulkProgress(id), engine.liveEngines()
                        .any(live -> live.queues().contains(DurableAdmin.BULK_QUEUE)))
                .map(both -> ActionPages.bulkProgress(view, both.getT1(), both.getT2()));
    }

    Mono<String> recurring(View view) {
        List<RecurringJob> jobs = engine.recurringJobs();
        return Flux.fromIterable(jobs)
                .flatMapSequential(job -> admin.list(InstanceFilter.builder()
                                        .correlationKeyPrefix("durable.cron:" + job.name() + "@").build(),
                                PageRequest.newestFirst(1))
                        .map(page -> row(job, page.items().isEmpty() ? null : page.items().get(0))), 4)
                .collectList()
                .map(rows -> EnginePages.recurring(view, rows));
    }

    private static EnginePages.RecurringRow row(RecurringJob job, @Nullable Instance last) {
        return new EnginePages.RecurringRow(job.name(), job.cron().toString(), job.zone().getId(), job.request().type(),
                job.request().queue(), job.cron().next(ZonedDateTime.now(job.zone())).toInstant(), last);
    }

    Mono<String> limits(View view) {
        List<EnginePages.GateRow> gates = engine.options().gates().values().stream()
                .map(gate -> new EnginePages.GateRow(gate.name(), gate.capacity(), gate.shards())).toList();
        List<EnginePages.RateRow> rates = engine.options().rateLimits().values().stream()
                .map(rate -> new EnginePages.RateRow(rate.name(), rate.ratePerSecond(), rate.burst())).toList();
        return admin.limits().map(usage -> EnginePages.limits(view, gates, rates, usage));
    }

    Mono<String> engines(View view) {
        return Mono.zip(engine.liveEngines().collectList(), engine.unservedWork().collectList())
                .map(both -> EnginePages.engines(view, both.getT1(), both.getT2()));
    }

    Mono<ServerResponse> events(ServerRequest request) {
        return guard.allowed(request, DashboardAction.READ).flatMap(ok -> ok
                ? ServerResponse.ok().contentType(MediaType.TEXT_EVENT_STREAM).cacheControl(CacheControl.noStore())
                        .body(BodyInserters.fromServerSentEvents(hub.stream()))
                : ServerResponse.status(HttpStatus.FORBIDDEN).build());
    }

    Mono<ServerResponse> asset(ServerRequest request) {
        String file = request.pathVariable("file");
        byte[] bytes = assets.get(file);
        if (bytes == null) {
            return ServerResponse.notFound().build();
        }
        return guard.allowed(request, DashboardAction.READ).flatMap(ok -> ok
                ? ServerResponse.ok()
                        .contentType(file.endsWith(".css") ? new MediaType("text", "css", StandardCharsets.UTF_8)
                                : new MediaType("text", "javascript", StandardCharsets.UTF_8))
                        .cacheControl(CacheControl.maxAge(Duration.ofMinutes(10)))
                        .header("X-Content-Type-Options", "nosniff")
                        .bodyValue(bytes)
                : ServerResponse.status(HttpStatus.FORBIDDEN).build());
    }
}
