/**
 * The {@code durable} health indicator on Spring Boot 3.5, whose health API lives in
 * {@code org.springframework.boot.actuate.health} (Boot 4 moved it). Inert on Boot 4.
 */
@NullMarked
package dev.durable.spring.boot3;

import org.jspecify.annotations.NullMarked;
