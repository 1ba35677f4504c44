package dev.durable;

/** A job or workflow type that no definition is registered for. */
public class UnknownTypeException extends InvalidRequestException {

    private static final long serialVersionUID = 1L;

    private final String type;

    public UnknownTypeException(String type) {
        super("unknown type '" + type + "': register a definition for it on the engine, or turn"
                + " off EngineOptions.rejectUnknownTypes on an engine that only enqueues");
        this.type = type;
    }

    public String type() {
        return type;
    }
}
