package dev.durable.internal;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.durable.DurableException;

/** JSON text as a tree, for codecs that are not Jackson's (the default of {@code JsonCodec.tree}). */
public final class JsonTrees {

    private static final ObjectMapper MAPPER = new ObjectMapper();

    private JsonTrees() {
    }

    public static JsonNode read(String json) {
        try {
            return MAPPER.readTree(json);
        } catch (JsonProcessingException e) {
            throw new DurableException("cannot read JSON: " + e.getOriginalMessage(), e);
        }
    }
}
