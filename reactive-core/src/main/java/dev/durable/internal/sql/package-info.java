/** Every SQL statement Durable runs, the migrations that run them and the rows they map. */
@NullMarked
package dev.durable.internal.sql;

import org.jspecify.annotations.NullMarked;
