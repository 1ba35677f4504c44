/** Issue 19's admin API: a page of the listing and the counts over a big history. */
@NullMarked
package dev.durable.benchmarks.admin;

import org.jspecify.annotations.NullMarked;
