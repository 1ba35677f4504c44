package dev.durable.kotlin

import dev.durable.DurableEngine
import dev.durable.InstanceStatus
import dev.durable.JobDefinition
import dev.durable.JobRequest
import dev.durable.Outcome
import dev.durable.PermanentFailureException
import dev.durable.QueueOptions
import dev.durable.WorkflowDefinition
import dev.durable.testing.PostgresExtension
import dev.durable.testing.TestDatabase
import java.time.Duration
import java.util.concurrent.atomic.AtomicBoolean
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.delay
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withTimeout
import org.assertj.core.api.Assertions.assertThat
import org.junit.jupiter.api.AfterEach
import org.junit.jupiter.api.BeforeEach
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.extension.ExtendWith

/** Suspend functions as handlers and steps, and the suspending client, on a real PostgreSQL. */
@ExtendWith(PostgresExtension::class)
class SuspendingIT {

    data class Email(val to: String, val subject: String)

    data class Order(val id: String, val paid: Boolean = false)

    private lateinit var db: TestDatabase
    private val engines = mutableListOf<DurableEngine>()
    private val wait: Duration = Duration.ofSeconds(60)

    @BeforeEach
    fun setUp(database: TestDatabase) {
        db = database
    }

    @AfterEach
    fun closeEngines() {
        engines.forEach { it.close() }
    }

    private fun engine(name: String, vararg definitions: dev.durable.Definition): DurableEngine {
        val builder = DurableEngine.builder(db.engineOptions().name(name)
            .queue(QueueOptions.builder(name).pollInterval(Duration.ofMillis(100)).build()).build())
        definitions.forEach { builder.register(it) }
        return builder.build().also { engines += it; it.start().block(wait) }
    }

    @Test
    fun suspendHandlersAndStepsRunWithTheirResults(): Unit = runBlocking {
        // tag::kotlin[]
        val sendEmail = suspendJob<Email, String>("send-email") { email ->
            delay(10)                               // any suspending client: WebClient, R2DBC, Ktor...
            "sent to ${email.to}"
        }.queue("kotlin")
        val order = WorkflowDefinition.builder("order", Order::class.java).queue("kotlin")
            .suspendStep("pay") { ctx -> delay(5); Outcome.next("ship", ctx.state()!!.copy(paid = true)) }
            .suspendStep("ship") { ctx -> Outcome.done(if (ctx.state()!!.paid) "shipped" else "unpaid") }
            .build()
        // end::kotlin[]
        val engine = engine("kotlin", sendEmail, order)

        val mail = engine.insertAndAwait(JobRequest.of("send-email", Email("ada@example.com", "Welcome")))
        val shipped = engine.insertAndAwait(JobRequest.of("order", Order("o-1")))
        assertThat(engine.awaitSettledAndAwait(mail, wait).resultJson()).isEqualTo("\"sent to ada@example.com\"")
        assertThat(engine.awaitSettledAndAwait(shipped, wait).resultJson()).isEqualTo("\"shipped\"")
    }

    @Test
    fun failuresRetryOrFailForGood(): Unit = runBlocking {
        var calls = 0
        val engine = engine(
            "failing",
            suspendJob<String, String>("flaky") { s -> if (++calls == 1) error("first $s") else "second $s" }
                .queue("failing").backoff(dev.durable.Backoff.fixed(Duration.ofMillis(10))),
            suspendJob<String, String>("refused") { s -> throw PermanentFailureException("refused $s") }
                .queue("failing"),
        )
        val flaky = engine.awaitSettledAndAwait(engine.insertAndAwait(JobRequest.of("flaky", "x")), wait)
        assertThat(flaky.status()).isEqualTo(InstanceStatus.DONE)
        assertThat(flaky.attempt()).isEqualTo(2)
        val refused = engine.awaitSettledAndAwait(engine.insertAndAwait(JobRequest.of("refused", "y")), wait)
        assertThat(refused.status()).isEqualTo(InstanceStatus.FAILED)
        assertThat(refused.attempt()).isEqualTo(1)
        assertThat(refused.lastError()).contains("refused y")
    }

    @Test
    fun aCancelledRunCancelsItsCoroutine(): Unit = runBlocking {
        val started = AtomicBoolean()
        val cancelled = AtomicBoolean()
        val sleepy: JobDefinition<String, String> = suspendJob<String, String>("sleepy") {
            started.set(true)
            try {
                delay(Duration.ofMinutes(5).toMillis())
                "woke"
            } catch (stopped: CancellationException) {
                cancelled.set(true)
                throw stopped
            }
        }.queue("cancel")
        val engine = engine("cancel", sleepy)
        val id = engine.insertAndAwait(JobRequest.of("sleepy", "z"))
        withTimeout(wait.toMillis()) { while (!started.get()) delay(20) }
        engine.cancel(id).block(wait)
        assertThat(engine.awaitSettledAndAwait(id, wait).status()).isEqualTo(InstanceStatus.CANCELLED)
        withTimeout(wait.toMillis()) { while (!cancelled.get()) delay(20) }
    }
}
