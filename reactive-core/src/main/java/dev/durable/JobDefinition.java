package dev.durable;

import java.time.Duration;
import java.util.Objects;
import dev.durable.internal.handler.HandlerWatch;
import java.util.concurrent.CompletionStage;
import java.util.function.Function;
import org.jspecify.annotations.Nullable;
import org.reactivestreams.Publisher;
import reactor.core.publisher.Mono;

/**
 * A job type: its name, the class its arguments decode to, its handler and how it retries.
 * Immutable; each {@code withX}-style setter returns a copy and checks its argument.
 *
 * <pre>{@code
 * JobDefinition.of("send-email", Email.class, email -> mailer.send(email))      // Mono<R>
 *     .queue("mail").maxAttempts(5).timeout(Duration.ofSeconds(30))
 * JobDefinition.ofFuture("resize", Image.class, image -> resizer.resizeAsync(image)) // CompletableFuture<R>
 * JobDefinition.ofBlocking("report", Month.class, month -> jdbcReports.build(month)) // plain blocking code
 * }</pre>
 *
 * Every shape has the same guarantees: the type's timeout, cancellation, retries with backoff.
 * A reactive handler runs on the engine's handler scheduler ({@link EngineOptions#handlerScheduler()},
 * bounded-elastic unless set); one that makes or subscribes to its {@code Mono} while holding a
 * non-blocking thread for long is warned about once in the log.
 */
public final class JobDefinition<A, R> implements Definition {

    public static final String DEFAULT_QUEUE = "default";
    public static final int DEFAULT_MAX_ATTEMPTS = 20;
    public static final Duration DEFAULT_TIMEOUT = Duration.ofMinutes(5);
    /** The one step of a job. */
    public static final String STEP = "run";

    private final String type;
    private final Class<A> argsType;
    private final JobHandler<A, R> handler;
    /** The handler as the engine runs it: watched for blocking on a non-blocking thread. */
    private final JobHandler<A, R> watched;
    /** The handler of a transactional type (its transaction's connection in), else null; and as the engine runs it. */
    private final JobHandler.@Nullable InTransaction<A, R> transactional;
    private final JobHandler.@Nullable InTransaction<A, R> inTransaction;
    private final String queue;
    private final int maxAttempts;
    private final Backoff backoff;
    private final Duration timeout;

    private JobDefinition(String type, Class<A> argsType, JobHandler<A, R> handler,
            JobHandler.@Nullable InTransaction<A, R> inTransaction, String queue, int maxAttempts, Backoff backoff,
            Duration timeout) {
        this.type = type;
        this.argsType = argsType;
        this.handler = handler;
        String what = "the handler of job type '" + type + "'";
        this.watched = (args, context) -> HandlerWatch.watched(what, () -> handler.handle(args, context), true);
        this.transactional = inTransaction;
        this.inTransaction = inTransaction == null ? null : (args, context, transaction) -> HandlerWatch.watched(what,
                () -> inTransaction.handle(args, context, transaction), true);
        this.queue = queue;
        this.maxAttempts = maxAttempts;
        this.backoff = backoff;
        this.timeout = timeout;
    }

    /** A job whose handler sees its arguments and its context. */
    public static <A, R> JobDefinition<A, R> of(String type, Class<A> argsType, JobHandler<A, R> handler) {
        Options.requireName("type", type);
        Options.requireNonNull("argsType", argsType);
        Options.requireNonNull("handler", handler);
        return new JobDefinition<>(type, argsType, handler, null, DEFAULT_QUEUE, DEFAULT_MAX_ATTEMPTS,
                Backoff.DEFAULT, DEFAULT_TIMEOUT);
    }

    /**
     * A job whose database work commits with its outcome: the handler runs inside the transaction
     * that commits the job's outcome, on a connection of the engine ({@code transaction}), so its
     * statements and the outcome commit together or not at all. The outcome's commit is guarded by
     * the run's claim like every other: when it refuses (the lease was lost and the job claimed again,
     * or it was cancelled meanwhile), the handler's statements roll back with it. An error, the
     * type's timeout, a cancel or a lost claim rolls them back too; the retry runs them again on a
     * clean slate. So a done job's writes exist exactly once and a failed job's never.
     *
     * <p>Use it for work on the same PostgreSQL database as the engine's tables (not for calls to other
     * systems: a rollback cannot take back an email). The connection belongs to the run: commit,
     * rollback and close are the engine's, and any use after the handler's {@code Mono} ended fails
     * with {@link StepTransactionException}. Each run holds one of the engine's connections for its
     * duration, at most {@link EngineOptions#transactionalConcurrency()} at once; its commit is its own,
     * so a slow handler never holds other outcomes' commits back.
     */
    public static <A, R> JobDefinition<A, R> transactional(String type, Class<A> argsType,
            JobHandler.InTransaction<A, R> handler) {
        Options.requireName("type", type);
        Options.requireNonNull("argsType", argsType);
        Options.requireNonNull("handler", handler);
        JobHandler<A, R> outside = (args, context) -> Mono.error(new InvalidRequestException("job type '" + type
                + "' is transactional: it runs only inside the transaction of its outcome, with that transaction's"
                + " connection"));
        return new JobDefinition<>(type, argsType, outside, handler, DEFAULT_QUEUE, DEFAULT_MAX_ATTEMPTS,
                Backoff.DEFAULT, DEFAULT_TIMEOUT);
    }

