//! The PostgreSQL lock recipes.
//!
//! - `advisory`: `pg_advisory_lock(key)` (key: a stable 64-bit hash of the lock name),
//!   session-scoped: a waiter's statement blocks in the server until the lock is free, so
//!   it sends one request and gets no notification; the server grants waiters one at a
//!   time. The fencing token is `nextval('coordbench_fence')` taken in the same statement,
//!   after the lock is granted. The lock ends with the session: a crashed client's
//!   connection closes and the server releases it at once. A statement cut short by the
//!   operation timeout is cancelled and every advisory lock of the session released
//!   before its next operation.
//! - `lease-row`: a row per lock with its owner, expiry and token, taken by an upsert that
//!   only wins once the lease expired (server clock, `clock_timestamp()`), the token drawn
//!   from the sequence when it wins; waiters poll with backoff; the holder renews at TTL/3
//!   and releases by expiring its row.

use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::Client;

use super::{map_error, PgSession};
use crate::backoff::Backoff;
use crate::{ApiFamily, CounterHandle, DriverError, FreezeGate, LockGuard, LockRecipe};

const ADVISORY: &str =
    "SELECT nextval('coordbench_fence') FROM (SELECT pg_advisory_lock($1)) AS granted";
const ADVISORY_UNLOCK: &str = "SELECT pg_advisory_unlock($1)";

const TAKE_LEASE: &str = "\
    INSERT INTO coordbench_locks AS l (name, owner, expires_at, token) \
    VALUES ($1, $2, clock_timestamp() + $3::float8 * interval '1 millisecond', \
            nextval('coordbench_fence')) \
    ON CONFLICT (name) DO UPDATE \
      SET owner = EXCLUDED.owner, expires_at = EXCLUDED.expires_at, \
          token = nextval('coordbench_fence') \
      WHERE l.expires_at <= clock_timestamp() \
    RETURNING token";
const RENEW_LEASE: &str = "\
    UPDATE coordbench_locks SET expires_at = clock_timestamp() + $3::float8 * interval '1 millisecond' \
    WHERE name = $1 AND token = $2";
const END_LEASE: &str = "UPDATE coordbench_locks SET expires_at = '-infinity' \
    WHERE name = $1 AND token = $2 AND expires_at > clock_timestamp()";

/// The advisory lock key of a lock name (FNV-1a, stable across runs and processes).
pub(super) fn advisory_key(name: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h as i64
}

pub(super) async fn lock(
    s: &mut PgSession,
    name: &str,
    recipe: LockRecipe,
) -> Result<LockGuard, DriverError> {
    let token = match recipe {
        LockRecipe::Advisory => advisory(s, name).await?,
        LockRecipe::LeaseRow => lease(s, name).await?,
        other => return Err(other.unsupported(ApiFamily::Postgres)),
    };
    Ok(LockGuard {
        name: name.to_string(),
        token,
        key: name.as_bytes().to_vec(),
    })
}

async fn advisory(s: &mut PgSession, name: &str) -> Result<i64, DriverError> {
    let key = advisory_key(name);
    let client = s.client()?;
    s.advisory_pending = true;
    s.counters.request();
    let row = client
        .query_one(ADVISORY, &[&key])
        .await
        .map_err(map_error)?;
    s.advisory_pending = false;
    s.advisory_held.insert(name.to_string(), key);
    Ok(row.get(0))
}

pub(super) async fn advisory_unlock(s: &mut PgSession, name: &str) -> Result<(), DriverError> {
    let Some(key) = s.advisory_held.remove(name) else {
        return Ok(());
    };
    let client = s.client()?;
    s.counters.request();
    client
        .query_one(ADVISORY_UNLOCK, &[&key])
        .await
        .map_err(map_error)
        .map(drop)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn lease(s: &mut PgSession, name: &str) -> Result<i64, DriverError> {
    let client = s.client()?;
    let mut backoff = Backoff::default();
    let token: i64 = loop {
        s.counters.request();
        let row = client
            .query_opt(TAKE_LEASE, &[&name, &s.owner, &ms(s.ttl)])
            .await
            .map_err(map_error)?;
        match row {
            Some(row) => break row.get(0),
            None => backoff.wait().await,
        }
    };
    let renewal = renew_task(client, name, token, s.ttl, &s.counters, &s.freeze);
    s.leases.insert(name.to_string(), (token, renewal));
    Ok(token)
}

pub(super) async fn end_lease(s: &mut PgSession, name: &str) -> Result<(), DriverError> {
    let Some((token, renewal)) = s.leases.remove(name) else {
        return Ok(());
    };
    renewal.abort();
    let client = s.client()?;
    s.counters.request();
    let ended = client
        .execute(END_LEASE, &[&name, &token])
        .await
        .map_err(map_error)?;
    if ended == 0 {
        // Renewals stopped (a pause) or failed: the lease ran out before the release.
        return Err(DriverError::SessionExpired(format!(
            "lease {name} expired before its release"
        )));
    }
    Ok(())
}

/// Renews a held lease at TTL/3 on the session's connection, waiting out a freeze first.
fn renew_task(
    client: Arc<Client>,
    name: &str,
    token: i64,
    ttl: Duration,
    counters: &CounterHandle,
    freeze: &FreezeGate,
) -> tokio::task::JoinHandle<()> {
    let (name, counters, freeze) = (name.to_string(), counters.clone(), freeze.clone());
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(ttl / 3).await;
            freeze.thawed().await;
            counters.keepalive();
            let ttl_ms = ms(ttl);
            let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] = [&name, &token, &ttl_ms];
            let renew = client.execute(RENEW_LEASE, &params);
            if !matches!(tokio::time::timeout(ttl / 3, renew).await, Ok(Ok(1))) {
                return;
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advisory_keys_are_stable_and_differ_by_name() {
        assert_eq!(advisory_key("lock-0"), advisory_key("lock-0"));
        assert_ne!(advisory_key("lock-0"), advisory_key("lock-1"));
    }
}
