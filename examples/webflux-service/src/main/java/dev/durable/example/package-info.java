/**
 * An example Spring WebFlux service on the Durable starter: REST endpoints to insert jobs and
 * workflows, signal, cancel and retry them, a Server-Sent-Events stream of the engine's job events,
 * and a dashboard page served from {@code static/}.
 */
@NullMarked
package dev.durable.example;

import org.jspecify.annotations.NullMarked;
