//! The Lua scripts the Redis recipes run, each atomic on its instance.

use std::sync::LazyLock;

use redis::Script;

/// KEYS: lock, fence counter; ARGV: owner, TTL in ms. SET NX PX and, when it wins, INCR of
/// the fence counter in the same step: the acquisition's fencing token (0: not acquired).
pub static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then \
           return redis.call('INCR', KEYS[2]) \
         end \
         return 0",
    )
});

/// KEYS: lock; ARGV: owner. Compare-and-delete: deletes the lock only if this owner holds it.
pub static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then \
           return redis.call('DEL', KEYS[1]) \
         end \
         return 0",
    )
});

/// KEYS: lock; ARGV: owner, TTL in ms. Extends the lock only if this owner still holds it.
pub static RENEW: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then \
           return redis.call('PEXPIRE', KEYS[1], ARGV[2]) \
         end \
         return 0",
    )
});

/// KEYS: fence counter; ARGV: token. Raises the counter to the token if it is lower
/// (Redlock: every instance of the winning majority then holds the token, so the next
/// holder's majority, which shares an instance with it, draws a larger one).
pub static RAISE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "local c = tonumber(redis.call('GET', KEYS[1]) or '0') \
         if c < tonumber(ARGV[1]) then redis.call('SET', KEYS[1], ARGV[1]) end \
         return c",
    )
});

/// KEYS: lock, key; ARGV: owner, value. Writes the key only while this owner holds the lock.
pub static FENCED_SET: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        "if redis.call('GET', KEYS[1]) == ARGV[1] then \
           redis.call('SET', KEYS[2], ARGV[2]) \
           return 1 \
         end \
         return 0",
    )
});
