/** Durable's implementation. Nothing here is API: it may change in any release. */
@NullMarked
package dev.durable.internal;

import org.jspecify.annotations.NullMarked;
