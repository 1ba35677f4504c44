package dev.durable.support;

import java.io.File;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Path;
import java.util.LinkedHashSet;
import java.util.Set;

/** Starting other JVMs on this one's classpath (worker processes of the fault tests and the chaos harness). */
public final class Jvms {

    private Jvms() {
    }

    /** The java binary this JVM runs on. */
    public static String javaBinary() {
        return ProcessHandle.current().info().command()
                .orElse(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    }

    /**
     * This JVM's classpath: the class loader's URLs under exec:java (which runs inside Maven's JVM),
     * else java.class.path (under Surefire/Failsafe a manifest-only jar whose Class-Path is
     * followed; from a shaded jar, the jar).
     */
    public static String classpath() {
        Set<String> entries = new LinkedHashSet<>();
        for (ClassLoader loader = Jvms.class.getClassLoader(); loader != null; loader = loader.getParent()) {
            if (loader instanceof URLClassLoader urls) {
                for (URL url : urls.getURLs()) {
                    try {
                        entries.add(new File(url.toURI()).getPath());
                    } catch (Exception ignored) {
                        // Not a file URL: not on a classpath we can pass on.
                    }
                }
            }
        }
        boolean ours = entries.stream().anyMatch(entry -> entry.contains("test-classes"));
        return ours ? String.join(File.pathSeparator, entries) : System.getProperty("java.class.path");
    }
}
