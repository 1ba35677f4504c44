package dev.durable;

/** What a signal delivery did. A signal with no live target is a {@link NoTargetException}. */
public enum SignalResult {
    /** Stored in the inbox; an instance awaiting that name was woken. */
    DELIVERED,
    /** A signal with the same dedup key was delivered before: nothing changed. */
    DUPLICATE
}
