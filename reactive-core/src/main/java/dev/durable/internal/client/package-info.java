/**
 * The engine's client side: the insert pipeline (plan the statement by mode and place, one
 * epilogue for event order, claim hand-over, pokes and warnings), the insert batcher, the settle
 * waiters, signals and cancels, the permits of the engine's limits for code outside jobs, and the
 * warnings a client that runs no queue gives.
 */
@NullMarked
package dev.durable.internal.client;

import org.jspecify.annotations.NullMarked;
