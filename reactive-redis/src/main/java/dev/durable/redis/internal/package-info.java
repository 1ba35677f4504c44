/** The Lettuce implementations behind the Redis module's API; not for direct use. */
@NullMarked
package dev.durable.redis.internal;

import org.jspecify.annotations.NullMarked;
