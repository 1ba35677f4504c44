package dev.durable.internal.engine;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Who claims rows. A worker id is a stable prefix (engine name, queue, host and process id: unique
 * per live process) plus a suffix unique to this incarnation of the engine. A restarted engine
 * recognises its dead predecessor's claims by the prefix and reclaims them at once.
 */
public final class WorkerIdentity {

    private final String engineName;
    private final String node;
    private final String incarnation;

    private WorkerIdentity(String engineName, String node, String incarnation) {
        this.engineName = engineName;
        this.node = node;
        this.incarnation = incarnation;
    }

    /** Resolves the host name: call it when the engine is built, never on a reactive thread. */
    public static WorkerIdentity create(String engineName) {
        return new WorkerIdentity(engineName, hostName() + "#" + ProcessHandle.current().pid(),
                Long.toString(ThreadLocalRandom.current().nextLong() & Long.MAX_VALUE, 36));
    }

    /** Identifies this engine on the wire (the origin of its pokes). */
    public String origin() {
        return engineName + "@" + node + "-" + incarnation;
    }

    public String prefix(String queue) {
        return engineName + ":" + queue + "@" + node + "-";
    }

    public String worker(String queue) {
        return prefix(queue) + incarnation;
    }

    private static String hostName() {
        String fromEnv = System.getenv("HOSTNAME");
        if (fromEnv != null && !fromEnv.isBlank()) {
            return fromEnv;
        }
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (UnknownHostException e) {
            return "localhost";
        }
    }
}
