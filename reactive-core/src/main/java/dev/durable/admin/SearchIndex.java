package dev.durable.admin;

/**
 * The history's opt-in search indexes ({@link DurableAdmin#createSearchIndexes}). Each serves one kind
 * of search over settled instances and is written once per settled instance, so it is a cost every job
 * pays: none is created by the schema's migrations. Without one, its search is still exact: the
 * condition filters the rows the listing walks for its other conditions (the queue's index, a status,
 * a time range, or the whole history newest first), so a rare match with no other condition walks the
 * history until a page is full or the call's timeout ends it.
 */
public enum SearchIndex {

    /**
     * Listing by type: a btree on (type, id) in the history. About 76 bytes of WAL and 32 bytes of
     * index per settled instance.
     */
    TYPE,

    /**
     * Containment search on args/state ({@link InstanceFilter.Builder#stateContains}): a GIN index
     * (jsonb_path_ops) in the history, one entry per leaf of the state. About 313 bytes of WAL and
     * 66 bytes of index per settled instance with a two-field state: more than the rest of a job's
     * settle.
     */
    ARGS,

    /**
     * Listing by queue: a btree on (queue, id) in the history. About 80 bytes of WAL per settled
     * instance, which would be the sixth index entry of a plain job (hence opt-in). Without it a
     * listing by queue filters the history newest first: as fast as with it for a queue that holds
     * much of the history, a walk of the rows in between for a rare one. Failed and cancelled rows by
     * queue have an index of their own either way.
     */
    QUEUE
}
