//! A userspace TCP proxy that delays traffic between cluster members (and optionally
//! between clients and members), since `tc netem` is not available where coordbench runs.
//!
//! Each [`Route`] is one listener on 127.0.0.1 forwarding to one upstream address; every
//! byte that crosses it, in either direction, is held for the one-way delay (plus jitter)
//! before it is written on, in order ([`pipe`]). Launchers point members at route
//! listeners instead of each other (etcd's peer URLs, ZooKeeper's server.N lines, the
//! engines' `--peers`). Every route has a switch, so a link can be cut (partitioned) and
//! restored while the cluster runs.
//!
//! The proxy runs on the tokio runtime of the coordbench process for the life of the
//! cluster; [`Proxy::stop`] (also on drop) closes every listener and connection.

mod pipe;

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// One-way delay and jitter added per direction: `5ms` or `5ms,1ms` (each byte is held
/// for the delay plus a uniform draw from ±jitter, never less than zero, never overtaking
/// earlier bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct NetDelay {
    #[serde(serialize_with = "as_micros")]
    pub delay: Duration,
    #[serde(serialize_with = "as_micros")]
    pub jitter: Duration,
}

fn as_micros<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(d.as_micros() as u64)
}

impl FromStr for NetDelay {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parse = |part: &str| {
            humantime::parse_duration(part.trim())
                .map_err(|e| format!("'{part}': {e} (write e.g. 5ms or 5ms,1ms)"))
        };
        let (delay, jitter) = match s.split_once(',') {
            Some((d, j)) => (parse(d)?, parse(j)?),
            None => (parse(s)?, Duration::ZERO),
        };
        if jitter > delay {
            return Err(format!(
                "jitter {jitter:?} exceeds the delay {delay:?}; a byte cannot arrive before it was sent"
            ));
        }
        if delay > Duration::from_secs(10) {
            return Err("a network delay above 10s would stall every protocol; use less".into());
        }
        Ok(NetDelay { delay, jitter })
    }
}

impl fmt::Display for NetDelay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}us", self.delay.as_micros())?;
        if !self.jitter.is_zero() {
            write!(f, ",{}us", self.jitter.as_micros())?;
        }
        Ok(())
    }
}

/// One listener and where it forwards to.
#[derive(Debug)]
pub struct Route {
    /// E.g. `m1->m2` or `client->m1`.
    pub name: String,
    pub listen: SocketAddr,
    pub upstream: SocketAddr,
    up: Arc<AtomicBool>,
}

/// Every route of one cluster and the tasks serving them.
#[derive(Debug)]
pub struct Proxy {
    delay: NetDelay,
    routes: Vec<Route>,
    cancel: CancellationToken,
    listeners: Vec<JoinHandle<()>>,
}

impl Proxy {
    pub fn new(delay: NetDelay) -> Proxy {
        Proxy {
            delay,
            routes: Vec::new(),
            cancel: CancellationToken::new(),
            listeners: Vec::new(),
        }
    }

    pub fn delay(&self) -> NetDelay {
        self.delay
    }

    /// Opens a listener on 127.0.0.1 (a free port) that forwards to `upstream` with the
    /// delay; returns its address. Must be called inside a tokio runtime.
    pub async fn add_route(
        &mut self,
        name: impl Into<String>,
        upstream: SocketAddr,
    ) -> std::io::Result<SocketAddr> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let listen = listener.local_addr()?;
        let up = Arc::new(AtomicBool::new(true));
        let task = tokio::spawn(serve(
            listener,
            upstream,
            self.delay,
            up.clone(),
            self.cancel.clone(),
        ));
        self.listeners.push(task);
        self.routes.push(Route {
            name: name.into(),
            listen,
            upstream,
            up,
        });
        Ok(listen)
    }

    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    /// Cuts (`false`) or restores (`true`) the route named `name`: while cut, new
    /// connections are refused and open ones are closed at their next byte. False if there is
    /// no such route.
    pub fn set_route_up(&self, name: &str, up: bool) -> bool {
        match self.routes.iter().find(|r| r.name == name) {
            Some(r) => {
                r.up.store(up, Ordering::SeqCst);
                true
            }
            None => false,
        }
    }

    /// Closes every listener and connection. Idempotent; needs no runtime.
    pub fn stop(&mut self) {
        self.cancel.cancel();
        for task in self.listeners.drain(..) {
            task.abort();
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Accepts on one route until cancelled; each connection is forwarded by its own task.
async fn serve(
    listener: TcpListener,
    upstream: SocketAddr,
    delay: NetDelay,
    up: Arc<AtomicBool>,
    cancel: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = cancel.cancelled() => return,
        };
        let Ok((inbound, _)) = accepted else {
            // Out of descriptors or similar: back off instead of spinning.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        if !up.load(Ordering::SeqCst) {
            continue; // dropped: the link is cut
        }
        let (up, cancel) = (up.clone(), cancel.clone());
        tokio::spawn(async move {
            let Ok(outbound) = TcpStream::connect(upstream).await else {
                return; // the member is down: the client sees the connection close
            };
            let _ = inbound.set_nodelay(true);
            let _ = outbound.set_nodelay(true);
            tokio::select! {
                _ = pipe::forward(inbound, outbound, delay, &up) => {}
                _ = cancel.cancelled() => {}
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_delay_parses_delay_and_optional_jitter() {
        let d: NetDelay = "5ms".parse().unwrap();
        assert_eq!(
            (d.delay, d.jitter),
            (Duration::from_millis(5), Duration::ZERO)
        );
        let d: NetDelay = "5ms,1ms".parse().unwrap();
        assert_eq!(d.jitter, Duration::from_millis(1));
        for bad in ["", "5", "1ms,2ms", "fast", "1h"] {
            let err = bad.parse::<NetDelay>().unwrap_err();
            assert!(!err.contains('\n'), "{bad}: {err}");
        }
    }
}
