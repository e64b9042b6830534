//! Port allocation for cluster members, on 127.0.0.1 only.
//!
//! With `--base-port` the ports are fixed and checked up front, so a clash is reported as a
//! clear [`ProvisionError::PortInUse`] instead of a member dying with "address already in
//! use" deep in its log. Without it, free ports are picked below the kernel's ephemeral range.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use super::ProvisionError;

/// Returns `count` distinct ports: `base..base+count` if `base` is given (each verified
/// bindable on 127.0.0.1), else ports the OS reports free.
///
/// Picked ports are only free at the moment of the check. They come from [`FREE_RANGE`],
/// below the kernel's ephemeral range (32768–60999 by default), so the outgoing connections
/// of a busy run cannot take one before the member binds it; a process-wide cursor keeps
/// clusters started concurrently in one process (parallel tests) from picking the same ones.
pub fn allocate(base: Option<u16>, count: usize) -> Result<Vec<u16>, ProvisionError> {
    match base {
        Some(base) => {
            let end = base as usize + count;
            if base == 0 || end > u16::MAX as usize + 1 {
                return Err(ProvisionError::Unsupported(format!(
                    "--base-port {base} leaves no room for {count} ports; choose a port between 1024 and {}",
                    u16::MAX as usize + 1 - count
                )));
            }
            let ports: Vec<u16> = (base..).take(count).collect();
            for &port in &ports {
                if TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).is_err() {
                    return Err(ProvisionError::PortInUse { port });
                }
            }
            Ok(ports)
        }
        None => pick_free(count),
    }
}

/// `port` on 127.0.0.1, where every member listens.
pub fn local(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// Where ports are picked when no base is given.
pub const FREE_RANGE: std::ops::Range<u16> = 20_000..32_000;

/// Next offset into [`FREE_RANGE`], shared by every allocation of this process.
static CURSOR: AtomicUsize = AtomicUsize::new(usize::MAX);

fn pick_free(count: usize) -> Result<Vec<u16>, ProvisionError> {
    let span = FREE_RANGE.len();
    // Start each process at a different place so concurrent processes rarely probe alike.
    let seed = std::process::id() as usize
        ^ SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos() as usize);
    let _ = CURSOR.compare_exchange(
        usize::MAX,
        seed % span,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    let mut ports = Vec::with_capacity(count);
    for _ in 0..span {
        if ports.len() == count {
            break;
        }
        let port = FREE_RANGE.start + (CURSOR.fetch_add(1, Ordering::Relaxed) % span) as u16;
        if TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port)).is_ok() {
            ports.push(port);
        }
    }
    if ports.len() < count {
        return Err(ProvisionError::Unsupported(format!(
            "found only {} free ports between {} and {}; free some or pass --base-port",
            ports.len(),
            FREE_RANGE.start,
            FREE_RANGE.end
        )));
    }
    Ok(ports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn free_ports_are_distinct_below_the_ephemeral_range_and_not_reused_in_process() {
        let a = allocate(None, 6).unwrap();
        let b = allocate(None, 6).unwrap();
        let mut all: Vec<u16> = a.iter().chain(&b).copied().collect();
        assert!(all.iter().all(|p| FREE_RANGE.contains(p)), "{all:?}");
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), 12, "a port was handed out twice: {a:?} {b:?}");
    }

    #[test]
    fn a_taken_base_port_is_reported_in_one_line() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let err = allocate(Some(port), 2).unwrap_err();
        assert!(matches!(err, ProvisionError::PortInUse { port: p } if p == port));
        assert!(!err.to_string().contains('\n'));
    }
}
