package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.durable.support.Engines;
import dev.durable.testing.PostgresExtension;
import dev.durable.testing.TestDatabase;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.extension.RegisterExtension;
import reactor.core.publisher.Mono;

/** Issue 23: an instance's state and result typed through the engine's codec, and as JSON trees. */
@ExtendWith(PostgresExtension.class)
class TypedInstanceIT {

    record Order(String sku, int quantity) {
    }

    record Receipt(String sku, int total) {
    }

    @RegisterExtension
    final Engines engines = new Engines();

    private TestDatabase db;

    @BeforeEach
    void on(TestDatabase database) {
        db = database;
        engines.on(database);
    }

    @Test
    void stateAndResultComeTypedAndAsTreesThatSerializeAsJsonNotAsStrings() throws Exception {
        DurableEngine engine = engines.start(engines.options("typed").queue("default"),
                JobDefinition.of("order", Order.class, (Order o) -> Mono.just(new Receipt(o.sku(), o.quantity() * 3))));
        long id = engine.insert(JobRequest.of("order", new Order("apple", 4))).block();

        Instance done = engine.awaitSettled(id, Duration.ofSeconds(30)).block();

        assertThat(done.status()).isEqualTo(InstanceStatus.DONE);
        assertThat(done.state(Order.class)).isEqualTo(new Order("apple", 4));
        assertThat(done.result(Receipt.class)).isEqualTo(new Receipt("apple", 12));
        assertThat(done.stateTree().get("sku").asText()).isEqualTo("apple");
        assertThat(done.resultTree().get("total").asInt()).isEqualTo(12);
        // The same through get and list.
        assertThat(engine.get(id).block().result(Receipt.class)).isEqualTo(new Receipt("apple", 12));
        assertThat(engine.list(null, InstanceStatus.DONE, id - 1, 1).blockFirst().state(Order.class))
                .isEqualTo(new Order("apple", 4));

        // What an endpoint returns: the tree nests as JSON; the codec is not part of the instance's JSON.
        ObjectMapper web = new ObjectMapper().findAndRegisterModules();
        JsonNode body = web.readTree(web.writeValueAsString(Map.of("result", done.resultTree())));
        assertThat(body.get("result").isObject()).isTrue();
        assertThat(body.get("result").get("sku").asText()).isEqualTo("apple");
        JsonNode instanceJson = web.readTree(web.writeValueAsString(done));
        assertThat(instanceJson.has("codec")).isFalse();
        assertThat(instanceJson.get("id").asLong()).isEqualTo(id);
        // The codec takes no part in equality.
        assertThat(done.withCodec(new JacksonJsonCodec())).isEqualTo(done).hasSameHashCodeAs(done);
    }

    @Test
    void decodingGoesThroughTheEnginesCodec() {
        AtomicInteger decodes = new AtomicInteger();
        JacksonJsonCodec jackson = new JacksonJsonCodec();
        JsonCodec counting = new JsonCodec() {
            @Override
            public String encode(Object value) {
                return jackson.encode(value);
            }

            @Override
            public <T> T decode(String json, Class<T> type) {
                decodes.incrementAndGet();
                return jackson.decode(json, type);
            }

            @Override
            public JsonNode tree(String json) {
                ObjectNode tree = (ObjectNode) jackson.tree(json);
                return tree.put("viaCodec", true);
            }
        };
        DurableEngine engine = engines.start(engines.options("codec").queue("default").codec(counting),
                JobDefinition.of("order", Order.class, (Order o) -> Mono.just(new Receipt(o.sku(), o.quantity()))));
        long id = engine.insert(JobRequest.of("order", new Order("pear", 2))).block();
        Instance done = engine.awaitSettled(id, Duration.ofSeconds(30)).block();
        int before = decodes.get();

        assertThat(done.result(Receipt.class)).isEqualTo(new Receipt("pear", 2));
        assertThat(decodes.get()).isEqualTo(before + 1);
        assertThat(done.stateTree().get("viaCodec").asBoolean()).isTrue();
        assertThat(done.codec()).isSameAs(counting);
    }
}
