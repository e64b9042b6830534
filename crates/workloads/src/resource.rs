//! The resource each lock protects, and how it treats a holder that lost its lock without
//! knowing (`--protect`).
//!
//! - `none`: an in-process resource that accepts every write: what a lock alone gives.
//! - `token`: an in-process resource that remembers the highest fencing token it has seen
//!   per lock and rejects a write carrying a lower one (the fencing tokens of Kleppmann's
//!   "How to do distributed locking"). A holder's own later writes carry the same token and
//!   pass.
//! - `txn`: the resource is a key of the coordination service itself,
//!   `/coordbench/resource/<lock>`, written with [`Session::fenced_put`]: the service
//!   applies the write only while the holder's lock key (node) is still the holder's.

use std::collections::HashMap;
use std::sync::Mutex;

use coordbench_drivers::{LockGuard, Session};

/// How the protected resource fences stale holders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Protection {
    #[default]
    None,
    Token,
    Txn,
}

impl Protection {
    /// The name `--protect` takes and results show.
    pub fn name(self) -> &'static str {
        match self {
            Protection::None => "none",
            Protection::Token => "token",
            Protection::Txn => "txn",
        }
    }
}

/// What the resource did with one write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteOutcome {
    Accepted,
    Rejected,
    /// The write itself failed (an error in flight): neither accepted nor rejected.
    Failed,
}

/// The coordination-service key of lock `lock`'s resource (`txn`).
pub fn resource_key(lock: &str) -> String {
    format!("/coordbench/resource/{lock}")
}

/// Every lock's resource under one protection.
#[derive(Debug, Default)]
pub struct Resources {
    protection: Protection,
    /// `token`: per lock, the highest token a write carried.
    highest: Mutex<HashMap<String, i64>>,
}

impl Resources {
    pub fn new(protection: Protection) -> Self {
        Resources {
            protection,
            highest: Mutex::default(),
        }
    }

    pub fn protection(&self) -> Protection {
        self.protection
    }

    /// Whether writes go to an in-process resource (`none`, `token`), which sees them the
    /// instant they are made, rather than through the coordination service (`txn`).
    pub fn in_process(&self) -> bool {
        self.protection != Protection::Txn
    }

    /// Writes `value` to the resource of `guard`'s lock as its holder.
    pub async fn write(
        &self,
        session: &mut dyn Session,
        guard: &LockGuard,
        value: &[u8],
    ) -> WriteOutcome {
        let accepted = match self.protection {
            Protection::None => true,
            Protection::Token => self.admit_token(&guard.name, guard.token),
            Protection::Txn => {
                match session
                    .fenced_put(guard, &resource_key(&guard.name), value)
                    .await
                {
                    Ok(applied) => applied,
                    Err(_) => return WriteOutcome::Failed,
                }
            }
        };
        if accepted {
            WriteOutcome::Accepted
        } else {
            WriteOutcome::Rejected
        }
    }

    /// The caretaker's rule: a token lower than the highest seen for `lock` is refused;
    /// otherwise it becomes the highest.
    fn admit_token(&self, lock: &str, token: i64) -> bool {
        let mut highest = self.highest.lock().unwrap_or_else(|p| p.into_inner());
        let seen = highest.entry(lock.to_string()).or_insert(i64::MIN);
        if token < *seen {
            return false;
        }
        *seen = token;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_below_the_highest_seen_is_refused_and_equal_or_higher_pass() {
        let r = Resources::new(Protection::Token);
        assert!(r.admit_token("a", 5));
        assert!(r.admit_token("a", 5), "the holder's own second write");
        assert!(r.admit_token("a", 9));
        assert!(!r.admit_token("a", 5), "a stale holder's write");
        assert!(!r.admit_token("a", 8));
        assert!(r.admit_token("a", 9));
        // Locks are fenced apart.
        assert!(r.admit_token("b", 1));
    }

    #[tokio::test]
    async fn none_accepts_what_token_rejects() {
        use coordbench_drivers::null::NullCoordinator;
        use coordbench_drivers::{Coordinator, SessionOptions};
        let c = NullCoordinator::new();
        let options = SessionOptions {
            ttl: std::time::Duration::from_secs(2),
        };
        let mut s = c.open_session(0, &options).await.unwrap();
        let guard = |token| LockGuard {
            name: "a".into(),
            token,
            key: b"a".to_vec(),
        };
        for (protection, stale) in [
            (Protection::None, WriteOutcome::Accepted),
            (Protection::Token, WriteOutcome::Rejected),
        ] {
            let r = Resources::new(protection);
            let newer = r.write(s.as_mut(), &guard(7), b"new").await;
            assert_eq!(newer, WriteOutcome::Accepted);
            assert_eq!(r.write(s.as_mut(), &guard(3), b"old").await, stale);
        }
    }
}
