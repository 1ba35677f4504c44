/**
 * Tests of the starter that use no API of one Spring Boot line only (HTTP, the context, Spring's
 * transactions): they run in this module on Boot 4 and again in {@code spring-boot3-it} on Boot 3.5.
 * The Spring snippets of docs/spring-boot.md live here, as code these tests run.
 */
@NullMarked
package dev.durable.spring.compat;

import org.jspecify.annotations.NullMarked;
