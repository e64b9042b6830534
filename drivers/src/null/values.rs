//! Null-target value watches: the latest value of every watched key and, per watch, a queue
//! of every version written since it started (etcd-style: nothing is coalesced). Unwatched
//! keys are not stored, so kv runs keep measuring the generator alone.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use async_trait::async_trait;
use tokio::sync::mpsc;

use super::locked;
use crate::{CounterHandle, DriverError, ValueWatch};

#[derive(Default)]
struct WatchedKey {
    value: Option<Vec<u8>>,
    watchers: Vec<mpsc::UnboundedSender<Vec<u8>>>,
}

#[derive(Default)]
pub(super) struct Values {
    keys: Mutex<HashMap<String, WatchedKey>>,
    /// Set once any key is watched: until then a put takes no lock.
    any: AtomicBool,
}

impl Values {
    pub(super) fn put(&self, key: &str, value: &[u8]) {
        if !self.any.load(Ordering::Relaxed) {
            return;
        }
        if let Some(k) = locked(&self.keys).get_mut(key) {
            k.value = Some(value.to_vec());
            k.watchers.retain(|w| w.send(value.to_vec()).is_ok());
        }
    }

    pub(super) fn watch(&self, key: &str, counters: CounterHandle) -> NullValueWatch {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut keys = locked(&self.keys);
        self.any.store(true, Ordering::Relaxed);
        let k = keys.entry(key.to_string()).or_default();
        k.watchers.push(tx);
        NullValueWatch {
            current: Some(k.value.clone()),
            rx,
            counters,
        }
    }
}

pub(super) struct NullValueWatch {
    /// The value when the watch started, returned by the first call.
    current: Option<Option<Vec<u8>>>,
    rx: mpsc::UnboundedReceiver<Vec<u8>>,
    counters: CounterHandle,
}

#[async_trait]
impl ValueWatch for NullValueWatch {
    async fn next(&mut self) -> Result<Option<Vec<u8>>, DriverError> {
        if let Some(current) = self.current.take() {
            return Ok(current);
        }
        let value = self
            .rx
            .recv()
            .await
            .ok_or_else(|| DriverError::Server("watched key went away".into()))?;
        self.counters.notifications(1);
        Ok(Some(value))
    }
}
