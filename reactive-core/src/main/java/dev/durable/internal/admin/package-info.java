/**
 * The admin API's implementation: {@link dev.durable.internal.admin.EngineAdmin} over the admin's
 * statements and the engine's client calls ({@link dev.durable.internal.admin.EngineCalls}), with the
 * bulk actions, workflow migrations and limits' view beside it.
 */
@NullMarked
package dev.durable.internal.admin;

import org.jspecify.annotations.NullMarked;
