package dev.durable.redis.internal;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class PokeMessageTest {

    @Test
    void roundTripsOriginsAndQueuesWithAnyCharacters() {
        PokeMessage message = new PokeMessage("engine:1|a@host#42-x", "queue|with:colons");
        assertThat(PokeMessage.decode(message.encode())).isEqualTo(message);
        assertThat(PokeMessage.decode(new PokeMessage("o", "q").encode())).isEqualTo(new PokeMessage("o", "q"));
    }

    @Test
    void ignoresPayloadsThatAreNotPokes() {
        assertThat(PokeMessage.decode(null)).isNull();
        assertThat(PokeMessage.decode("")).isNull();
        assertThat(PokeMessage.decode("hello")).isNull();
        assertThat(PokeMessage.decode(":origin")).isNull();
        assertThat(PokeMessage.decode("x:origin")).isNull();
        assertThat(PokeMessage.decode("-1:origin")).isNull();
        assertThat(PokeMessage.decode("6:origin")).as("no queue").isNull();
        assertThat(PokeMessage.decode("99:short")).isNull();
    }
}
