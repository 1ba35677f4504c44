/** The dashboard's pages, handlers, CSRF check and shared event hub. */
@NullMarked
package dev.durable.dashboard.internal;

import org.jspecify.annotations.NullMarked;
