package dev.durable.benchmarks.sql;

import io.r2dbc.spi.Connection;
import java.time.Duration;
import java.util.List;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/**
 * Prints {@code EXPLAIN (ANALYZE, BUFFERS)} of the pick statement over backlogs of runnable rows
 * (10k and 1M by default, or the sizes given as arguments), each in a transaction rolled back.
 * The profile behind PickBenchmark's figures:
 * {@code java -cp benchmarks/target/benchmarks.jar dev.durable.benchmarks.sql.PickExplain 10000 1000000}.
 */
public final class PickExplain {

    private PickExplain() {
    }

    public static void main(String[] args) {
        List<String> sizes = args.length == 0 ? List.of("10000", "1000000") : List.of(args);
        for (String size : sizes) {
            int backlog = Integer.parseInt(size);
            try (BenchDatabase db = new BenchDatabase("explain_" + backlog)) {
                db.fill(backlog, false);
                String pick = db.statements.picks().pickText().replace("$1", "'" + BenchDatabase.QUEUE + "'").replace("$2", "100")
                        .replace("$3", "'" + BenchDatabase.WORKER + "'")
                        .replace("$4", Long.toString(BenchDatabase.LEASE_MILLIS))
                        .replace("$5", "ARRAY['noop']").replace("$6", "ARRAY[1]");
                System.out.println("== pick of 100 over " + backlog + " runnable rows");
                for (int run = 0; run < 2; run++) {
                    System.out.println("-- run " + (run + 1));
                    explain(db.admin(), pick).forEach(System.out::println);
                }
            }
        }
        System.exit(0);
    }

    private static List<String> explain(Connection connection, String statement) {
        return Mono.from(connection.beginTransaction())
                .thenMany(Flux.from(connection.createStatement("EXPLAIN (ANALYZE, BUFFERS) " + statement).execute())
                        .concatMap(result -> result.map(row -> row.get(0, String.class))))
                .collectList()
                .flatMap(lines -> Mono.from(connection.rollbackTransaction()).thenReturn(lines))
                .block(Duration.ofMinutes(5));
    }
}
