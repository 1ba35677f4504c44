package dev.durable.redis.internal;

import java.util.concurrent.atomic.AtomicBoolean;
import reactor.util.Logger;

/**
 * Logs an outage once when it starts and once when it ends, however many operations fail in
 * between: a poke or a heartbeat per message would flood the log exactly when it matters.
 */
public final class OutageLog {

    private final Logger log;
    private final String what;
    private final String fallback;
    private final AtomicBoolean down = new AtomicBoolean();

    public OutageLog(Logger log, String what, String fallback) {
        this.log = log;
        this.what = what;
        this.fallback = fallback;
    }

    public void down(Object cause) {
        if (down.compareAndSet(false, true)) {
            log.warn("{}: Redis unreachable ({}); {}", what, cause, fallback);
        }
    }

    /** Whether this ended an outage (so the caller can catch up on what it missed). */
    public boolean up() {
        if (down.compareAndSet(true, false)) {
            log.info("{}: Redis reachable again", what);
            return true;
        }
        return false;
    }
}
