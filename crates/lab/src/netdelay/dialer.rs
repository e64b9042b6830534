//! Which member process dialed a connection, for routes shared by every dialer (etcd's:
//! one route per destination, since etcd's peer URLs are cluster-wide).
//!
//! The proxy knows the dialer's end of an accepted connection (its address is the
//! connection's peer address) and the member processes' pids. The kernel's socket tables
//! (/proc/net/tcp and tcp6) give the inode of the socket with that local address connected
//! to the route's listener, and exactly one process holds a descriptor on that inode
//! (/proc/PID/fd links read `socket:[INODE]`). This works for every connection whatever it
//! carries, where reading etcd's `X-Server-From` request header would not: etcd 3.4 also
//! dials peers for probes (`/raft/probing`), version checks (`/version`) and forwarded
//! lease renewals (`/leases`), none of which carry the header.

use std::fs;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How long a socket no member holds is looked for again (pids are recorded just after
/// the spawn, a member may dial sooner).
pub const PID_WAIT: Duration = Duration::from_millis(200);
const RETRY: Duration = Duration::from_millis(20);

/// The pids of the members, by member index; updated when a member restarts.
#[derive(Debug, Clone, Default)]
pub struct MemberPids {
    pids: Arc<Mutex<Vec<Option<u32>>>>,
}

impl MemberPids {
    pub fn set(&self, member: usize, pid: u32) {
        let mut pids = self.pids.lock().unwrap_or_else(PoisonError::into_inner);
        if pids.len() <= member {
            pids.resize(member + 1, None);
        }
        pids[member] = Some(pid);
    }

    fn snapshot(&self) -> Vec<Option<u32>> {
        self.pids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Who holds the socket connected from `dialer` to `listener` (both ends as this host
    /// sees them). Blocks. Both look-ups are tried again a few times over [`PID_WAIT`]: a
    /// member may dial before its launcher has recorded its pid, and the kernel's socket
    /// table is read in pages, so a socket can be missed while other sockets come and go.
    pub fn dialer_of(&self, dialer: SocketAddr, listener: SocketAddr) -> Dialer {
        let tries = (PID_WAIT.as_millis() / RETRY.as_millis()) as usize;
        let mut found = false;
        for attempt in 0..=tries {
            if let Some(inode) = socket_inode(dialer, listener).ok().flatten() {
                found = true;
                let holder = self
                    .snapshot()
                    .iter()
                    .position(|pid| pid.is_some_and(|pid| holds_socket(pid, inode)));
                if let Some(member) = holder {
                    return Dialer::Member(member);
                }
            }
            if attempt < tries {
                std::thread::sleep(RETRY);
            }
        }
        // A socket no member held may have been closing (its process dying, say): only
        // one that is still there belongs to a stranger.
        let still_there = found && socket_inode(dialer, listener).ok().flatten().is_some();
        if still_there {
            Dialer::Stranger
        } else {
            Dialer::Gone
        }
    }
}

/// Who dialed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialer {
    /// The member with this index.
    Member(usize),
    /// No socket holds the dialer's end any more: it was closed (or its process died).
    Gone,
    /// A process that is no member (a client, a tool) holds it.
    Stranger,
}

/// The inode of the TCP socket whose local end is `local` and remote end `remote`.
pub fn socket_inode(local: SocketAddr, remote: SocketAddr) -> io::Result<Option<u64>> {
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let text = match fs::read_to_string(table) {
            Ok(t) => t,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        if let Some(inode) = find_inode(&text, local, remote) {
            return Ok(Some(inode));
        }
    }
    Ok(None)
}

/// Looks `local` -> `remote` up in one table's text (lines of `sl local rem st ... inode`).
fn find_inode(table: &str, local: SocketAddr, remote: SocketAddr) -> Option<u64> {
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (l, r, inode) = (fields.get(1)?, fields.get(2)?, fields.get(9)?);
        let matches = parse_addr(l)? == local && parse_addr(r)? == remote;
        let inode: u64 = inode.parse().ok()?;
        (matches && inode != 0).then_some(inode)
    })
}

/// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6): the address words are the
/// kernel's in-memory bytes printed as native-endian u32s. A v4-mapped IPv6 address comes
/// back as IPv4, as the proxy sees such peers.
fn parse_addr(field: &str) -> Option<SocketAddr> {
    let (addr, port) = field.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| {
        let hex = addr.get(8 * i..8 * i + 8)?;
        u32::from_str_radix(hex, 16).ok().map(u32::to_ne_bytes)
    };
    let ip = match addr.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut bytes = [0u8; 16];
            for i in 0..4 {
                bytes[4 * i..4 * i + 4].copy_from_slice(&word(i)?);
            }
            let v6 = Ipv6Addr::from(bytes);
            v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4)
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// Whether process `pid` has a descriptor on socket `inode`.
fn holds_socket(pid: u32, inode: u64) -> bool {
    let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    let wanted = format!("socket:[{inode}]");
    fds.flatten().any(|fd| {
        fs::read_link(fd.path()).is_ok_and(|target| target.as_os_str() == wanted.as_str())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn kernel_table_addresses_parse_in_both_families() {
        let v4: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(parse_addr(&hex_v4(v4)), Some(v4));
        let mapped = format!("0000000000000000FFFF0000{}", &hex_v4(v4)[..8]);
        assert_eq!(parse_addr(&format!("{mapped}:1F90")), Some(v4));
        assert_eq!(parse_addr("nonsense"), None);
        let table = format!(
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n   0: {} {} 01 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0\n",
            hex_v4(v4),
            hex_v4("127.0.0.1:2380".parse().unwrap())
        );
        let remote = "127.0.0.1:2380".parse().unwrap();
        assert_eq!(find_inode(&table, v4, remote), Some(4242));
        assert_eq!(find_inode(&table, remote, v4), None);
    }

    fn hex_v4(a: SocketAddr) -> String {
        let SocketAddr::V4(a) = a else { panic!() };
        format!(
            "{:08X}:{:04X}",
            u32::from_ne_bytes(a.ip().octets()),
            a.port()
        )
    }

    #[test]
    fn the_dialer_of_a_real_connection_is_the_process_holding_its_socket() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let dialed = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_accepted, peer) = listener.accept().unwrap();
        assert_eq!(peer, dialed.local_addr().unwrap());
        let pids = MemberPids::default();
        // Member 0 is some other process (pid 1, whose descriptors we may not even read);
        // member 1 is this test process, which dialed.
        pids.set(0, 1);
        let listen = listener.local_addr().unwrap();
        assert_eq!(pids.dialer_of(peer, listen), Dialer::Stranger);
        pids.set(1, std::process::id());
        assert_eq!(pids.dialer_of(peer, listen), Dialer::Member(1));
        // The same dialer address towards another listener is no connection at all.
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        assert_eq!(
            pids.dialer_of(peer, other.local_addr().unwrap()),
            Dialer::Gone
        );
        // Once the dialer closed its end, no process holds it.
        drop(dialed);
        assert_eq!(pids.dialer_of(peer, listen), Dialer::Gone);
    }
}
