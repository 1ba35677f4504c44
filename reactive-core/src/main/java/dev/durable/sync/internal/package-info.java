/** The sync scheduler's implementation. Nothing here is API: it may change in any release. */
@NullMarked
package dev.durable.sync.internal;

import org.jspecify.annotations.NullMarked;
