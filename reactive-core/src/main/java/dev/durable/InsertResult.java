package dev.durable;

/**
 * What one request of {@link DurableEngine#insertAll(java.util.List, InsertMode)} came to: the id
 * of the instance it inserted ({@code created}), or, when it was skipped as a duplicate, the id of
 * the live instance that holds its correlation key.
 */
public record InsertResult(long id, boolean created) {
}
