package dev.durable.docs;

/** The job arguments of the README and the testing guide. */
public record Email(String to, String subject) {
}
