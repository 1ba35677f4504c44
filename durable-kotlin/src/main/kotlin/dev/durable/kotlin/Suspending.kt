/*
 * Kotlin coroutines for Durable: suspend functions as job handlers and workflow steps, with the
 * guarantees of every other handler shape (the type's timeout, cancellation, retries), and the
 * client's calls as suspend functions.
 */
package dev.durable.kotlin

import dev.durable.DurableEngine
import dev.durable.Instance
import dev.durable.JobContext
import dev.durable.JobDefinition
import dev.durable.JobHandler
import dev.durable.JobRequest
import dev.durable.Outcome
import dev.durable.SignalResult
import dev.durable.StepContext
import dev.durable.StepHandler
import dev.durable.WorkflowDefinition
import java.time.Duration
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.reactor.awaitSingle
import kotlinx.coroutines.reactor.mono

/**
 * A job handler from a suspend function. It starts on the engine's handler thread (unconfined, as
 * a Mono would) and resumes wherever what it awaited completes; a cancelled run cancels the
 * coroutine, and a run past the type's timeout too. A null result completes the job with none.
 */
fun <A : Any, R : Any> suspendHandler(handler: suspend (args: A, context: JobContext) -> R?): JobHandler<A, R> =
    JobHandler { args, context -> mono(Dispatchers.Unconfined) { handler(args, context) } }

/** A job type whose handler is a suspend function of its arguments: `suspendJob<Email, String>("send-email") { ... }`. */
inline fun <reified A : Any, R : Any> suspendJob(type: String, noinline handler: suspend (args: A) -> R?): JobDefinition<A, R> =
    JobDefinition.of(type, A::class.java, suspendHandler<A, R> { args, _ -> handler(args) })

/** A job type whose handler is a suspend function of its arguments and context. */
inline fun <reified A : Any, R : Any> suspendJobWithContext(
    type: String,
    noinline handler: suspend (args: A, context: JobContext) -> R?,
): JobDefinition<A, R> = JobDefinition.of(type, A::class.java, suspendHandler(handler))

/** A workflow step from a suspend function returning its outcome. */
fun <S : Any> suspendStep(step: suspend (context: StepContext<S>) -> Outcome<S>): StepHandler<S> =
    StepHandler { context -> mono(Dispatchers.Unconfined) { step(context) } }

/** Adds a step that is a suspend function: `.suspendStep("charge") { ctx -> ... Outcome.next("ship", ctx.state()) }`. */
fun <S : Any> WorkflowDefinition.Builder<S>.suspendStep(
    name: String,
    step: suspend (context: StepContext<S>) -> Outcome<S>,
): WorkflowDefinition.Builder<S> = step(name, dev.durable.kotlin.suspendStep(step))

/** Inserts one instance and returns its id. */
suspend fun DurableEngine.insertAndAwait(request: JobRequest): Long = insert(request).awaitSingle()

/** Waits until the instance has settled and returns it (a `DurableTimeoutException` after `timeout`). */
suspend fun DurableEngine.awaitSettledAndAwait(id: Long, timeout: Duration): Instance =
    awaitSettled(id, timeout).awaitSingle()

/** Delivers a signal by instance id. */
suspend fun DurableEngine.signalAndAwait(id: Long, name: String, payload: Any? = null, dedupKey: String? = null): SignalResult =
    signal(id, name, payload, dedupKey).awaitSingle()

/** Delivers a signal by correlation key. */
suspend fun DurableEngine.signalAndAwait(
    correlationKey: String,
    name: String,
    payload: Any? = null,
    dedupKey: String? = null,
): SignalResult = signal(correlationKey, name, payload, dedupKey).awaitSingle()
