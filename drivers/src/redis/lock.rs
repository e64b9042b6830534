//! The Redis lock recipes.
//!
//! - `set-nx`: `SET lock owner NX PX ttl` on the lock's instance (with the fence INCR in the
//!   same script); a waiter retries after a capped exponential backoff with jitter, so
//!   its requests per release grow with the hold time and the queue, and a release is
//!   noticed only at the next poll.
//! - `set-nx-notify`: the same SET NX, but a waiter subscribes to the lock key's keyspace
//!   notifications (`__keyspace@0__:<key>`: del, expired) before trying, and retries on
//!   every event: each release wakes every waiter (a herd of notifications and retries).
//! - `redlock`: the SET NX on every instance at once, each bounded by a short timeout; the
//!   lock is held if a majority granted it and the time it took plus the clock-drift
//!   allowance (1% of the TTL + 2 ms) leaves validity. Otherwise what was granted is
//!   released and the attempt retried after the backoff. The token is the largest INCR
//!   of the majority, raised on each of them ([`super::scripts::RAISE`]).
//!
//! A held lock is renewed at TTL/3 (compare-and-PEXPIRE) by a task of its session until
//! released, abandoned or frozen ([`crate::Session::freeze`]), as Redisson's watchdog does;
//! a holder that stops renewing loses the lock at the TTL.

use std::time::Duration;

use futures::future::join_all;
use futures::StreamExt;
use redis::aio::ConnectionManager;
use tokio::time::Instant;

use super::scripts::{ACQUIRE, RAISE, RELEASE, RENEW};
use super::{home, map_error, RedisSession};
use crate::backoff::Backoff;
use crate::{ApiFamily, CounterHandle, DriverError, FreezeGate, LockGuard, LockRecipe};

/// The lock's key and its fence counter's.
pub(super) fn lock_keys(name: &str) -> (String, String) {
    (
        format!("coordbench:lock:{name}"),
        format!("coordbench:fence:{name}"),
    )
}

/// A lock this session acquired (or may have, when an acquisition was cut short).
pub(super) struct Held {
    pub owner: String,
    pub instances: Vec<usize>,
    pub renewal: Option<tokio::task::JoinHandle<()>>,
}

pub(super) async fn lock(
    s: &mut RedisSession,
    name: &str,
    recipe: LockRecipe,
) -> Result<LockGuard, DriverError> {
    let (key, fence) = lock_keys(name);
    let owner = s.new_owner();
    // Known before the first request: if this call is cut short, the session releases
    // whatever it may have been granted on its next call.
    s.held.insert(
        key.clone(),
        Held {
            owner: owner.clone(),
            instances: (0..s.conns.len()).collect(),
            renewal: None,
        },
    );
    let (token, instances) = match recipe {
        LockRecipe::SetNx => single(s, name, &key, &fence, &owner, false).await?,
        LockRecipe::SetNxNotify => single(s, name, &key, &fence, &owner, true).await?,
        LockRecipe::Redlock => redlock(s, &key, &fence, &owner).await?,
        other => return Err(other.unsupported(ApiFamily::Redis)),
    };
    let renewal = renew_task(s, &key, &owner, &instances);
    s.held.insert(
        key.clone(),
        Held {
            owner,
            instances,
            renewal: Some(renewal),
        },
    );
    Ok(LockGuard {
        name: name.to_string(),
        token,
        key: key.into_bytes(),
    })
}

/// One attempt on instance `i`: the token, or 0 when the lock is taken.
async fn attempt(
    conn: &mut ConnectionManager,
    counters: &CounterHandle,
    key: &str,
    fence: &str,
    owner: &str,
    ttl: Duration,
) -> Result<i64, DriverError> {
    counters.request();
    ACQUIRE
        .key(key)
        .key(fence)
        .arg(owner)
        .arg(ttl.as_millis() as u64)
        .invoke_async(conn)
        .await
        .map_err(map_error)
}

