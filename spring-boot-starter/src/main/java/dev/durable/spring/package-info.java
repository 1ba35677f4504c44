/**
 * Spring Boot auto-configuration of a Durable engine: {@code durable.*} properties, registration
 * of job, workflow and recurring-job beans, start and graceful drain with the application
 * context, Micrometer meters and observations, and a reactive health indicator.
 */
@NullMarked
package dev.durable.spring;

import org.jspecify.annotations.NullMarked;
