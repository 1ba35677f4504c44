package dev.durable;

/** A call on an engine that was closed: build a new engine. */
public class EngineClosedException extends DurableException {

    private static final long serialVersionUID = 1L;

    public EngineClosedException(String engine) {
        super("engine " + engine + " is closed: build a new one");
    }
}
