/** The poke transports of the core. */
@NullMarked
package dev.durable.internal.poke;

import org.jspecify.annotations.NullMarked;
