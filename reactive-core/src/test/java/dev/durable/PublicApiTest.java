package dev.durable;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.lang.reflect.Executable;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.Type;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/** The public surface names no internal type: what users see, they can rely on. */
class PublicApiTest {

    @Test
    void noPublicSignatureMentionsAnInternalType() throws Exception {
        List<String> leaks = new ArrayList<>();
        for (Class<?> type : publicApiClasses()) {
            for (Method method : type.getDeclaredMethods()) {
                if (visible(method.getModifiers()) && !method.isSynthetic()) {
                    check(leaks, type, method.getName(), method.getGenericReturnType());
                    checkParameters(leaks, type, method);
                }
            }
            for (var constructor : type.getDeclaredConstructors()) {
                if (visible(constructor.getModifiers())) {
                    checkParameters(leaks, type, constructor);
                }
            }
            for (Field field : type.getDeclaredFields()) {
                if (visible(field.getModifiers())) {
                    check(leaks, type, field.getName(), field.getGenericType());
                }
            }
            if (type.getGenericSuperclass() != null) {
                check(leaks, type, "extends", type.getGenericSuperclass());
            }
            for (Type implemented : type.getGenericInterfaces()) {
                check(leaks, type, "implements", implemented);
            }
        }
        assertThat(leaks).isEmpty();
    }

    private static boolean visible(int modifiers) {
        return Modifier.isPublic(modifiers) || Modifier.isProtected(modifiers);
    }

    private static void checkParameters(List<String> leaks, Class<?> type, Executable executable) {
        for (Type parameter : executable.getGenericParameterTypes()) {
            check(leaks, type, executable.getName(), parameter);
        }
    }

    private static void check(List<String> leaks, Class<?> owner, String member, Type type) {
        if (type.getTypeName().contains(".internal.")) {
            leaks.add(owner.getName() + "." + member + ": " + type.getTypeName());
        }
    }

    /** Every public class of dev.durable outside the internal packages, nested ones included. */
    private static List<Class<?>> publicApiClasses() throws IOException, URISyntaxException, ClassNotFoundException {
        Path root = Path.of(DurableEngine.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        List<Class<?>> classes = new ArrayList<>();
        try (Stream<Path> files = Files.walk(root)) {
            for (Path file : files.filter(path -> path.toString().endsWith(".class")).toList()) {
                String name = root.relativize(file).toString().replace('/', '.').replaceAll("\\.class$", "");
                if (!name.startsWith("dev.durable.") || name.contains(".internal.") || name.endsWith("package-info")) {
                    continue;
                }
                Class<?> type = Class.forName(name, false, PublicApiTest.class.getClassLoader());
                if (Modifier.isPublic(type.getModifiers()) && !type.isSynthetic() && !type.isAnonymousClass()) {
                    classes.add(type);
                }
            }
        }
        assertThat(classes).hasSizeGreaterThan(30);
        return classes;
    }
}
