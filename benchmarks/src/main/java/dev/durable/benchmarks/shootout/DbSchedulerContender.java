package dev.durable.benchmarks.shootout;

import com.github.kagkarlsson.scheduler.Scheduler;
import com.github.kagkarlsson.scheduler.event.AbstractSchedulerListener;
import com.github.kagkarlsson.scheduler.task.ExecutionComplete;
import com.github.kagkarlsson.scheduler.task.TaskInstance;
import com.github.kagkarlsson.scheduler.task.helper.OneTimeTask;
import com.github.kagkarlsson.scheduler.task.helper.Tasks;
import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

/**
 * db-scheduler 16.12.0 (com.github.kagkarlsson:db-scheduler) in its high-throughput set-up, as its
 * own documentation gives it:
 * <ul>
 *   <li>README, "Polling strategy": "If you are running &gt;1000 executions/s you might want to use
 *       the lock-and-fetch polling-strategy for lower overhead and higher throughput", i.e.
 *       {@code pollUsingLockAndFetch(lower, upper)}, "For high throughput (i.e. keep threads busy),
 *       set to for example 1.0, 4.0";
 *   <li>docs/performance.md, benchmark table: lock-and-fetch with "20 threads, lower 4.0, upper
 *       20.0" measured 10,600 executions/s, the best per-thread figure there. We take those
 *       fractions, with {@code threads} = the connection budget (20 by default);
 *   <li>README, "Consider tuning": {@code pollingInterval} (default 10 s) is how often it looks
 *       for due executions: set small (100 ms) so the floor is short; and
 *       {@code enableImmediateExecution()} so an execution scheduled for now wakes the local
 *       scheduler at once (the idle latency figure);
 *   <li>README, "schedule in batches": {@code scheduler.scheduleBatch(instances, Instant.now())},
 *       a JDBC batch; pgjdbc's {@code reWriteBatchedInserts=true} turns it into multi-row
 *       INSERTs (pgjdbc's documented batch-insert setting).
 * </ul>
 * Table and indexes are db-scheduler's own PostgreSQL DDL (postgresql_tables.sql, with the
 * columns 16.12.0 reads and writes). A one-time task's row is deleted when it completes, so
 * committed = inserted minus rows left.
 */
final class DbSchedulerContender implements Contender {

    static final String SCHEMA = "shootout_dbs";
    static final String TABLE = SCHEMA + ".scheduled_tasks";
    static final double LOWER_LIMIT = 4.0;
    static final double UPPER_LIMIT = 20.0;
    static final Duration POLLING_INTERVAL = Duration.ofMillis(100);
    static final int BATCH = 1_000;

    private final Target target;
    private final int connections;
    private final OneTimeTask<Void> task = Tasks.oneTime("noop")
            .execute((instance, context) -> Probe.started(Long.parseLong(instance.getId())));
    private HikariDataSource dataSource;
    private Scheduler scheduler;

    DbSchedulerContender(Target target, int connections) {
        this.target = target;
        this.connections = connections;
    }

    @Override
    public String name() {
        return "db_scheduler";
    }

    @Override
    public String schema() {
        return SCHEMA;
    }

    @Override
    public String settings() {
        return "HikariCP max " + connections + ", threads " + connections + ", pollUsingLockAndFetch("
                + LOWER_LIMIT + ", " + UPPER_LIMIT + "), pollingInterval " + POLLING_INTERVAL.toMillis()
                + " ms, enableImmediateExecution, scheduleBatch of " + BATCH + ", reWriteBatchedInserts=true";
    }

    @Override
    public void start() {
        createTable(target, SCHEMA);
        dataSource = Jdbc.pool(target, "db-scheduler", connections);
        scheduler = Scheduler.create(dataSource, task)
                .tableName(TABLE)
                .threads(connections)
                .pollUsingLockAndFetch(LOWER_LIMIT, UPPER_LIMIT)
                .pollingInterval(POLLING_INTERVAL)
                .enableImmediateExecution()
                .addSchedulerListener(new AbstractSchedulerListener() {
                    @Override
                    public void onExecutionComplete(ExecutionComplete complete) {
                        Probe.settled(Long.parseLong(complete.getExecution().taskInstance.getId()));
                    }
                })
                .build();
        scheduler.start();
    }

    @Override
    public int insertBatchSize() {
        return BATCH;
    }

    @Override
    public void insertBatch(List<Long> seqs) {
        List<TaskInstance<?>> instances = new ArrayList<>(seqs.size());
        for (Long seq : seqs) {
            instances.add(task.instance(Long.toString(seq)));
        }
        scheduler.scheduleBatch(instances, Instant.now());
    }

    @Override
    public void insertOne(long seq) {
        scheduler.scheduleIfNotExists(task.instance(Long.toString(seq)), Instant.now());
    }

    @Override
    public String settleSource() {
        return "SchedulerListener.onExecutionComplete (called once the completion handler deleted the row)";
    }

    @Override
    public long committed(Target target, long insertedSoFar) {
        return insertedSoFar - target.queryLong("SELECT count(*) FROM " + TABLE);
    }

    @Override
    public void stop() {
        if (scheduler != null) {
            scheduler.stop();
        }
        if (dataSource != null) {
            dataSource.close();
        }
    }

    /** db-scheduler's table and indexes in a new schema: its own PostgreSQL DDL (postgresql_tables.sql). */
    static void createTable(Target target, String schema) {
        String table = schema + ".scheduled_tasks";
        target.execute("CREATE SCHEMA " + schema,
                "CREATE TABLE " + table + " (task_name text NOT NULL, task_instance text NOT NULL,"
                        + " task_data bytea, execution_time timestamp with time zone NOT NULL,"
                        + " picked boolean NOT NULL, picked_by text, last_success timestamp with time zone,"
                        + " last_failure timestamp with time zone, consecutive_failures int,"
                        + " last_heartbeat timestamp with time zone, version bigint NOT NULL, priority smallint,"
                        + " PRIMARY KEY (task_name, task_instance))",
                "CREATE INDEX execution_time_idx ON " + table + " (execution_time)",
                "CREATE INDEX last_heartbeat_idx ON " + table + " (last_heartbeat)",
                "CREATE INDEX priority_execution_time_idx ON " + table + " (priority DESC, execution_time ASC)");
    }

    /** HikariCP on the target, shared by the JDBC peers. */
    static final class Jdbc {

        private Jdbc() {
        }

        static HikariDataSource pool(Target target, String name, int maxSize) {
            HikariConfig config = new HikariConfig();
            config.setPoolName(name);
            config.setJdbcUrl(target.jdbcUrl);
            config.setDataSourceProperties(target.jdbcProperties);
            config.addDataSourceProperty("reWriteBatchedInserts", "true");
            config.setMaximumPoolSize(maxSize);
            config.setMinimumIdle(Math.min(2, maxSize));
            return new HikariDataSource(config);
        }
    }
}