/// set-nx and set-nx-notify on the lock's instance.
async fn single(
    s: &mut RedisSession,
    name: &str,
    key: &str,
    fence: &str,
    owner: &str,
    notify: bool,
) -> Result<(i64, Vec<usize>), DriverError> {
    let i = home(name, s.conns.len());
    let mut events = if notify {
        Some(s.subscribe(i, key).await?)
    } else {
        None
    };
    let mut backoff = Backoff::default();
    loop {
        let token = attempt(&mut s.conns[i], &s.counters, key, fence, owner, s.ttl).await?;
        if token > 0 {
            if let Some(pubsub) = events.take() {
                s.unsubscribe(pubsub, key).await;
            }
            return Ok((token, vec![i]));
        }
        match events.as_mut() {
            // A lost event costs at most a third of the TTL.
            Some(pubsub) => {
                if let Ok(Some(_)) =
                    tokio::time::timeout(s.ttl / 3, pubsub.on_message().next()).await
                {
                    s.counters.notifications(1);
                }
            }
            None => backoff.wait().await,
        }
    }
}

/// Redlock over every instance.
async fn redlock(
    s: &mut RedisSession,
    key: &str,
    fence: &str,
    owner: &str,
) -> Result<(i64, Vec<usize>), DriverError> {
    let n = s.conns.len();
    let quorum = n / 2 + 1;
    let per_instance = (s.ttl / 10).clamp(Duration::from_millis(20), Duration::from_millis(200));
    let (ttl, drift) = (s.ttl, s.ttl / 100 + Duration::from_millis(2));
    let mut backoff = Backoff::default();
    loop {
        let started = Instant::now();
        let attempts = s.conns.iter().map(|c| {
            let (mut c, counters) = (c.clone(), s.counters.clone());
            async move {
                let a = attempt(&mut c, &counters, key, fence, owner, ttl);
                tokio::time::timeout(per_instance, a).await
            }
        });
        let granted: Vec<(usize, i64)> = join_all(attempts)
            .await
            .into_iter()
            .enumerate()
            .filter_map(|(i, r)| match r {
                Ok(Ok(t)) if t > 0 => Some((i, t)),
                _ => None,
            })
            .collect();
        let instances: Vec<usize> = granted.iter().map(|(i, _)| *i).collect();
        if granted.len() >= quorum && started.elapsed() + drift < ttl {
            let token = granted.iter().map(|(_, t)| *t).max().unwrap_or(0);
            raise(s, fence, token, &instances, per_instance).await;
            return Ok((token, instances));
        }
        release_on(s, key, owner, &instances, per_instance).await;
        backoff.wait().await;
    }
}

/// Raises the fence counter on `instances` to `token`.
async fn raise(s: &RedisSession, fence: &str, token: i64, instances: &[usize], bound: Duration) {
    let calls = instances.iter().map(|&i| {
        let mut c = s.conns[i].clone();
        s.counters.request();
        async move {
            let mut invocation = RAISE.key(fence);
            invocation.arg(token);
            let _ = tokio::time::timeout(bound, invocation.invoke_async::<i64>(&mut c)).await;
        }
    });
    join_all(calls).await;
}

/// Compare-and-delete on `instances`, each within `bound` (a paused instance's lock
/// expires on its own).
pub(super) async fn release_on(
    s: &RedisSession,
    key: &str,
    owner: &str,
    instances: &[usize],
    bound: Duration,
) -> usize {
    let calls = instances.iter().map(|&i| {
        let mut c = s.conns[i].clone();
        s.counters.request();
        async move {
            let mut invocation = RELEASE.key(key);
            invocation.arg(owner);
            let call = invocation.invoke_async::<i64>(&mut c);
            matches!(tokio::time::timeout(bound, call).await, Ok(Ok(1)))
        }
    });
    join_all(calls).await.into_iter().filter(|ok| *ok).count()
}

/// The renewal task of a held lock: PEXPIRE at TTL/3 while the owner still holds it,
/// waiting out a freeze first.
fn renew_task(
    s: &RedisSession,
    key: &str,
    owner: &str,
    instances: &[usize],
) -> tokio::task::JoinHandle<()> {
    let conns: Vec<ConnectionManager> = instances.iter().map(|&i| s.conns[i].clone()).collect();
    let (key, owner, ttl) = (key.to_string(), owner.to_string(), s.ttl);
    let (counters, freeze): (CounterHandle, FreezeGate) = (s.counters.clone(), s.freeze.clone());
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(ttl / 3).await;
            freeze.thawed().await;
            for mut c in conns.iter().cloned() {
                counters.keepalive();
                let mut invocation = RENEW.key(&key);
                invocation.arg(&owner).arg(ttl.as_millis() as u64);
                let _ = tokio::time::timeout(ttl / 3, invocation.invoke_async::<i64>(&mut c)).await;
            }
        }
    })
}
