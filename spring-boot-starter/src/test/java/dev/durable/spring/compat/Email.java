package dev.durable.spring.compat;

/** The README's job arguments. */
public record Email(String to, String subject) {
}
