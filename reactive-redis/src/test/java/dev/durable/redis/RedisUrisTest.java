package dev.durable.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import io.lettuce.core.RedisURI;
import java.util.List;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/** A Redis URI's password reaches no description and no error of the Redis factories. */
class RedisUrisTest {

    private static final List<Function<String, Object>> FACTORIES = List.of(
            RedisPokeTransports::redis,
            RedisLimiters::redis,
            uri -> RedisPokeTransports.redis(RedisURI.create(uri)),
            uri -> RedisLimiters.redis(RedisURI.create(uri), RedisLimiterOptions.defaults()));

    @Test
    void descriptionsNameTheServerNeverThePassword() {
        for (String uri : List.of("redis://:pA55wOrD@cache:6379", "rediss://app:pA55wOrD@cache:6380/0",
                "redis://pA55wOrD@cache:6379")) {
            for (Function<String, Object> factory : FACTORIES) {
                assertThat(factory.apply(uri).toString()).as(uri).contains("cache:63")
                        .doesNotContain("pA55").doesNotContain("wOrD");
            }
        }
    }

    @Test
    void aMalformedUriIsRefusedMaskedAndWithoutTheParsersMessage() {
        // Spaces and bad escapes fail to parse; '/' and '?' in a password make Lettuce misread the
        // URI (a database "wOrD@cache:6379", a host ":pA55"), a second '@' a host "cache:6379".
        for (String uri : List.of("redis://:pA55 wOrD@cache", "redis://:pA55%wOrD@cache",
                "redis://:pA55/wOrD@cache:6379", "redis://:pA55?wOrD@cache", "redis://:pA55@wOrD@cache:6379",
                "redis://:pA55wOrD@cache:6379/zz", "http://:pA55wOrD@cache")) {
            for (Function<String, Object> factory : FACTORIES.subList(0, 2)) {
                Throwable error = catchThrowable(() -> factory.apply(uri));
                assertThat(error).as(uri).isInstanceOf(IllegalArgumentException.class)
                        .hasMessageStartingWith("uri must be a Redis URI").hasNoCause();
                assertThat(error.getMessage()).as(uri).doesNotContain("pA55").doesNotContain("wOrD");
            }
        }
    }

    @Test
    void aMisreadUriOfTheCallersOwnShowsNoHostMadeOfThePassword() {
        RedisURI misread = RedisURI.create("redis://:pA55?wOrD@cache"); // Lettuce: host ":pA55"
        assertThat(RedisPokeTransports.redis(misread).toString()).doesNotContain("pA55").contains("****:6379");
        assertThat(RedisLimiters.redis(misread, RedisLimiterOptions.defaults()).toString()).doesNotContain("pA55");
    }
}
