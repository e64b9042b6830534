//! Port allocation for cluster members, on 127.0.0.1 only.
//!
//! With `--base-port` the ports are fixed and checked up front, so a clash is reported as a
//! clear [`ProvisionError::PortInUse`] instead of a member dying with "address already in
//! use" deep in its log. Without it the OS picks free ports.

use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};

use super::ProvisionError;

/// Returns `count` distinct ports: `base..base+count` if `base` is given (each verified
/// bindable on 127.0.0.1), else ports the OS reports free.
///
/// OS-picked ports are only free at the moment of the check; another process could take one
/// before the member binds it, in which case the member exits and the launcher reports it.
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
        None => {
            // Hold every listener until all are bound so the OS cannot hand out a port twice.
            let mut listeners = Vec::with_capacity(count);
            let mut ports = Vec::with_capacity(count);
            for _ in 0..count {
                let l =
                    TcpListener::bind(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 0)).map_err(|e| {
                        ProvisionError::io("binding 127.0.0.1:0 to find a free port", e)
                    })?;
                let port = l
                    .local_addr()
                    .map_err(|e| ProvisionError::io("reading a bound port", e))?
                    .port();
                ports.push(port);
                listeners.push(l);
            }
            Ok(ports)
        }
    }
}
