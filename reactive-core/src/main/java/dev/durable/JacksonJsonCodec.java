package dev.durable;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.Module;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.SerializationFeature;
import com.fasterxml.jackson.datatype.jsr310.JavaTimeModule;

/**
 * The default codec: Jackson, with java.time support, records and ISO dates, and Kotlin classes
 * (data classes, default values) when {@code jackson-module-kotlin} is on the classpath, as it is
 * with {@code durable-kotlin}.
 */
public final class JacksonJsonCodec implements JsonCodec {

    private static final String KOTLIN_MODULE = "com.fasterxml.jackson.module.kotlin.KotlinModule";

    private final ObjectMapper mapper;

    public JacksonJsonCodec() {
        this(withKotlin(new ObjectMapper()
                .registerModule(new JavaTimeModule())
                .disable(SerializationFeature.WRITE_DATES_AS_TIMESTAMPS)
                .disable(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES)));
    }

    /** Only Kotlin's module of those on the classpath: others would change what Java classes encode to. */
    private static ObjectMapper withKotlin(ObjectMapper mapper) {
        for (Module module : ObjectMapper.findModules(JacksonJsonCodec.class.getClassLoader())) {
            if (module.getClass().getName().equals(KOTLIN_MODULE)) {
                mapper.registerModule(module);
            }
        }
        return mapper;
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

    @Override
    public JsonNode tree(String json) {
        try {
            return mapper.readTree(json);
        } catch (JsonProcessingException e) {
            throw new DurableException("cannot read JSON: " + e.getOriginalMessage(), e);
        }
    }
}
