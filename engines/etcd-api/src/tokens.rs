//! etcd's simple tokens: opaque `<random>.<log index>` strings handed out by Authenticate
//! and sent by clients as the `token` gRPC metadata. Every member learns a token when it
//! applies the authentication that named it, so any member accepts it; a token is dropped
//! after a TTL without use (etcd's `--auth-token-ttl`, 300 s), when its user is deleted or
//! changes password, and when auth is disabled. Tokens are not state-machine state: they
//! are not in snapshots, and a member that restarts forgets them (clients then get
//! "invalid auth token" and authenticate again, as with etcd).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Tokens are swept for expiry once per this many authentications.
const SWEEP_EVERY: u64 = 64;

struct Held {
    user: String,
    last_used: Instant,
}

#[derive(Default)]
struct Table {
    tokens: HashMap<String, Held>,
    ttl: Duration,
    assigned: u64,
}

/// The tokens this member accepts.
pub struct SimpleTokens {
    table: Mutex<Table>,
}

impl Default for SimpleTokens {
    fn default() -> Self {
        SimpleTokens::new(Duration::from_secs(300))
    }
}

impl SimpleTokens {
    pub fn new(ttl: Duration) -> Self {
        SimpleTokens {
            table: Mutex::new(Table {
                ttl,
                ..Table::default()
            }),
        }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        // A panic while holding the lock cannot leave the map inconsistent.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the inactivity TTL (a member's `--auth-token-ttl`).
    pub fn set_ttl(&self, ttl: Duration) {
        self.table().ttl = ttl;
    }

    /// Accepts `token` for `user` from now on.
    pub fn assign(&self, token: String, user: String) {
        let mut t = self.table();
        t.assigned += 1;
        if t.assigned % SWEEP_EVERY == 0 {
            let (now, ttl) = (Instant::now(), t.ttl);
            t.tokens
                .retain(|_, h| now.duration_since(h.last_used) < ttl);
        }
        let held = Held {
            user,
            last_used: Instant::now(),
        };
        t.tokens.insert(token, held);
    }

    /// The user of a live token, whose TTL starts again; `None` if unknown or expired.
    pub fn user_of(&self, token: &str) -> Option<String> {
        let mut t = self.table();
        let ttl = t.ttl;
        let now = Instant::now();
        let held = t.tokens.get_mut(token)?;
        if now.duration_since(held.last_used) >= ttl {
            t.tokens.remove(token);
            return None;
        }
        held.last_used = now;
        Some(held.user.clone())
    }

    /// Drops every token of `user`.
    pub fn invalidate_user(&self, user: &str) {
        self.table().tokens.retain(|_, h| h.user != user);
    }

    /// Drops every token (auth disabled).
    pub fn clear(&self) {
        self.table().tokens.clear();
    }
}

/// The log index a token names (its suffix after the last `.`), if it has one.
pub fn token_index(token: &str) -> Option<u64> {
    token.rsplit_once('.').and_then(|(_, i)| i.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_expire_after_inactivity_and_with_their_user() {
        let tokens = SimpleTokens::new(Duration::from_millis(50));
        tokens.assign("a.5".into(), "alice".into());
        tokens.assign("b.6".into(), "bob".into());
        assert_eq!(tokens.user_of("a.5").as_deref(), Some("alice"));
        assert_eq!(token_index("a.5"), Some(5));
        assert_eq!(token_index("nodot"), None);
        // Use keeps a token alive past its TTL; idleness does not.
        for _ in 0..4 {
            std::thread::sleep(Duration::from_millis(20));
            assert!(tokens.user_of("a.5").is_some());
        }
        assert_eq!(tokens.user_of("b.6"), None);
        tokens.invalidate_user("alice");
        assert_eq!(tokens.user_of("a.5"), None);
        tokens.assign("c.7".into(), "carol".into());
        tokens.clear();
        assert_eq!(tokens.user_of("c.7"), None);
    }
}
