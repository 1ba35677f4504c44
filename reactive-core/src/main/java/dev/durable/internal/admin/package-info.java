/** The admin API's implementation over AdminSql and the engine's client calls. */
@NullMarked
package dev.durable.internal.admin;

import org.jspecify.annotations.NullMarked;
