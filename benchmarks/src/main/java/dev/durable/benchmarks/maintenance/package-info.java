/** Maintenance under sustained load: the table stays bounded while the engine runs at its own throughput. */
@NullMarked
package dev.durable.benchmarks.maintenance;

import org.jspecify.annotations.NullMarked;
