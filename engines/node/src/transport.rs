//! How a node reaches its peers: the [`Transport`] trait, and an in-process implementation
//! over channels for tests ([`InProcNetwork`]). The TCP implementation is in `tcp`.
//!
//! Sending never waits: every queue is bounded and a message that does not fit is dropped
//! (Raft retransmits; the runtime's own requests time out and are retried by clients).
//! Inbound messages arrive on the node's inbox, a bounded `mpsc` channel.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use coordbench_raft::NodeId;
use tokio::sync::mpsc;

use crate::envelope::Envelope;

/// Outbound side of a node's network.
pub trait Transport: Send + Sync + 'static {
    /// Queues `env` for `env.to`. Returns false if it was dropped (unknown peer, queue full,
    /// peer unreachable).
    fn send(&self, env: Envelope) -> bool;
}

#[derive(Default)]
struct Net {
    inboxes: HashMap<NodeId, mpsc::Sender<Envelope>>,
    /// Nodes cut off from everyone (both directions).
    isolated: HashMap<NodeId, bool>,
}

/// A set of in-process nodes connected by channels. Clones share the network.
#[derive(Clone, Default)]
pub struct InProcNetwork {
    net: Arc<Mutex<Net>>,
}

impl InProcNetwork {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces, on restart) node `id`; returns its transport and inbox.
    pub fn join(&self, id: NodeId, capacity: usize) -> (InProcTransport, mpsc::Receiver<Envelope>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        self.lock().inboxes.insert(id, tx);
        (
            InProcTransport {
                id,
                net: self.clone(),
            },
            rx,
        )
    }

    /// Cuts `id` off from every other node, or reconnects it.
    pub fn isolate(&self, id: NodeId, isolated: bool) {
        self.lock().isolated.insert(id, isolated);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Net> {
        self.net.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One node's end of an [`InProcNetwork`].
#[derive(Clone)]
pub struct InProcTransport {
    id: NodeId,
    net: InProcNetwork,
}

impl Transport for InProcTransport {
    fn send(&self, env: Envelope) -> bool {
        let net = self.net.lock();
        let cut = |n: NodeId| net.isolated.get(&n).copied().unwrap_or(false);
        if env.from != self.id || cut(self.id) || cut(env.to) {
            return false;
        }
        match net.inboxes.get(&env.to) {
            Some(tx) => tx.try_send(env).is_ok(),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envelope::Payload;

    fn env(from: NodeId, to: NodeId) -> Envelope {
        Envelope {
            from,
            to,
            payload: Payload::ReadIndexRequest { request_id: 1 },
        }
    }

    #[test]
    fn delivers_drops_when_full_and_isolates() {
        let net = InProcNetwork::new();
        let (t1, _rx1) = net.join(1, 4);
        let (_t2, mut rx2) = net.join(2, 2);
        assert!(t1.send(env(1, 2)));
        assert!(t1.send(env(1, 2)));
        assert!(!t1.send(env(1, 2)), "bounded: the third is dropped");
        assert!(!t1.send(env(1, 3)), "unknown peer");
        assert!(!t1.send(env(2, 2)), "cannot send as someone else");
        assert_eq!(rx2.try_recv().ok(), Some(env(1, 2)));
        net.isolate(2, true);
        assert!(!t1.send(env(1, 2)));
        net.isolate(2, false);
        assert!(t1.send(env(1, 2)));
    }
}
