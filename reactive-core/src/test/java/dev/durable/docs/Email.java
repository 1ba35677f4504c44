package dev.durable.docs;

/** The README's job arguments. */
public record Email(String to, String subject) {
}
