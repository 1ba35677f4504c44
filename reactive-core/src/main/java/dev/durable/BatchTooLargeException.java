package dev.durable;

/**
 * An insert refused whole because its requests carry more bytes in aggregate (payloads, keys and
 * names, as UTF-8) than {@link EngineOptions#maxBatchBytes()} allows. Nothing was written; split
 * the batch.
 */
public class BatchTooLargeException extends InvalidRequestException {

    private static final long serialVersionUID = 1L;

    private final int requests;
    private final long bytes;
    private final int limit;

    /**
     * @param requests how many requests the batch had
     * @param bytes    how many bytes it had reached when it was refused (counted as it was built, so
     *                 at most one request past the limit)
     */
    public BatchTooLargeException(int requests, long bytes, int limit) {
        super("a batch of " + requests + " requests is over " + limit + " bytes in aggregate (reached " + bytes
                + " bytes), the limit (EngineOptions.maxBatchBytes): nothing was inserted; split it");
        this.requests = requests;
        this.bytes = bytes;
        this.limit = limit;
    }

    public int requests() {
        return requests;
    }

    public long bytes() {
        return bytes;
    }

    public int limit() {
        return limit;
    }
}
