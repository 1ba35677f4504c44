/**
 * Operating Durable: list and search instances over live and settled rows with keyset paging, count
 * them by queue and status, read one in detail, and act on one or on every instance a filter matches.
 * Start with {@link dev.durable.DurableEngine#admin()}.
 */
@NullMarked
package dev.durable.admin;

import org.jspecify.annotations.NullMarked;
