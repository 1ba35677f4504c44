/** The running engine: queue schedulers, the executor, the outcome committer and maintenance. */
@NullMarked
package dev.durable.internal.engine;

import org.jspecify.annotations.NullMarked;
