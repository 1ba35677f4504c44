package dev.durable.internal;

import com.fasterxml.jackson.databind.JsonMappingException;
import dev.durable.Definition;
import dev.durable.InvalidArgumentsException;
import dev.durable.JobDefinition;
import dev.durable.JsonCodec;
import dev.durable.WorkflowDefinition;
import org.jspecify.annotations.Nullable;

/**
 * Checks at insert that a request's arguments decode to the type its definition declares. Values
 * already of that type (the usual case: the caller passed the record) cost nothing; others (maps
 * from a JSON API, a string for a number) are decoded once from the JSON about to be stored, as the
 * run would decode them.
 */
final class ArgumentCheck {

    private ArgumentCheck() {
    }

    static void check(@Nullable Definition definition, @Nullable Object args, @Nullable String json, JsonCodec codec) {
        if (definition == null || args == null || json == null) {
            return;
        }
        Class<?> declared = definition instanceof JobDefinition<?, ?> job ? job.argsType()
                : definition instanceof WorkflowDefinition<?> workflow ? workflow.stateType() : null;
        if (declared == null || declared == Object.class || boxed(declared).isInstance(args)) {
            return;
        }
        try {
            codec.decode(json, declared);
        } catch (RuntimeException misfit) {
            throw new InvalidArgumentsException(definition.type(), declared, field(misfit), problem(misfit));
        }
    }

    private static Class<?> boxed(Class<?> type) {
        if (!type.isPrimitive()) {
            return type;
        }
        return java.lang.invoke.MethodType.methodType(type).wrap().returnType();
    }

    /** Jackson's path to the field that failed ({@code items[0].sku}), when the codec is Jackson. */
    private static @Nullable String field(Throwable error) {
        for (Throwable cause = error; cause != null; cause = cause.getCause()) {
            if (cause instanceof JsonMappingException mapping && !mapping.getPath().isEmpty()) {
                StringBuilder path = new StringBuilder();
                for (JsonMappingException.Reference reference : mapping.getPath()) {
                    if (reference.getFieldName() != null) {
                        path.append(path.length() == 0 ? "" : ".").append(reference.getFieldName());
                    } else if (reference.getIndex() >= 0) {
                        path.append('[').append(reference.getIndex()).append(']');
                    }
                }
                return path.toString();
            }
        }
        return null;
    }

    private static String problem(Throwable error) {
        for (Throwable cause = error; cause != null; cause = cause.getCause()) {
            if (cause instanceof JsonMappingException mapping) {
                String message = mapping.getOriginalMessage();
                // Jackson's first line says what; the rest points into the JSON we made ourselves.
                int newline = message.indexOf('\n');
                return newline < 0 ? message : message.substring(0, newline);
            }
        }
        return String.valueOf(error.getMessage());
    }
}
