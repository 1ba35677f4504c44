package dev.durable.redis.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * Every key a limiter script touches is one it declares (KEYS[n]), never a name it builds: on a
 * Redis Cluster a script may only touch the keys it was routed by, which share one hash tag.
 */
class LimiterScriptsTest {

    /** The first argument of each redis.call after the command name, when there is one. */
    private static final Pattern CALL = Pattern.compile("redis\\.call\\('([A-Z]+)'(?:,\\s*([^,)]+))?");

    @Test
    void everyScriptTouchesOnlyItsDeclaredKeys() throws IllegalAccessException {
        List<String> scripts = new ArrayList<>();
        for (Field field : LimiterScripts.class.getDeclaredFields()) {
            if (Modifier.isPublic(field.getModifiers()) && field.getType() == String.class) {
                scripts.add(field.getName());
                String text = (String) field.get(null);
                Matcher call = CALL.matcher(text);
                int calls = 0;
                while (call.find()) {
                    calls++;
                    if (call.group(1).equals("TIME")) {
                        continue;
                    }
                    assertThat(call.group(2)).as("%s: %s's key", field.getName(), call.group(1))
                            .isNotNull().matches("KEYS\\[\\d\\]");
                }
                assertThat(calls).as(field.getName()).isPositive();
            }
        }
        assertThat(scripts).contains("GATE_ACQUIRE", "GATE_RENEW", "PERMIT_RENEW", "PERMIT_COUNT", "GATE_RELEASE",
                "WINDOW_TAKE", "WINDOW_TAKE_AT", "WINDOW_GIVE_BACK", "BUCKET_TAKE");
    }
}
