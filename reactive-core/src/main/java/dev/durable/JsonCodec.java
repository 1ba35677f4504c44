package dev.durable;

/**
 * Turns arguments, state, results and signal payloads into JSON and back. The default is
 * {@link JacksonJsonCodec}; plug another one into {@link EngineOptions.Builder#codec}.
 */
public interface JsonCodec {

    /** JSON text for a value; a codec error is a {@link DurableException}. */
    String encode(Object value);

    /** The value of JSON text as the given type; malformed JSON is a {@link DurableException}. */
    <T> T decode(String json, Class<T> type);
}
