package dev.durable;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.datatype.jsr310.JavaTimeModule;

/** The default codec: Jackson, with java.time support, records and ISO dates. */
public final class JacksonJsonCodec implements JsonCodec {

    private final ObjectMapper mapper;

    public JacksonJsonCodec() {
        this(new ObjectMapper()
                .registerModule(new JavaTimeModule())
                .disable(SerializationFeature.WRITE_DATES_AS_TIMESTAMPS)
                .disable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES));
    }

    /** Uses the caller's mapper as configured. */
    public JacksonJsonCodec(ObjectMapper mapper) {
        this.mapper = mapper;
    }

    @Override
    public String encode(Object value) {
        try {
            return mapper.writeValueAsString(value);
        } catch (JsonProcessingException e) {
            throw new DurableException("cannot encode " + value.getClass().getName() + " as JSON: "
                    + e.getOriginalMessage(), e);
        }
    }

    /** Builds and caches the type's deserializer now (Jackson guards its cache with a lock). */
    @Override
    public void prepare(Class<?> type) {
        mapper.canDeserialize(mapper.constructType(type));
    }

    @Override
    public <T> T decode(String json, Class<T> type) {
        try {
            return mapper.readValue(json, type);
        } catch (JsonProcessingException e) {
            throw new DurableException("cannot decode JSON as " + type.getName() + ": "
                    + e.getOriginalMessage(), e);
        }
    }
}
