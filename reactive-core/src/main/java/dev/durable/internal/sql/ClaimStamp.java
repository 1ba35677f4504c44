package dev.durable.internal.sql;

/**
 * The claim's stamp (schema version 5): the transaction that made a claim, written by the claim
 * statements and checked, beside the worker and the attempt, by every statement a claim's owner
 * sends about it (the commit and the settle, the release, the signals' consumption, the claim-time
 * migration, a caller's completion). Worker and attempt alone cannot tell a claim from a later one
 * of the same worker at the same attempt (a step's attempts restart at each transition), so a
 * statement of an earlier claim that arrived late would act on the newer one. The transaction id
 * includes its epoch, so it is never reused.
 */
final class ClaimStamp {

    /** The SET item of a claim statement: the claiming transaction's id. */
    static final String SET = "claim_xid = pg_current_xact_id()::text::bigint";

    private ClaimStamp() {
    }

    /**
     * Whether row {@code row}'s current claim was made by the transaction {@code xid} (a bigint, 0
     * for a claim that recorded none: made as the row was inserted, or by an engine of schema
     * version 4).
     */
    static String matches(String row, String xid) {
        return row + ".claim_xid IS NOT DISTINCT FROM NULLIF(" + xid + "::bigint, 0)";
    }
}
