//! What a cancelled operation may have left on the server, and its removal.
//!
//! A lock acquisition or a campaign whose future is dropped (the operation timeout, the end
//! of the window) may already have created its node, whose name it never learned. Left
//! there, it would hold a queue or an election for a client that stopped waiting. The
//! session remembers it as [`Pending`] and [`repair`] deletes it before the session's next
//! recipe call (and in resign).

use super::client::{Client, Error};

use super::map_error;
use super::session::ZkSession;
use crate::DriverError;

/// A node a cancelled acquisition may have left behind.
#[derive(Debug, Clone)]
pub(super) enum Pending {
    /// This session's sequential nodes under `dir`, recognised by their name `prefix`.
    Queue { dir: String, prefix: String },
    /// The naive lock's holder node: ours only if this session owns it.
    Holder { path: String },
}

/// Deletes what a cancelled acquisition left. Kept pending if that fails, to retry later.
pub(super) async fn repair(s: &mut ZkSession) -> Result<(), DriverError> {
    let Some(pending) = s.pending.clone() else {
        return Ok(());
    };
    let zk = s.zk()?.clone();
    match pending {
        Pending::Queue { dir, prefix } => {
            s.counters.request();
            // Only this session's own names are kept, not the whole listing.
            let ours: Vec<String> = match zk.children(&dir).await {
                Err(Error::NoNode) => Vec::new(),
                other => other
                    .map_err(map_error)?
                    .iter()
                    .filter(|c| c.starts_with(&prefix))
                    .map(String::from)
                    .collect(),
            };
            for child in ours {
                s.counters.request();
                delete_if_present(&zk, &format!("{dir}/{child}"), None).await?;
            }
        }
        Pending::Holder { path } => {
            s.counters.request();
            let stat = zk.exists(&path).await.map_err(map_error)?;
            if let Some(stat) = stat.filter(|st| st.ephemeral_owner == zk.session_id()) {
                s.counters.request();
                delete_if_present(&zk, &path, Some(stat.version)).await?;
            }
        }
    }
    s.pending = None;
    Ok(())
}

/// Deletes `path`; a node already gone is fine.
pub(super) async fn delete_if_present(
    zk: &Client,
    path: &str,
    version: Option<i32>,
) -> Result<(), DriverError> {
    match zk.delete(path, version).await {
        Ok(()) | Err(Error::NoNode) => Ok(()),
        Err(e) => Err(map_error(e)),
    }
}
