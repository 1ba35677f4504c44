package dev.durable.redis.internal;

/**
 * Every Lua script of the Redis limiter, in one place. Each touches the keys of one gate counter
 * (the counter and its ledger mark, which share a hash tag) or one bucket, so it is atomic on one
 * Redis and on one Cluster slot alike. Times are Redis's own clock ({@code TIME}), never a node's,
 * so nodes with skewed clocks agree.
 */
public final class LimiterScripts {

    private LimiterScripts() {
    }

    /** Now on Redis's clock, in milliseconds. */
    private static final String NOW = """
            local t = redis.call('TIME')
            local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
            """;

    /**
     * Lets the counter KEYS[1] outlive its slots by one TTL ({@code ttl}), never shortening what a
     * longer permit lease set.
     */
    private static final String EXTEND_COUNTER = """
            if redis.call('PTTL', KEYS[1]) < ttl * 2 then
                redis.call('PEXPIRE', KEYS[1], ttl * 2)
            end
            """;

    /** The prefix of a stand-in: a slot the ledger holds for a live claim it forgot. */
    private static final String STANDIN = """
            local standin = '\\0standin:'
            """;

    /**
     * Takes gate slots. KEYS[1]: the counter, a sorted set of holders scored by their slot's expiry;
     * KEYS[2]: its ledger mark, present while the counter is known to list every live holder (both
     * keys share the gate's hash tag). ARGV: capacity, slot TTL (ms), the live claims the database
     * shows for this counter (-1 when not asked yet), then the holders in urgency order.
     *
     * <p>Expired slots are dropped first (a crashed holder's slot frees itself). Without the mark the
     * counter may have been lost (Redis restarted empty, or an idle gate's keys expired): the script
     * answers '?' until it is told the live claims, then stands in for the ones the counter lacks
     * with placeholder slots (each given up when a forgotten holder renews its own, or at its TTL)
     * and sets the mark. Then a holder that already has a slot keeps it, the others get one while
     * the counter has room. Returns one character per holder, '1' admitted, '0' refused. The counter
     * outlives its last slot by one TTL; the mark lives an hour past the gate's last use (at least
     * two TTLs), so a gate used now and then is not recounted each time, and an idle one leaves
     * nothing after that.
     */
    public static final String GATE_ACQUIRE = NOW + STANDIN + """
            local ttl = tonumber(ARGV[2])
            redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
            if redis.call('EXISTS', KEYS[2]) == 0 then
                local live = tonumber(ARGV[3])
                if live < 0 then
                    return '?'
                end
                for i = 1, live - redis.call('ZCARD', KEYS[1]) do
                    redis.call('ZADD', KEYS[1], now + ttl, standin .. now .. ':' .. i)
                end
                redis.call('SET', KEYS[2], '1')
            end
            local held = redis.call('ZCARD', KEYS[1])
            local capacity = tonumber(ARGV[1])
            local out = {}
            for i = 4, #ARGV do
                if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
                    redis.call('ZADD', KEYS[1], now + ttl, ARGV[i])
                    out[#out + 1] = '1'
                elseif held < capacity then
                    redis.call('ZADD', KEYS[1], now + ttl, ARGV[i])
                    held = held + 1
                    out[#out + 1] = '1'
                else
                    out[#out + 1] = '0'
                end
            end
            """ + EXTEND_COUNTER + """
            redis.call('PEXPIRE', KEYS[2], math.max(ttl * 2, 3600000))
            return table.concat(out)
            """;

    /**
     * Renews gate slots. KEYS[1]: the counter, KEYS[2]: its ledger mark; ARGV: slot TTL (ms), then
     * the holders. Expired slots are dropped first; each holder's slot is then set to expire one TTL
     * from now, taken again if it was missing (Redis restarted empty, or the holder was late): a live
     * holder re-asserts what it holds, in the place of a stand-in when one is left, and the gate
     * admits no one new until it is under capacity again. Returns how many were missing.
     */
    public static final String GATE_RENEW = NOW + STANDIN + """
            local ttl = tonumber(ARGV[1])
            redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
            local missing = 0
            local standins = nil
            for i = 2, #ARGV do
                if not redis.call('ZSCORE', KEYS[1], ARGV[i]) then
                    missing = missing + 1
                    if standins == nil then
                        standins = {}
                        for _, member in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
                            if string.sub(member, 1, #standin) == standin then
                                standins[#standins + 1] = member
                            end
                        end
                    end
                    if #standins > 0 then
                        redis.call('ZREM', KEYS[1], table.remove(standins))
                    end
                end
                redis.call('ZADD', KEYS[1], now + ttl, ARGV[i])
            end
            """ + EXTEND_COUNTER + """
            redis.call('PEXPIRE', KEYS[2], math.max(ttl * 2, 3600000))
            return missing
            """;

    /**
     * Renews a permit's slots without taking lost ones again (a permit whose lease ended is gone:
     * its gate may have admitted others since). KEYS[1]: the counter; ARGV: slot TTL (ms), then the
     * holders. Expired slots are dropped first. Returns how many were still there and renewed.
     */
    public static final String PERMIT_RENEW = NOW + """
            local ttl = tonumber(ARGV[1])
            redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
            local renewed = 0
            for i = 2, #ARGV do
                if redis.call('ZSCORE', KEYS[1], ARGV[i]) then
                    redis.call('ZADD', KEYS[1], now + ttl, ARGV[i])
                    renewed = renewed + 1
                end
            end
            if renewed > 0 then
            """ + EXTEND_COUNTER + """
            end
            return renewed
            """;

