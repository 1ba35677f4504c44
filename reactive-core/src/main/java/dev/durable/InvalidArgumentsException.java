package dev.durable;

import org.jspecify.annotations.Nullable;

/**
 * Arguments (of a job) or a state (of a workflow) that do not decode to the type its definition
 * declares: refused at insert, so a wrong shape never waits in the queue to fail at run time.
 * {@link #field()} is where decoding broke ({@code items[0].sku}), when the codec says.
 */
public class InvalidArgumentsException extends InvalidRequestException {

    private static final long serialVersionUID = 1L;

    private final String type;
    private final @Nullable String field;

    public InvalidArgumentsException(String type, Class<?> expected, @Nullable String field, String problem) {
        super("arguments of type '" + type + "' do not fit " + expected.getName()
                + (field == null || field.isEmpty() ? "" : " at field '" + field + "'") + ": " + problem);
        this.type = type;
        this.field = field == null || field.isEmpty() ? null : field;
    }

    /** The job or workflow type the request named. */
    public String type() {
        return type;
    }

    /** The path of the field that did not fit, or null when the whole value did not. */
    public @Nullable String field() {
        return field;
    }
}
