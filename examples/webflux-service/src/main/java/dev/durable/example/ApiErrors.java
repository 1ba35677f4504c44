package dev.durable.example;

import dev.durable.DuplicateCorrelationKeyException;
import dev.durable.DurableException;
import dev.durable.InvalidRequestException;
import dev.durable.NoTargetException;
import dev.durable.admin.InstanceStateException;
import dev.durable.UnknownTypeException;
import org.springframework.http.HttpStatus;
import org.springframework.http.ProblemDetail;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.RestControllerAdvice;

/**
 * Durable's typed errors as HTTP statuses, with the engine's message (which names the rule broken)
 * as an RFC 9457 problem detail.
 */
@RestControllerAdvice
public class ApiErrors {

    @ExceptionHandler({InvalidRequestException.class, UnknownTypeException.class})
    ProblemDetail badRequest(DurableException error) {
        return ProblemDetail.forStatusAndDetail(HttpStatus.BAD_REQUEST, error.getMessage());
    }

    @ExceptionHandler(DuplicateCorrelationKeyException.class)
    ProblemDetail duplicate(DuplicateCorrelationKeyException error) {
        return ProblemDetail.forStatusAndDetail(HttpStatus.CONFLICT, error.getMessage());
    }

    @ExceptionHandler(NoTargetException.class)
    ProblemDetail noTarget(NoTargetException error) {
        return ProblemDetail.forStatusAndDetail(HttpStatus.NOT_FOUND, error.getMessage());
    }

    @ExceptionHandler(InstanceStateException.class)
    ProblemDetail notNow(InstanceStateException error) {
        return ProblemDetail.forStatusAndDetail(HttpStatus.CONFLICT, error.getMessage());
    }
}
