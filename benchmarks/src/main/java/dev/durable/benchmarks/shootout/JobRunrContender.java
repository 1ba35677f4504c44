package dev.durable.benchmarks.shootout;

import com.zaxxer.hikari.HikariDataSource;
import java.time.Duration;
import java.util.List;
import org.jobrunr.configuration.JobRunr;
import org.jobrunr.jobs.lambdas.JobRequest;
import org.jobrunr.jobs.lambdas.JobRequestHandler;
import org.jobrunr.scheduling.JobRequestScheduler;
import org.jobrunr.server.BackgroundJobServerConfiguration;
import org.jobrunr.server.JobActivator;
import org.jobrunr.storage.sql.postgres.PostgresStorageProvider;

/**
 * JobRunr 8.4.2 open-source edition on its PostgreSQL storage provider, configured as its own
 * documentation and API give it:
 * <ul>
 *   <li>{@code BackgroundJobServerConfiguration.andWorkerCount(n)}: "the maximum number of jobs
 *       that will be run in parallel", set to the connection budget;
 *   <li>{@code andPollInterval(5 s)}: the smallest JobRunr accepts on a SQL store
 *       ({@code AbstractStorageProvider.validatePollInterval}: "The smallest supported pollInterval
 *       is 5 seconds"), down from the default 15 s. A worker that goes idle onboards new work at
 *       once ({@code JobSteward.notifyThreadIdle}), so the poll bounds idle latency, not
 *       throughput;
 *   <li>many jobs through {@code JobRequestScheduler.enqueue(Stream)} ("Creates new fire-and-forget
 *       jobs for each item in the input stream"), saved in batches by the storage provider, with
 *       pgjdbc's {@code reWriteBatchedInserts=true};
 *   <li>JobRequest / JobRequestHandler jobs, the handler given by a {@link JobActivator}.
 * </ul>
 * Its tables live in their own schema (a "schema." table prefix); a job counts as complete when
 * its row is in state SUCCEEDED.
 */
final class JobRunrContender implements Contender {

    static final String SCHEMA = "shootout_jobrunr";
    static final Duration POLL_INTERVAL = Duration.ofSeconds(5);
    static final int BATCH = 1_000;

    /** A no-op job carrying its sequence number. A plain bean for JobRunr's JSON mapper. */
    public static final class Noop implements JobRequest {

        private long seq;

        public Noop() {
        }

        public Noop(long seq) {
            this.seq = seq;
        }

        public long getSeq() {
            return seq;
        }

        public void setSeq(long seq) {
            this.seq = seq;
        }

        @Override
        public Class<NoopHandler> getJobRequestHandler() {
            return NoopHandler.class;
        }
    }

    public static final class NoopHandler implements JobRequestHandler<Noop> {

        @Override
        public void run(Noop job) {
            Probe.started(job.getSeq());
        }
    }

    private final Target target;
    private final int connections;
    private HikariDataSource dataSource;
    private JobRequestScheduler scheduler;

    JobRunrContender(Target target, int connections) {
        this.target = target;
        this.connections = connections;
    }

    @Override
    public String name() {
        return "jobrunr";
    }

    @Override
    public String schema() {
        return SCHEMA;
    }

    @Override
    public String settings() {
        return "HikariCP max " + connections + ", workerCount " + connections + ", pollInterval "
                + POLL_INTERVAL.toSeconds() + " s (the minimum), enqueue(Stream) of " + BATCH
                + ", reWriteBatchedInserts=true";
    }

    @Override
    public void start() {
        target.execute("CREATE SCHEMA " + SCHEMA);
        dataSource = DbSchedulerContender.Jdbc.pool(target, "jobrunr", connections);
        NoopHandler handler = new NoopHandler();
        scheduler = JobRunr.configure()
                .useJobActivator(new JobActivator() {
                    @Override
                    @SuppressWarnings("unchecked")
                    public <T> T activateJob(Class<T> type) {
                        return type == NoopHandler.class ? (T) handler : null;
                    }
                })
                .useStorageProvider(new PostgresStorageProvider(dataSource, SCHEMA + "."))
                .useBackgroundJobServer(BackgroundJobServerConfiguration.usingStandardBackgroundJobServerConfiguration()
                        .andWorkerCount(connections)
                        .andPollInterval(POLL_INTERVAL))
                .initialize()
                .getJobRequestScheduler();
    }

    @Override
    public int insertBatchSize() {
        return BATCH;
    }

    @Override
    public void insertBatch(List<Long> seqs) {
        scheduler.enqueue(seqs.stream().map(Noop::new));
    }

    @Override
    public void insertOne(long seq) {
        scheduler.enqueue(new Noop(seq));
    }

    @Override
    public long committed(Target target, long insertedSoFar) {
        return target.queryLong("SELECT count(*) FROM " + SCHEMA + ".jobrunr_jobs WHERE state = 'SUCCEEDED'");
    }

    @Override
    public void stop() {
        JobRunr.destroy();
        if (dataSource != null) {
            dataSource.close();
        }
    }
}
