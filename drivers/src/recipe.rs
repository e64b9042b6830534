//! Lock recipes and the API families that implement them.
//!
//! The coordination services' families (etcd, ZooKeeper, null) each have a herd-free
//! recipe (each waiter waits only for its predecessor) and a naive one (every waiter wakes
//! on every release and retries), the herd-effect baseline. Redis and PostgreSQL have
//! recipes of their own: SET NX with polling waiters or with keyspace notifications,
//! Redlock over independent instances; session-scoped advisory locks and a lease row.
//! The user names recipes by their family's name (`etcd-mutex`, `zk-recipe`, `set-nx`,
//! `advisory`, `naive`, ...); the first name a family lists is its default.

use std::fmt;

/// Which lock protocol a session runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockRecipe {
    /// Wait only for the predecessor: etcd's concurrency Mutex, ZooKeeper's lock recipe.
    HerdFree,
    /// Every waiter watches the one lock and retries on every release.
    Naive,
    /// Redis `SET key token NX PX ttl`; waiters poll with capped exponential backoff.
    SetNx,
    /// Redis `SET NX PX`; waiters wait on the key's keyspace notifications (pub/sub), so
    /// every release wakes every waiter.
    SetNxNotify,
    /// Redlock: `SET NX PX` on a majority of independent Redis instances within the
    /// validity time (TTL minus elapsed minus clock drift).
    Redlock,
    /// PostgreSQL `pg_advisory_lock`, session-scoped: waiters block in the server.
    Advisory,
    /// PostgreSQL lock row with an expiry, taken by an upsert that wins only once the
    /// lease expired, renewed at TTL/3.
    LeaseRow,
}

/// A client protocol: the recipes and the names they go by differ per family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApiFamily {
    /// etcd's v3 gRPC API (real etcd, the Raft engine).
    Etcd,
    /// ZooKeeper's protocol (real ZooKeeper, the Zab engine).
    ZooKeeper,
    /// The in-process null target.
    Null,
    /// Redis's protocol (RESP) against independent instances.
    Redis,
    /// PostgreSQL's wire protocol.
    Postgres,
}

impl ApiFamily {
    /// The recipes of this family with their names, the default first.
    pub fn recipes(self) -> &'static [(&'static str, LockRecipe)] {
        match self {
            ApiFamily::Etcd => &[
                ("etcd-mutex", LockRecipe::HerdFree),
                ("naive", LockRecipe::Naive),
            ],
            ApiFamily::ZooKeeper => &[
                ("zk-recipe", LockRecipe::HerdFree),
                ("naive", LockRecipe::Naive),
            ],
            ApiFamily::Null => &[
                ("mutex", LockRecipe::HerdFree),
                ("naive", LockRecipe::Naive),
            ],
            ApiFamily::Redis => &[
                ("set-nx", LockRecipe::SetNx),
                ("set-nx-notify", LockRecipe::SetNxNotify),
                ("redlock", LockRecipe::Redlock),
            ],
            ApiFamily::Postgres => &[
                ("advisory", LockRecipe::Advisory),
                ("lease-row", LockRecipe::LeaseRow),
            ],
        }
    }

    /// The recipe used when none is named.
    pub fn default_recipe(self) -> LockRecipe {
        self.recipes()[0].1
    }

    /// The family's herd-free recipe, if it has one (each release wakes one waiter).
    pub fn herd_free(self) -> Option<LockRecipe> {
        match self {
            ApiFamily::Etcd | ApiFamily::ZooKeeper | ApiFamily::Null => Some(LockRecipe::HerdFree),
            ApiFamily::Postgres => Some(LockRecipe::Advisory),
            ApiFamily::Redis => None,
        }
    }

    /// The name of the herd-free recipe in this family (`None`: it has none).
    pub fn herd_free_name(self) -> Option<&'static str> {
        self.herd_free().map(|r| self.recipe_name(r))
    }

    /// The user-facing name of a recipe in this family (`?` for one it lacks).
    pub fn recipe_name(self, recipe: LockRecipe) -> &'static str {
        self.recipes()
            .iter()
            .find(|(_, r)| *r == recipe)
            .map_or("?", |(name, _)| name)
    }

    /// Parses a recipe name; `None` picks the family's default. The error is one line that
    /// lists what this family accepts.
    pub fn parse_recipe(self, name: Option<&str>) -> Result<LockRecipe, String> {
        let Some(name) = name else {
            return Ok(self.default_recipe());
        };
        if let Some((_, r)) = self.recipes().iter().find(|(n, _)| *n == name) {
            return Ok(*r);
        }
        let names: Vec<&str> = self.recipes().iter().map(|(n, _)| *n).collect();
        let (last, rest) = names.split_last().expect("every family has recipes");
        Err(format!(
            "unknown lock recipe '{name}' for {self}; use {} or {last}",
            rest.join(", ")
        ))
    }
}

impl fmt::Display for ApiFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ApiFamily::Etcd => "the etcd API",
            ApiFamily::ZooKeeper => "the ZooKeeper API",
            ApiFamily::Null => "the null target",
            ApiFamily::Redis => "redis",
            ApiFamily::Postgres => "postgres",
        })
    }
}

impl LockRecipe {
    /// The error a driver gives for a recipe its family does not have (configuration
    /// refuses such runs first; this guards the seam).
    pub fn unsupported(self, family: ApiFamily) -> crate::DriverError {
        crate::DriverError::Unsupported(format!("lock recipe {self:?} on {family}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FAMILIES: [ApiFamily; 5] = [
        ApiFamily::Etcd,
        ApiFamily::ZooKeeper,
        ApiFamily::Null,
        ApiFamily::Redis,
        ApiFamily::Postgres,
    ];

    #[test]
    fn recipe_names_round_trip_per_family() {
        for family in FAMILIES {
            for &(name, recipe) in family.recipes() {
                assert_eq!(family.recipe_name(recipe), name);
                assert_eq!(family.parse_recipe(Some(name)), Ok(recipe));
            }
            assert_eq!(family.parse_recipe(None), Ok(family.default_recipe()));
        }
        assert_eq!(ApiFamily::Etcd.default_recipe(), LockRecipe::HerdFree);
    }

    #[test]
    fn a_recipe_of_another_family_is_refused_with_the_alternatives() {
        let err = ApiFamily::Etcd.parse_recipe(Some("zk-recipe")).unwrap_err();
        assert!(err.contains("etcd-mutex or naive"), "{err}");
        assert!(!err.contains('\n'));
        let err = ApiFamily::Redis.parse_recipe(Some("advisory")).unwrap_err();
        assert!(err.contains("set-nx, set-nx-notify or redlock"), "{err}");
    }
}
