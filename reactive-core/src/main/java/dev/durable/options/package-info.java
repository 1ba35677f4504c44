/**
 * How Durable's options classes declare their options: each option once, as an {@link
 * dev.durable.options.Option} in its class's {@link dev.durable.options.OptionList}, with its name,
 * type, default, check and description. The builders, {@code toString}, {@code equals}, the messages
 * of a broken value and the Spring Boot starter's properties and their metadata all come from those
 * declarations.
 */
@NullMarked
package dev.durable.options;

import org.jspecify.annotations.NullMarked;
