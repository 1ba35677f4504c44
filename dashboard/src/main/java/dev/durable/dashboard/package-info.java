/**
 * The operator's dashboard: {@link dev.durable.dashboard.DurableDashboard} turns an engine's admin API into
 * server-rendered pages a Spring WebFlux application mounts as a {@code RouterFunction}.
 */
@NullMarked
package dev.durable.dashboard;

import org.jspecify.annotations.NullMarked;
