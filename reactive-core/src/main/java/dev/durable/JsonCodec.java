package dev.durable;

import com.fasterxml.jackson.databind.JsonNode;
import dev.durable.internal.JsonTrees;

/**
 * Turns arguments, state, results and signal payloads into JSON and back. The default is
 * {@link JacksonJsonCodec}; plug another one into {@link EngineOptions.Builder#codec}.
 */
public interface JsonCodec {

    /** JSON text for a value; a codec error is a {@link DurableException}. */
    String encode(Object value);

    /** The value of JSON text as the given type; malformed JSON is a {@link DurableException}. */
    <T> T decode(String json, Class<T> type);

    /**
     * Gets ready to decode {@code type}, once, when the engine is built (off any event loop): a
     * codec that builds and caches a decoder per type under a lock does it here, so the first runs
     * of a type never wait on that lock on a handler thread. Does nothing by default.
     */
    default void prepare(Class<?> type) {
    }

    /**
     * JSON text (as this codec wrote it) as a Jackson tree, for code that hands JSON on as JSON (a
     * web endpoint returning an instance's state). Parsed by a plain Jackson mapper by default.
     */
    default JsonNode tree(String json) {
        return JsonTrees.read(json);
    }
}
