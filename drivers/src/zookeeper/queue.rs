//! Sequential-node queues, shared by the herd-free lock and both election recipes: a
//! session's ephemeral sequential node under a directory, and the wait until it is the
//! lowest there.
//!
//! Node names are `<session id>-<kind>-<sequence>`. The session id (Curator's
//! "protection") lets a cancelled call find its node ([`Pending::Queue`]); the sequence the
//! server appends orders the queue. Two ways to wait ([`Wake`]): on the predecessor only
//! (ZooKeeper's recipes, Curator's LeaderLatch and InterProcessMutex), or on every change
//! of the directory's children (the herd).

use super::client::{CreateMode, Error};

use super::errors::check_event;
use super::map_error;
use super::pending::Pending;
use super::session::{create_in_parent, ZkSession};
use crate::DriverError;

/// What a queued node waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wake {
    /// A getData watch on the next-lower node alone: one waiter wakes per departure. getData
    /// rather than exists, so a predecessor already gone leaves no watch behind.
    Predecessor,
    /// A getChildren watch on the directory: every waiter wakes on every join and leave.
    AnyChange,
}

/// A node this session queued.
#[derive(Debug, Clone)]
pub(super) struct Place {
    pub dir: String,
    /// The node's name within `dir`.
    pub name: String,
    pub seq: i64,
    /// The node's czxid: the fencing token once it is first.
    pub czxid: i64,
}

impl Place {
    pub fn path(&self) -> String {
        format!("{}/{}", self.dir, self.name)
    }
}

/// Creates this session's node (data `data`) in the queue `dir` (created as needed). The
/// node stays pending until [`wait_first`] returns.
pub(super) async fn join(
    s: &mut ZkSession,
    dir: String,
    kind: &str,
    data: &[u8],
) -> Result<Place, DriverError> {
    let zk = s.zk()?.clone();
    let prefix = format!("{:016x}-{kind}-", zk.session_id());
    s.pending = Some(Pending::Queue {
        dir: dir.clone(),
        prefix: prefix.clone(),
    });
    s.counters.request();
    let path = format!("{dir}/{prefix}");
    let (created, stat) =
        create_in_parent(&zk, &path, data, CreateMode::EphemeralSequential, s.acl())
            .await
            .map_err(map_error)?;
    let name = created.rsplit('/').next().unwrap_or_default().to_string();
    let seq = sequence(&name).ok_or_else(|| {
        DriverError::Server(format!("the server named the sequential node {created:?}"))
    })?;
    Ok(Place {
        name,
        seq,
        czxid: stat.czxid,
        dir,
    })
}

/// Waits until `place` is the lowest node of its queue. `waiting` names what for, in errors.
pub(super) async fn wait_first(
    s: &mut ZkSession,
    place: &Place,
    wake: Wake,
    waiting: &str,
) -> Result<(), DriverError> {
    let zk = s.zk()?.clone();
    loop {
        s.counters.request();
        let (children, watcher) = match wake {
            Wake::Predecessor => (zk.children(&place.dir).await.map_err(map_error)?, None),
            Wake::AnyChange => {
                let (children, watcher) =
                    zk.children_and_watch(&place.dir).await.map_err(map_error)?;
                (children, Some(watcher))
            }
        };
        if !children.contains(&place.name) {
            s.pending = None;
            return Err(DriverError::SessionExpired(format!(
                "{} vanished while waiting for {waiting}",
                place.path()
            )));
        }
        // Only the predecessor's name is kept: with thousands queued, every waiter holding
        // the whole listing through its wait held gigabytes in the generator.
        let predecessor = predecessor(children.iter(), place.seq).map(str::to_string);
        drop(children);
        let Some(predecessor) = predecessor else {
            s.pending = None;
            return Ok(());
        };
        let watcher = match watcher {
            Some(watcher) => watcher,
            None => {
                s.counters.request();
                match zk
                    .get_and_watch_data(&format!("{}/{predecessor}", place.dir))
                    .await
                {
                    Ok((_, _, watcher)) => watcher,
                    // Gone between the listing and the watch: look again.
                    Err(Error::NoNode) => continue,
                    Err(e) => return Err(map_error(e)),
                }
            }
        };
        let event = watcher.changed().await;
        s.counters.notifications(1);
        check_event(&event, waiting)?;
    }
}

/// The sequence number that ends a sequential node's name.
pub(crate) fn sequence(name: &str) -> Option<i64> {
    name.rsplit('-').next()?.parse().ok()
}

/// The child with the highest sequence number below `seq`: whom a node at `seq` waits for.
pub(super) fn predecessor<'a>(
    children: impl IntoIterator<Item = &'a str>,
    seq: i64,
) -> Option<&'a str> {
    children
        .into_iter()
        .filter_map(|c| sequence(c).filter(|&n| n < seq).map(|n| (n, c)))
        .max_by_key(|(n, _)| *n)
        .map(|(_, c)| c)
}

/// The child with the lowest sequence number: the head of the queue (an election's leader).
pub(super) fn head<'a>(children: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    children
        .into_iter()
        .filter_map(|c| sequence(c).map(|n| (n, c)))
        .min_by_key(|(n, _)| *n)
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names<'a>(v: &[&'a str]) -> Vec<&'a str> {
        v.to_vec()
    }

    #[test]
    fn sequence_numbers_are_read_from_the_end_of_the_name() {
        assert_eq!(sequence("00000000deadbeef-lock-0000000042"), Some(42));
        assert_eq!(
            sequence("00000000deadbeef-lock-0000000000000000042"),
            Some(42)
        );
        assert_eq!(sequence("holder"), None);
    }

    #[test]
    fn the_predecessor_is_the_next_lower_sequence_whatever_the_session() {
        // Listing order is the server's, not sequence order; session ids differ.
        let children = names(&[
            "00000000000000ff-latch-0000000007",
            "0000000000000001-latch-0000000003",
            "00000000000000aa-latch-0000000005",
            "stray",
            "0000000000000002-latch-0000000009",
        ]);
        assert_eq!(
            predecessor(children.iter().copied(), 7),
            Some("00000000000000aa-latch-0000000005")
        );
        assert_eq!(
            predecessor(children.iter().copied(), 9),
            Some("00000000000000ff-latch-0000000007")
        );
        assert_eq!(
            predecessor(children.iter().copied(), 4),
            Some("0000000000000001-latch-0000000003")
        );
        assert_eq!(predecessor(children.iter().copied(), 3), None);
        assert_eq!(predecessor([], 3), None);
    }

    #[test]
    fn the_head_is_the_lowest_sequence() {
        let children = names(&[
            "0000000000000002-latch-0000000010",
            "0000000000000001-latch-0000000009",
            "stray",
        ]);
        assert_eq!(
            head(children.iter().copied()),
            Some("0000000000000001-latch-0000000009")
        );
        assert_eq!(head(["stray"]), None);
        assert_eq!(head([]), None);
    }

    #[test]
    fn wide_sequence_numbers_order_after_narrow_ones() {
        // Past i32::MAX the server prints 19 digits; order follows the number, not the text.
        let children = names(&["a-x-2147483647", "b-x-0000000002147483648"]);
        assert_eq!(head(children.iter().copied()), Some("a-x-2147483647"));
        assert_eq!(
            predecessor(children.iter().copied(), 2147483648),
            Some("a-x-2147483647")
        );
    }
}
