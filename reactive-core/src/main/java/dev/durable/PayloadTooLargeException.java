package dev.durable;

/** Arguments, state or a signal payload whose JSON is larger than the engine accepts. */
public class PayloadTooLargeException extends InvalidRequestException {

    private static final long serialVersionUID = 1L;

    private final int bytes;
    private final int limit;

    public PayloadTooLargeException(String what, int bytes, int limit) {
        super(what + " is " + bytes + " bytes of JSON, above the limit of " + limit
                + " (EngineOptions.maxPayloadBytes)");
        this.bytes = bytes;
        this.limit = limit;
    }

    public int bytes() {
        return bytes;
    }

    public int limit() {
        return limit;
    }
}
