//! Null-target service discovery: one membership set per service, published to watchers
//! through a watch channel (a watcher that falls behind sees the latest set, as a ZooKeeper
//! child watch would).

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;
use tokio::sync::watch;

use super::locked;
use crate::{CounterHandle, DriverError, MembersWatch};

type Members = watch::Sender<BTreeSet<String>>;

/// Every service of one null coordinator.
#[derive(Default)]
pub(super) struct Services(Mutex<HashMap<String, Members>>);

impl Services {
    fn with<R>(&self, service: &str, f: impl FnOnce(&Members) -> R) -> R {
        let mut table = locked(&self.0);
        let members = table
            .entry(service.to_string())
            .or_insert_with(|| watch::Sender::new(BTreeSet::new()));
        f(members)
    }

    pub(super) fn insert(&self, service: &str, instance: &str) {
        self.with(service, |m| {
            m.send_if_modified(|set| set.insert(instance.to_string()))
        });
    }

    pub(super) fn remove(&self, service: &str, instance: &str) {
        self.with(service, |m| m.send_if_modified(|set| set.remove(instance)));
    }

    pub(super) fn watch(&self, service: &str, counters: CounterHandle) -> NullMembersWatch {
        NullMembersWatch {
            rx: self.with(service, |m| m.subscribe()),
            started: false,
            counters,
        }
    }
}

pub(super) struct NullMembersWatch {
    rx: watch::Receiver<BTreeSet<String>>,
    started: bool,
    counters: CounterHandle,
}

#[async_trait]
impl MembersWatch for NullMembersWatch {
    async fn next(&mut self) -> Result<BTreeSet<String>, DriverError> {
        if std::mem::replace(&mut self.started, true) {
            self.rx
                .changed()
                .await
                .map_err(|_| DriverError::Server("service went away".into()))?;
            self.counters.notifications(1);
        }
        Ok(self.rx.borrow_and_update().clone())
    }
}
