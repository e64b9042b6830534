//! Lock recipes and the API families that implement them.
//!
//! Every family has a herd-free recipe (each waiter waits only for its predecessor) and a
//! naive one (every waiter wakes on every release and retries), the herd-effect baseline.
//! The user names recipes by their family's name (`etcd-mutex`, `zk-recipe`, `naive`).

use std::fmt;

/// Which lock protocol a session runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockRecipe {
    /// Wait only for the predecessor: etcd's concurrency Mutex, ZooKeeper's lock recipe.
    HerdFree,
    /// Every waiter watches the one lock and retries on every release.
    Naive,
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
}

impl ApiFamily {
    /// The name of the herd-free recipe in this family.
    pub fn herd_free_name(self) -> &'static str {
        match self {
            ApiFamily::Etcd => "etcd-mutex",
            ApiFamily::ZooKeeper => "zk-recipe",
            ApiFamily::Null => "mutex",
        }
    }

    /// The user-facing name of a recipe in this family.
    pub fn recipe_name(self, recipe: LockRecipe) -> &'static str {
        match recipe {
            LockRecipe::HerdFree => self.herd_free_name(),
            LockRecipe::Naive => "naive",
        }
    }

    /// Parses a recipe name; `None` picks the herd-free default. The error is one line that
    /// lists what this family accepts.
    pub fn parse_recipe(self, name: Option<&str>) -> Result<LockRecipe, String> {
        match name {
            None => Ok(LockRecipe::HerdFree),
            Some("naive") => Ok(LockRecipe::Naive),
            Some(n) if n == self.herd_free_name() => Ok(LockRecipe::HerdFree),
            Some(n) => Err(format!(
                "unknown lock recipe '{n}' for {self}; use {} or naive",
                self.herd_free_name()
            )),
        }
    }
}

impl fmt::Display for ApiFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ApiFamily::Etcd => "the etcd API",
            ApiFamily::ZooKeeper => "the ZooKeeper API",
            ApiFamily::Null => "the null target",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipe_names_round_trip_per_family() {
        for family in [ApiFamily::Etcd, ApiFamily::ZooKeeper, ApiFamily::Null] {
            for recipe in [LockRecipe::HerdFree, LockRecipe::Naive] {
                let name = family.recipe_name(recipe);
                assert_eq!(family.parse_recipe(Some(name)), Ok(recipe));
            }
            assert_eq!(family.parse_recipe(None), Ok(LockRecipe::HerdFree));
        }
    }

    #[test]
    fn a_recipe_of_another_family_is_refused_with_the_alternatives() {
        let err = ApiFamily::Etcd.parse_recipe(Some("zk-recipe")).unwrap_err();
        assert!(err.contains("etcd-mutex or naive"), "{err}");
        assert!(!err.contains('\n'));
    }
}
