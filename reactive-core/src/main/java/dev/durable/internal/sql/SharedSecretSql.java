package dev.durable.internal.sql;

import dev.durable.internal.Db;
import java.nio.ByteBuffer;
import reactor.core.publisher.Flux;
import reactor.core.publisher.Mono;

/** The secrets every engine on the database shares (durable_shared_secrets). */
public final class SharedSecretSql {

    /**
     * The secret named $1, made with the bytes $2 when there is none yet. One statement whatever
     * races it: an insert that meets a row another transaction committed meanwhile updates that row
     * to itself, which returns the row's secret as it now is (an insert that did nothing would
     * return nothing, and a read in the same statement could not see that row yet). Index: the
     * primary key. Locks: the row, for the statement's instant.
     */
    private final String secret;

    /** The secret named $1, if there is one. Index: the primary key. Locks: none. */
    private final String read;

    private final Db db;

    public SharedSecretSql(Db db, Tables tables) {
        this.db = db;
        this.secret = tables.render("""
                INSERT INTO {shared_secrets} AS s (name, secret) VALUES ($1, $2)
                ON CONFLICT (name) DO UPDATE SET secret = s.secret
                RETURNING s.secret""");
        this.read = tables.render("SELECT secret FROM {shared_secrets} WHERE name = $1");
    }

    /** The secret under {@code name}; empty when there is none yet. */
    public Mono<byte[]> read(String name) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(read).bind(0, name).execute())
                        .concatMap(result -> result.map(row -> bytes(row.get(0, ByteBuffer.class)))))
                .next();
    }

    /** The secret under {@code name}, which {@code candidate} becomes when it is the first. */
    public Mono<byte[]> secret(String name, byte[] candidate) {
        return db.withConnection(connection -> Flux.from(connection.createStatement(secret)
                        .bind(0, name).bind(1, ByteBuffer.wrap(candidate)).execute())
                .concatMap(result -> result.map(row -> bytes(row.get(0, ByteBuffer.class)))))
                .next();
    }

    private static byte[] bytes(ByteBuffer buffer) {
        byte[] out = new byte[buffer.remaining()];
        buffer.get(out);
        return out;
    }
}