    /** A job whose handler needs only its arguments. */
    public static <A, R> JobDefinition<A, R> of(String type, Class<A> argsType, Function<A, Mono<R>> handler) {
        Options.requireNonNull("handler", handler);
        return of(type, argsType, (JobHandler<A, R>) (args, context) -> handler.apply(args));
    }

    /** A job whose handler returns any publisher, run to completion: its last element is the result. */
    public static <A, R> JobDefinition<A, R> ofPublisher(String type, Class<A> argsType,
            Function<A, ? extends Publisher<R>> handler) {
        Options.requireNonNull("handler", handler);
        return of(type, argsType, JobHandler.<A, R>publisher((args, context) -> handler.apply(args)));
    }

    /** A job whose handler returns a {@code CompletableFuture} (or other {@code CompletionStage}). */
    public static <A, R> JobDefinition<A, R> ofFuture(String type, Class<A> argsType,
            Function<A, ? extends CompletionStage<R>> handler) {
        Options.requireNonNull("handler", handler);
        return of(type, argsType, JobHandler.<A, R>future((args, context) -> handler.apply(args)));
    }

    /**
     * A job whose handler is plain blocking code: it runs on virtual threads on JDK 21 and later,
     * bounded-elastic threads on 17, whatever the engine's handler scheduler ({@link JobHandler#blocking}).
     */
    public static <A, R> JobDefinition<A, R> ofBlocking(String type, Class<A> argsType,
            JobHandler.BlockingFunction<A, R> handler) {
        Options.requireNonNull("handler", handler);
        return of(type, argsType, JobHandler.<A, R>blocking((args, context) -> handler.apply(args)));
    }

    /** The queue its instances go to unless the request names one. */
    public JobDefinition<A, R> queue(String queue) {
        return new JobDefinition<>(type, argsType, handler, transactional, QueueNames.require("queue", queue),
                maxAttempts, backoff, timeout);
    }

    /** Runs at most this many times unless the request says otherwise (at least 1). */
    public JobDefinition<A, R> maxAttempts(int maxAttempts) {
        return new JobDefinition<>(type, argsType, handler, transactional, queue,
                Options.requireAtLeast("maxAttempts", maxAttempts, 1), backoff, timeout);
    }

    public JobDefinition<A, R> backoff(Backoff backoff) {
        return new JobDefinition<>(type, argsType, handler, transactional, queue, maxAttempts,
                Options.requireNonNull("backoff", backoff), timeout);
    }

    /** A run longer than this is cancelled and counts as a failed attempt. */
    public JobDefinition<A, R> timeout(Duration timeout) {
        return new JobDefinition<>(type, argsType, handler, transactional, queue, maxAttempts, backoff,
                Options.requirePositive("timeout", timeout));
    }

    @Override
    public String type() {
        return type;
    }

    public Class<A> argsType() {
        return argsType;
    }

    /** The handler as the engine runs it (watched for blocking on a non-blocking thread). */
    public JobHandler<A, R> handler() {
        return watched;
    }

    /**
     * The handler of a {@linkplain #transactional transactional} type as the engine runs it (watched
     * for blocking on a non-blocking thread); null for any other type.
     */
    public JobHandler.@Nullable InTransaction<A, R> transactionalHandler() {
        return inTransaction;
    }

    /** Whether the handler runs inside its outcome's transaction ({@link #transactional}). */
    public boolean isTransactional() {
        return inTransaction != null;
    }

    @Override
    public String queue() {
        return queue;
    }

    @Override
    public int maxAttempts() {
        return maxAttempts;
    }

    @Override
    public Backoff backoff() {
        return backoff;
    }

    @Override
    public Duration timeout() {
        return timeout;
    }

    @Override
    public String initialStep() {
        return STEP;
    }

    @Override
    public int version() {
        return 1;
    }

    @Override
    public boolean equals(Object other) {
        return other instanceof JobDefinition<?, ?> that && type.equals(that.type);
    }

    @Override
    public int hashCode() {
        return Objects.hash(type);
    }

    @Override
    public String toString() {
        return "JobDefinition{type=" + type + ", queue=" + queue + ", maxAttempts=" + maxAttempts
                + ", timeout=" + timeout + (inTransaction != null ? ", transactional" : "") + "}";
    }
}
