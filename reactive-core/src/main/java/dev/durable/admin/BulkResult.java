package dev.durable.admin;

/**
 * What a bulk action did: {@code matched} instances matched the filter when they were read,
 * {@code affected} of them were acted on (the others had moved on, or the action did not apply to
 * them), in {@code batches} statements or batches.
 */
public record BulkResult(long matched, long affected, int batches) {
}