    /**
     * Counts the slots of live permits in the counter KEYS[1], read only: members named as
     * {@code engine.limits()} names them ({@code <engine>:permit:<instance>:<n>#<slot>}, base 36)
     * whose expiry is after now. Row claims and stand-ins are not counted: the database shows rows.
     */
    public static final String PERMIT_COUNT = NOW + """
            local permits = 0
            for _, member in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')) do
                if string.find(member, ':permit:%w+:%w+#%d+$') then
                    permits = permits + 1
                end
            end
            return permits
            """;

    /** Gives gate slots back. KEYS[1]: the counter; ARGV: the holders. Returns how many it removed. */
    public static final String GATE_RELEASE = """
            local removed = 0
            for i = 1, #ARGV do
                removed = removed + redis.call('ZREM', KEYS[1], ARGV[i])
            end
            return removed
            """;

    /**
     * Takes from a sliding window, with the PostgreSQL limiter's semantics. KEYS[1]: the window's
     * partition, a hash of slot (Redis time / slot length) to what it admitted. ARGV: slot length
     * (ms), limit, ring size (slots per window + 1), then the weights of the claims in order. Slots
     * older than the ring are dropped; claims are admitted in order while the ring's sum plus their
     * weight stays within the limit, the first that does not fit refusing the rest. Returns one
     * character per claim, '1' admitted, '0' refused. The hash expires a ring after its last use.
     */
    public static final String WINDOW_TAKE = NOW + """
            local slotms = tonumber(ARGV[1])
            local limit = tonumber(ARGV[2])
            local ring = tonumber(ARGV[3])
            local slot = math.floor(now / slotms)
            local saved = redis.call('HGETALL', KEYS[1])
            local used = 0
            for i = 1, #saved, 2 do
                if tonumber(saved[i]) > slot - ring then
                    used = used + tonumber(saved[i + 1])
                else
                    redis.call('HDEL', KEYS[1], saved[i])
                end
            end
            local out = {}
            local open = true
            local taken = 0
            for i = 4, #ARGV do
                local weight = tonumber(ARGV[i])
                if open and used + weight <= limit then
                    used = used + weight
                    taken = taken + weight
                    out[#out + 1] = '1'
                else
                    open = false
                    out[#out + 1] = '0'
                end
            end
            if taken > 0 then
                redis.call('HINCRBY', KEYS[1], string.format('%d', slot), taken)
                redis.call('PEXPIRE', KEYS[1], slotms * ring + 1000)
            end
            return table.concat(out)
            """;

    /**
     * As {@link #WINDOW_TAKE}, and after the flags a ':' and the slot it counted in, so that a
     * caller can give counts back there ({@link #WINDOW_GIVE_BACK}).
     */
    public static final String WINDOW_TAKE_AT = WINDOW_TAKE.replace("return table.concat(out)",
            "return table.concat(out) .. ':' .. string.format('%d', slot)");

    /**
     * Gives back ARGV[2] of the count of slot ARGV[1] of window KEYS[1] (a stacked claim's bucket refused
     * it after its window counted it): never below zero, nothing when the slot has aged out. Returns
     * what is left in the slot.
     */
    public static final String WINDOW_GIVE_BACK = """
            local left = redis.call('HINCRBY', KEYS[1], ARGV[1], -tonumber(ARGV[2]))
            if left <= 0 then
                redis.call('HDEL', KEYS[1], ARGV[1])
                return 0
            end
            return left
            """;

    /**
     * Takes tokens from a bucket, with the PostgreSQL limiter's semantics. KEYS[1]: the bucket, a
     * hash of tokens and the time they were counted at. ARGV: tokens a second, burst, then the
     * weights of the claims in urgency order. A new bucket starts full; tokens flow in at the rate
     * since the last count, capped at the burst, and the bucket's clock only moves forward. Claims
     * are admitted in order while the tokens cover their weight; the first that does not fit
     * refuses the rest (a light claim never jumps a heavy, more urgent one). Returns one character
     * per claim, '1' admitted, '0' refused. A bucket left alone long enough to be full again expires.
     */
    public static final String BUCKET_TAKE = NOW + """
            local rate = tonumber(ARGV[1])
            local burst = tonumber(ARGV[2])
            local saved = redis.call('HMGET', KEYS[1], 'tokens', 'at')
            local tokens = tonumber(saved[1])
            local at = tonumber(saved[2])
            if tokens == nil or at == nil then
                tokens = burst
                at = now
            end
            if now > at then
                tokens = math.min(burst, tokens + rate * (now - at) / 1000)
                at = now
            end
            local out = {}
            local open = true
            for i = 3, #ARGV do
                local weight = tonumber(ARGV[i])
                if open and weight <= tokens then
                    tokens = tokens - weight
                    out[#out + 1] = '1'
                else
                    open = false
                    out[#out + 1] = '0'
                end
            end
            redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'at', string.format('%d', at))
            redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
            return table.concat(out)
            """;
}
