/**
 * Maintenance, one small service per task: {@link dev.durable.internal.maintenance.Reaper},
 * {@link dev.durable.internal.maintenance.AwaitExpiry},
 * {@link dev.durable.internal.maintenance.GarbageCollector},
 * {@link dev.durable.internal.maintenance.LimiterReconcile} and
 * {@link dev.durable.internal.maintenance.BucketSweeper}, each on its own tick with its own switch,
 * batch size, budget and timeout ({@link dev.durable.internal.maintenance.MaintenanceService}), all
 * sharing one {@link dev.durable.internal.maintenance.Lane} so maintenance holds at most one of the
 * engine's connections at a time.
 */
@NullMarked
package dev.durable.internal.maintenance;

import org.jspecify.annotations.NullMarked;
