//! The per-address connection cap (ZooKeeper's `maxClientCnxns`): one client address may hold
//! at most so many connections at once, so a runaway or hostile client cannot take every
//! descriptor and all the memory of the server. Each accepted connection holds a [`Slot`];
//! dropping it frees the place.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Open connections per client address, shared by the accept loop and the connections.
#[derive(Debug)]
pub(crate) struct ClientCap {
    /// 0: unlimited.
    max: usize,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

/// One admitted connection; its address's count goes down when it is dropped.
#[derive(Debug)]
pub(crate) struct Slot {
    ip: IpAddr,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl ClientCap {
    pub(crate) fn new(max: usize) -> Self {
        ClientCap {
            max,
            open: Arc::default(),
        }
    }

    /// A slot for one more connection from `ip`, or `None` if it already holds `max`.
    pub(crate) fn admit(&self, ip: IpAddr) -> Option<Slot> {
        let mut open = lock(&self.open);
        let count = open.entry(ip).or_insert(0);
        if self.max != 0 && *count >= self.max {
            return None;
        }
        *count += 1;
        Some(Slot {
            ip,
            open: self.open.clone(),
        })
    }

    pub(crate) fn max(&self) -> usize {
        self.max
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = lock(&self.open);
        if let Some(count) = open.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_each_address_and_frees_on_drop() {
        let cap = ClientCap::new(2);
        let a: IpAddr = [127, 0, 0, 1].into();
        let b: IpAddr = [127, 0, 0, 2].into();
        let first = cap.admit(a).expect("first");
        let _second = cap.admit(a).expect("second");
        assert!(
            cap.admit(a).is_none(),
            "the third from one address is refused"
        );
        let _other = cap.admit(b).expect("another address has its own count");
        drop(first);
        assert!(cap.admit(a).is_some(), "a freed slot admits again");
    }

    #[test]
    fn zero_is_unlimited() {
        let cap = ClientCap::new(0);
        let a: IpAddr = [127, 0, 0, 1].into();
        let slots: Vec<_> = (0..1000).filter_map(|_| cap.admit(a)).collect();
        assert_eq!(slots.len(), 1000);
    }
}
