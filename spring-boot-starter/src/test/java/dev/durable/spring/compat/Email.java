package dev.durable.spring.compat;

/** The Spring Boot guide's job arguments. */
public record Email(String to, String subject) {
}
