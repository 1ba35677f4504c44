package dev.durable;

/** Why a queue's scheduler picked: the reasons counted in {@link QueueStats#picksByTrigger()}. */
public enum PickTrigger {
    /** The idle poll timer fired. */
    POLL,
    /** A poke (an insert, a signal, a woken parent) reached an idle scheduler. */
    POKE,
    /** A finished run freed a slot and the buffer was empty. */
    DEMAND,
    /** The previous pick came back full, so more may be waiting. */
    PICKED_FULL,
    /** Rows were claimed by the insert that created them (claim-on-insert), with no pick at all. */
    INSERT
}
