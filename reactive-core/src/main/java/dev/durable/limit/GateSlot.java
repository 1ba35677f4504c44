package dev.durable.limit;

/**
 * A gate slot: one slot of the counter of gate {@code name} for {@code key} ("" for the gate's one
 * shared key) on shard {@code shard}, held by a claimed row while it runs. The shard is drawn when
 * the row takes the gate (each of a gate's shards counts an even share of its capacity), so only a
 * row, never a request, knows it.
 */
public record GateSlot(String name, String key, int shard) {

    public GateSlot {
        if (name == null || name.isEmpty()) {
            throw new IllegalArgumentException("the name of a gate slot must not be empty");
        }
        if (key == null) {
            throw new IllegalArgumentException("a slot of gate " + name + " needs its key (empty for none)");
        }
        if (shard < 0) {
            throw new IllegalArgumentException("the shard of a slot of gate " + name + " must not be negative, was "
                    + shard);
        }
    }
}
