/**
 * Pokes: how an insert, a signal or a join tells idle schedulers that a queue has runnable work
 * before their next poll. Polling always remains the floor: a lost poke only delays.
 */
@NullMarked
package dev.durable.poke;

import org.jspecify.annotations.NullMarked;
