package dev.durable.internal.sql;

/**
 * Durable's tables in one schema. Statements are written with {@code {instances}}, {@code {signals}},
 * {@code {gate_slots}}, {@code {buckets}}, {@code {engines}}, {@code {history}} and
 * {@code {instances_all}}, {@code {attempts}}, {@code {queue_pauses}}, {@code {permits}}, {@code {windows}},
 * {@code {fair_keys}}, {@code {queue_minutes}}, {@code {shared_secrets}} and {@code {claims}} placeholders
 * and rendered once per engine, so no statement is assembled on a hot path; rendering also compacts the
 * text ({@link SqlText}).
 */
public final class Tables {

    private final String schema;

    public Tables(String schema) {
        this.schema = schema;
    }

    /** The schema-qualified, quoted name of one of Durable's tables. */
    public String table(String name) {
        return '"' + schema + "\"." + name;
    }

    String render(String template) {
        return SqlText.compact(template
                .replace("{instances}", table("durable_instances"))
                .replace("{signals}", table("durable_signals"))
                .replace("{gate_slots}", table("durable_gate_slots"))
                .replace("{buckets}", table("durable_rate_buckets"))
                .replace("{engines}", table("durable_engines"))
                .replace("{history}", table("durable_history"))
                .replace("{instances_all}", table("durable_instances_all"))
                .replace("{attempts}", table("durable_attempts"))
                .replace("{queue_pauses}", table("durable_queue_pauses"))
                .replace("{step_inputs}", table("durable_step_inputs"))
                .replace("{forks}", table("durable_forks"))
                .replace("{permits}", table("durable_limit_permits"))
                .replace("{windows}", table("durable_window_counters"))
                .replace("{fair_keys}", table("durable_fair_keys"))
                .replace("{queue_minutes}", table("durable_queue_minutes"))
                .replace("{shared_secrets}", table("durable_shared_secrets"))
                .replace("{claims}", table("durable_claims")));
    }
}
