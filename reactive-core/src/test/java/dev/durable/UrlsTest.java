package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;

import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class UrlsTest {

    /** A URL, the secret it holds (never to be printed), and what the masked URL must read. */
    static Stream<Arguments> trickyUrls() {
        return Stream.of(
                // Unencoded '@', '/' and ':' in the password: the user info ends at the last '@'.
                row("r2dbc:postgresql://user:p@ss/w:rd@host:5432/db?password=x&sslpassword=y", "p@ss/w:rd",
                        "r2dbc:postgresql://user:****@host:5432/db?password=****&sslpassword=****"),
                row("r2dbc:postgresql://someone:Pa55@w0rd@localhost:1/nowhere", "Pa55@w0rd",
                        "r2dbc:postgresql://someone:****@localhost:1/nowhere"),
                row("r2dbc:postgresql://app:s3/cr3t@db/app", "s3/cr3t", "r2dbc:postgresql://app:****@db/app"),
                row("r2dbc:postgresql://u:p?ss@h/db", "p?ss", "r2dbc:postgresql://u:****@h/db"),
                row("r2dbc:postgresql://u:p#ss@h/db", "p#ss", "r2dbc:postgresql://u:****@h/db"),
                row("r2dbc:postgresql://u:p@s?s@h/db", "p@s?s", "r2dbc:postgresql://u:****@h/db"),
                row("r2dbc:postgresql://u:p//w@h/db", "p//w", "r2dbc:postgresql://u:****@h/db"),
                row("r2dbc:postgresql://u:päss wörd@h/db", "päss wörd", "r2dbc:postgresql://u:****@h/db"),
                // Sub-schemes and other prefixes.
                row("r2dbc:pool:postgresql://app:s3cret@db:5432/app?maxSize=4", "s3cret",
                        "r2dbc:pool:postgresql://app:****@db:5432/app?maxSize=4"),
                row("r2dbcs:postgresql://app:s3cret@db/app", "s3cret", "r2dbcs:postgresql://app:****@db/app"),
                row("jdbc:postgresql://db:5432/app?user=app&password=s3cret&ssl=true", "s3cret",
                        "jdbc:postgresql://db:5432/app?user=app&password=****&ssl=true"),
                row("jdbc:postgresql:app?password=s3@cret", "s3@cret", "jdbc:postgresql:app?password=****"),
                row("postgres://app:s3cret@db/app", "s3cret", "postgres://app:****@db/app"),
                // Percent-encoded passwords.
                row("postgresql://app:p%40ss%2Fw%3Ard@db/app", "p%40ss%2Fw%3Ard", "postgresql://app:****@db/app"),
                // No scheme.
                row("app:s3cret@db:5432/app", "s3cret", "app:****@db:5432/app"),
                row("//app:s3cret@db/app", "s3cret", "//app:****@db/app"),
                row("db:5432/app?pwd=s3cret&token=s3cret", "s3cret", "db:5432/app?pwd=****&token=****"),
                // IPv6 hosts and host lists.
                row("r2dbc:postgresql://app:s3cret@[::1]:5432/app", "s3cret",
                        "r2dbc:postgresql://app:****@[::1]:5432/app"),
                row("r2dbc:postgresql://app:s3c@ret@[fe80::1%25eth0]/app", "s3c@ret",
                        "r2dbc:postgresql://app:****@[fe80::1%25eth0]/app"),
                row("r2dbc:postgresql://[::1]:5432/app?Password=s3cret", "s3cret",
                        "r2dbc:postgresql://[::1]:5432/app?Password=****"),
                row("jdbc:postgresql://app:s3cret@h1:5432,h2:5433/app?targetServerType=primary", "s3cret",
                        "jdbc:postgresql://app:****@h1:5432,h2:5433/app?targetServerType=primary"),
                // Query parameters: names holding password/secret/token, pass, pwd; '@' and '&' in values.
                row("r2dbc:postgresql://db/app?sslmode=require&sslPassword=s3cret&user=app", "s3cret",
                        "r2dbc:postgresql://db/app?sslmode=require&sslPassword=****&user=app"),
                row("r2dbc:postgresql://db/app?client_secret=s3cret&pass=s3cret", "s3cret",
                        "r2dbc:postgresql://db/app?client_secret=****&pass=****"),
                row("r2dbc:postgresql://db/app?password=p@ss", "p@ss", "r2dbc:postgresql://db/app?password=****"),
                row("r2dbc:postgresql://db/app?password=s3&cret&sslmode=require", "s3&cret",
                        "r2dbc:postgresql://db/app?password=****&sslmode=require"),
                row("r2dbc:postgresql://db/app?pass%77ord=s3cret", "s3cret",
                        "r2dbc:postgresql://db/app?pass%77ord=****"),
                // Redis: an empty user, user and password, the password-only form, sentinels, sockets.
                row("redis://:s3cret@cache:6379/0", "s3cret", "redis://:****@cache:6379/0"),
                row("rediss://app:s3cret@cache:6380", "s3cret", "rediss://app:****@cache:6380"),
                row("redis://s3cret@cache", "s3cret", "redis://****@cache"),
                row("redis-sentinel://s3cret@s1:26379,s2:26379/0#mymaster", "s3cret",
                        "redis-sentinel://****@s1:26379,s2:26379/0#mymaster"),
                row("redis-socket:///tmp/redis.sock?password=s3cret&database=0", "s3cret",
                        "redis-socket:///tmp/redis.sock?password=****&database=0"),
                // Readings that do not parse: the whole authority goes.
                row("r2dbc:postgresql://app:s3cret/db", "s3cret", "r2dbc:postgresql://****/db"),
                row("r2dbc:postgresql://me@corp.com:s3cret@db/app", "s3cret", "r2dbc:postgresql://****@db/app"),
                row("r2dbc:postgresql://app:s3cret@d b/app", "s3cret", "r2dbc:postgresql://****@d b/app"),
                row("jdbc:sqlserver://db;user=app;password=s3cret", "s3cret", "jdbc:sqlserver://****"),
                row("  r2dbc:postgresql://app:s3cret@db/app", "s3cret", "  r2dbc:postgresql://app:****@db/app"));
    }

    private static Arguments row(String url, String secret, String masked) {
        return Arguments.of(url, secret, masked);
    }

    @ParameterizedTest
    @MethodSource("trickyUrls")
    void masksTheSecretAndKeepsTheRest(String url, String secret, String expected) {
        String masked = Urls.masked(url);
        assertThat(masked).doesNotContain(secret).isEqualTo(expected);
        assertThat(Urls.masked(masked)).as("masking is stable").isEqualTo(masked);
    }

    @ParameterizedTest
    @MethodSource("trickyUrls")
    void masksTheSecretsOfAUrlInAMessageThatQuotesIt(String url, String secret, String expected) {
        String message = "URL " + url + " is not valid: password '" + secret + "' (" + decoded(secret) + ")";
        assertThat(Urls.maskedIn(message, url)).doesNotContain(secret).doesNotContain(decoded(secret))
                .startsWith("URL " + expected + " is not valid");
    }

    @Test
    void plainAddressesAndGarbageComeBackUnharmedAndNothingThrows() {
        assertThat(Urls.masked("r2dbc:postgresql://db:5432/app")).isEqualTo("r2dbc:postgresql://db:5432/app");
        assertThat(Urls.masked("r2dbc:postgresql://app@db/app")).isEqualTo("r2dbc:postgresql://app@db/app");
        assertThat(Urls.masked("redis://cache:6379")).isEqualTo("redis://cache:6379");
        assertThat(Urls.masked("not a url")).isEqualTo("not a url");
        assertThat(Urls.masked("")).isEmpty();
        assertThat(Urls.masked(null)).isEqualTo("null");
        assertThat(Urls.maskedIn("no url in here", null)).isEqualTo("no url in here");
        for (String garbage : new String[] {"@", "@@@", ":@", "//", "://@:", "?", "&=&", "r2dbc:", "\u0000@\uD800",
                "%", "%zz@h", "[", "@[::1", "a:b@c:d@e:f@g", "@".repeat(10_000), "a:".repeat(5_000) + "@h"}) {
            assertThatCode(() -> Urls.masked(garbage)).doesNotThrowAnyException();
            assertThatCode(() -> Urls.maskedIn(garbage, garbage)).doesNotThrowAnyException();
        }
    }

    /**
     * Random passwords over the characters that break URL parsing, in URL shapes users write: the
     * password never comes back whole, from the URL or from a message that quotes it.
     */
    @Test
    void noRandomPasswordSurvives() {
        String[] shapes = {
                "r2dbc:postgresql://app:%s@db.internal:5432/app?sslmode=disable",
                "r2dbc:pool:postgresql://app:%s@[::1]:5432/app",
                "postgresql://app:%s@db/app",
                "app:%s@db:5432/app",
                "r2dbc:postgresql://db:5432/app?user=app&password=%s&sslmode=disable",
                "r2dbc:postgresql://db:5432/app?password=%s",
                "jdbc:postgresql://db/app?sslpassword=%s",
                "redis://:%s@cache:6379/0",
                "redis://%s@cache:6379",
                "rediss://app:%s@cache:6380",
        };
        String alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@/:?#&=%[]+! .~-_";
        long seed = Long.getLong("durable.seed", new Random().nextLong());
        Random random = new Random(seed);
        for (int i = 0; i < 20_000; i++) {
            StringBuilder password = new StringBuilder();
            int length = 8 + random.nextInt(17);
            for (int c = 0; c < length; c++) {
                password.append(alphabet.charAt(random.nextInt(alphabet.length())));
            }
            String shape = shapes[random.nextInt(shapes.length)];
            if (shape.startsWith("app:") && password.indexOf("//") >= 0) {
                continue; // "app:" + "x//y@db" is the URL app:x://y@db, whose user y is no password
            }
            String url = String.format(shape, password);
            String masked = Urls.masked(url);
            String message = Urls.maskedIn("cannot use " + url + ": bad port", url);
            assertThat(masked).as("seed %d (replay with -Ddurable.seed=%d): %s", seed, seed, url)
                    .doesNotContain(password);
            assertThat(message).as("seed %d (replay with -Ddurable.seed=%d): %s", seed, seed, url)
                    .doesNotContain(password);
        }
    }

    private static String decoded(String secret) {
        try {
            return java.net.URLDecoder.decode(secret.replace("+", "%2B"), java.nio.charset.StandardCharsets.UTF_8);
        } catch (IllegalArgumentException malformed) {
            return secret;
        }
    }
}
