//! Versioned reads and compare-and-set over the ZooKeeper API, for the register workload:
//! the version is the znode's data version, and a compare-and-set is a setData with that
//! version. A rejection (BadVersion) does not say what the node holds.

use super::client::{Error, Op};

use super::map_error;
use super::session::{znode_path, ZkSession};
use crate::{CasOutcome, Consistency, DriverError, Versioned};

/// Linearizable: a check-only multi on the session's root, then getData, pipelined. The
/// multi is a transaction: it commits through the leader after every write acknowledged
/// before it, and the server answers the session's getData only after applying it, on a
/// follower and on the leader alike. Sync: sync() then getData, pipelined, which a session
/// on the leader can read stale (the leader answers a sync at once). Serializable: getData
/// from the connected server as it stands.
pub(super) async fn read(
    s: &ZkSession,
    key: &str,
    consistency: Consistency,
) -> Result<Option<Versioned>, DriverError> {
    let path = znode_path(key);
    let zk = s.zk()?;
    let read = match consistency {
        Consistency::Linearizable => {
            s.counters.request();
            s.counters.request();
            // Version -1 matches any: the check always holds, and "/" (the chroot) exists.
            let barrier = [Op::Check {
                path: "/",
                version: -1,
            }];
            let (committed, read) = futures::join!(zk.multi(&barrier), zk.get_data(&path));
            committed
                .map_err(map_error)?
                .map_err(|(_, e)| map_error(e))?;
            read
        }
        Consistency::Sync => {
            s.counters.request();
            s.counters.request();
            let (synced, read) = futures::join!(zk.sync(&path), zk.get_data(&path));
            synced.map_err(map_error)?;
            read
        }
        Consistency::Serializable => {
            s.counters.request();
            zk.get_data(&path).await
        }
    };
    match read {
        Ok((value, stat)) => Ok(Some(Versioned {
            value,
            version: i64::from(stat.version),
        })),
        Err(Error::NoNode) => Ok(None),
        Err(e) => Err(map_error(e)),
    }
}

pub(super) async fn compare_and_set(
    s: &ZkSession,
    key: &str,
    expected: i64,
    new: &[u8],
) -> Result<CasOutcome, DriverError> {
    let path = znode_path(key);
    let version = i32::try_from(expected).map_err(|_| {
        DriverError::Unsupported(format!("znode version {expected} is out of range"))
    })?;
    s.counters.request();
    match s.zk()?.set_data(&path, new, Some(version)).await {
        Ok(_) => Ok(CasOutcome::Applied),
        Err(Error::BadVersion) => Ok(CasOutcome::Rejected { current: None }),
        Err(Error::NoNode) => Ok(CasOutcome::Rejected {
            current: Some(None),
        }),
        Err(e) => Err(map_error(e)),
    }
}
