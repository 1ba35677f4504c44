/**
 * How handlers of every shape become the engine's {@code Mono}: the scheduler blocking handlers run
 * on, and the watch that tells when a handler blocks a non-blocking thread.
 */
@NullMarked
package dev.durable.internal.handler;

import org.jspecify.annotations.NullMarked;
