//! Which member-to-member links are cut, and the gate each forwarded connection waits at.
//!
//! One table per proxy holds the cut links as (dialer, destination) member indices; every
//! connection between two members holds a [`Gate`] on its link and waits at it before each
//! write. A cut therefore stalls bytes (they stay queued, the connection stays open) and a
//! heal lets them flow, as TCP retransmission would after a real partition.

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::watch;

/// A directed link: member `from` dialed member `to` (0-based member indices).
pub type Link = (usize, usize);

/// The cut links of one proxy; cheap to clone, all clones share the table.
#[derive(Debug, Clone)]
pub struct Links {
    cut: Arc<watch::Sender<BTreeSet<Link>>>,
}

impl Default for Links {
    fn default() -> Self {
        Links {
            cut: Arc::new(watch::Sender::new(BTreeSet::new())),
        }
    }
}

impl Links {
    /// Cuts (`up == false`) or restores the link `from -> to`.
    pub fn set(&self, from: usize, to: usize, up: bool) {
        self.cut.send_if_modified(|cut| {
            if up {
                cut.remove(&(from, to))
            } else {
                cut.insert((from, to))
            }
        });
    }

    /// Restores every link.
    pub fn heal(&self) {
        self.cut.send_if_modified(|cut| {
            let changed = !cut.is_empty();
            cut.clear();
            changed
        });
    }

    /// The links cut now.
    pub fn cut(&self) -> BTreeSet<Link> {
        self.cut.borrow().clone()
    }

    /// The gate of connections on `link`.
    pub fn gate(&self, link: Link) -> Gate {
        Gate {
            watch: Some((self.cut.subscribe(), link)),
        }
    }
}

/// Where a connection waits while its link is cut; an open gate never closes (client
/// routes, connections whose dialer is not a member).
#[derive(Debug, Clone)]
pub struct Gate {
    watch: Option<(watch::Receiver<BTreeSet<Link>>, Link)>,
}

impl Gate {
    pub fn open() -> Gate {
        Gate { watch: None }
    }

    /// Returns once the link is up (at once if it is). Also returns when the proxy is gone.
    pub async fn wait_up(&mut self) {
        if let Some((rx, link)) = self.watch.as_mut() {
            let link = *link;
            let _ = rx.wait_for(|cut| !cut.contains(&link)).await;
        }
    }

    pub fn is_up(&self) -> bool {
        match &self.watch {
            Some((rx, link)) => !rx.borrow().contains(link),
            None => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn a_gate_waits_while_its_link_is_cut_and_only_then() {
        let links = Links::default();
        let mut gate = links.gate((0, 1));
        let other = links.gate((1, 0));
        links.set(0, 1, false);
        assert!(!gate.is_up() && other.is_up());
        let waited = tokio::time::timeout(Duration::from_millis(50), gate.wait_up()).await;
        assert!(waited.is_err(), "passed a cut link");
        links.heal();
        tokio::time::timeout(Duration::from_secs(1), gate.wait_up())
            .await
            .expect("healed link lets the gate pass");
        assert!(links.cut().is_empty());
        Gate::open().wait_up().await;
    }
}
