package dev.durable.demo;

import dev.durable.DurableEngine;
import dev.durable.InstanceStatus;
import dev.durable.JobDefinition;
import dev.durable.JobRequest;
import dev.durable.QueueOptions;
import dev.durable.testing.TestDatabase;
import dev.durable.testing.TestPostgres;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;
import reactor.core.scheduler.Schedulers;

/**
 * The README's demo: an embedded PostgreSQL (or DURABLE_PG_URL), two queues, a few thousand jobs,
 * a line of progress every second from the first (the server's start, the inserts, the runs) and
 * one summary line at the end, with what the figure measures.
 */
public final class Demo {

    record Email(String to, String subject) {
    }

    record Invoice(long customer, long cents) {
    }

    public static void main(String[] args) {
        int jobs = args.length > 0 ? Integer.parseInt(args[0]) : 5000;
        long began = System.nanoTime();
        System.out.println("Durable demo: " + jobs + " jobs on two queues of one engine, inserted and run at once.");
        System.out.println("Starting PostgreSQL (embedded unless " + TestPostgres.URL_ENV + " is set;"
                + " a first start unpacks it, which takes a while)...");
        TestDatabase db = whileWaiting("starting PostgreSQL", began, () -> TestPostgres.newDatabase("demo"));
        AtomicLong sent = new AtomicLong();
        AtomicLong billed = new AtomicLong();

        DurableEngine engine = DurableEngine.builder(db.engineOptions()
                        .poolMaxSize(12)
                        .handlerScheduler(Schedulers.parallel())
                        .queue(QueueOptions.builder("email").concurrency(50).prefetch(50).minDemand(25).build())
                        .queue(QueueOptions.builder("billing").concurrency(20).prefetch(20).minDemand(10).build())
                        .build())
                .register(JobDefinition.of("send-email", Email.class, (Email email) ->
                                // Stands in for a call to a mail API: a short non-blocking wait.
                                Mono.delay(Duration.ofMillis(ThreadLocalRandom.current().nextInt(1, 5)))
                                        .doOnNext(tick -> sent.incrementAndGet())
                                        .thenReturn("sent to " + email.to()))
                        .queue("email"))
                .register(JobDefinition.of("charge", Invoice.class, (Invoice invoice) -> {
                            billed.incrementAndGet();
                            return Mono.just(invoice.cents());
                        })
                        .queue("billing"))
                .build();
        whileWaiting("applying the schema, starting the queues", began, () -> engine.start().block());
        System.out.printf("%5.1f s  engine started%n", seconds(began));

        long started = System.nanoTime();
        List<JobRequest> requests = new ArrayList<>(jobs);
        for (int i = 0; i < jobs; i++) {
            requests.add(i % 3 == 0
                    ? JobRequest.of("charge", new Invoice(i, 100L * i))
                    : JobRequest.of("send-email", new Email("user" + i + "@example.com", "Welcome")));
        }
        AtomicLong inserted = new AtomicLong();
        // Inserted while the queues already run them, as an application would: progress meanwhile.
        reactor.core.Disposable inserting = Flux.fromIterable(requests).buffer(500).concatMap(engine::insertAll)
                .subscribe(ids -> inserted.addAndGet(ids.size()), error -> System.out.println("insert failed: " + error));

        long done;
        do {
            Mono.delay(Duration.ofSeconds(1)).block();
            done = count(engine, InstanceStatus.DONE);
            System.out.printf("%5.1f s  inserted %d/%d, done %d  (emails %d, charges %d)%n",
                    seconds(began), inserted.get(), jobs, done, sent.get(), billed.get());
        } while (done < jobs && System.nanoTime() - started < Duration.ofMinutes(5).toNanos());
        inserting.dispose();
        double seconds = (System.nanoTime() - started) / 1e9;
        System.out.printf("completed %d/%d in %.2f s (%.0f jobs/s)%n", done, jobs, seconds, done / seconds);
        System.out.println("(inserts and runs of one engine together, on this machine as loaded as it is now; the"
                + " throughput benchmark is benchmarks/shootout, on a quiet machine: see docs/performance.md, Numbers)");

        engine.close();
        db.close();
        System.exit(done == jobs ? 0 : 1);
    }

    private static double seconds(long since) {
        return (System.nanoTime() - since) / 1e9;
    }

    /** Runs {@code work} on this thread, saying every second that it is still under way. */
    private static <T> T whileWaiting(String what, long began, java.util.function.Supplier<T> work) {
        reactor.core.Disposable ticker = Flux.interval(Duration.ofSeconds(1))
                .subscribe(tick -> System.out.printf("%5.1f s  %s...%n", seconds(began), what));
        try {
            return work.get();
        } finally {
            ticker.dispose();
        }
    }

    private static long count(DurableEngine engine, InstanceStatus status) {
        Long total = 0L;
        long after = 0;
        while (true) {
            List<Long> page = engine.list(null, status, after, 10_000).map(i -> i.id()).collectList().block();
            if (page == null || page.isEmpty()) {
                return total;
            }
            total += page.size();
            after = page.get(page.size() - 1);
        }
    }
}
