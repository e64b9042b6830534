//! The etcd driver's HTTP/2 transport under etcd-client's tonic-generated clients
//! (`Client::from_channel`): one h2 connection per endpoint, calls spread over the live
//! ones, broken ones redialled.
//!
//! Why not tonic's `Channel`: it queues every call to a buffer worker task, then hyper's
//! connection task, then a task per call, so a put crossed four tasks (and, on a
//! multi-thread runtime, threads) each way. Here the calling task opens the h2 stream
//! itself and is woken straight by the connection task when its response arrives; only a
//! streaming request body (watch, lease keep-alive) gets a task of its own. It serves
//! etcd and the Raft engine alike: it is plain HTTP/2 under the same gRPC clients, over
//! TCP (`http://` endpoints) or TLS (`https://`, with [`Dialing::tls`]).
//!
//! Balancing: each call goes to the live endpoint with the fewest calls awaiting their
//! response headers, ties taken in turn, so a paused member that stops answering soon
//! gets no new calls while the others share the load evenly.

mod body;
mod endpoint;
mod io;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use h2::client::SendRequest;
use http::Uri;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tonic::Status;
use tower::util::BoxCloneSyncService;

use body::{status, Pump, ResponseBody};
pub use endpoint::Dialing;
use endpoint::{dial, supervise, Endpoint};

/// Why a transport could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    #[error("bad endpoint {endpoint}: {detail}")]
    BadEndpoint { endpoint: String, detail: String },
    #[error("{detail}")]
    Unreachable { detail: String },
}

type Request = http::Request<tonic::body::Body>;
type Response = http::Response<tonic::body::Body>;

/// A `tower::Service` over HTTP/2 connections to every endpoint; clones share them.
#[derive(Clone)]
pub struct Transport {
    inner: Arc<Inner>,
}

struct Inner {
    endpoints: Vec<Arc<Endpoint>>,
    /// Where the next pick starts, so ties rotate.
    next: AtomicUsize,
    /// Told whenever some endpoint (re)connects.
    connected: Arc<Notify>,
    /// How long a call waits for some endpoint to come up when none is.
    wait: Duration,
    supervisors: Vec<JoinHandle<()>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        for task in &self.supervisors {
            task.abort();
        }
    }
}

impl Transport {
    /// Dials every endpoint at once; succeeds if at least one answers within the connect
    /// timeout. The others are redialled in the background until they come up.
    pub async fn connect(endpoints: &[String], dialing: Dialing) -> Result<Self, TransportError> {
        let parsed = endpoints
            .iter()
            .map(|e| authority(e, dialing.tls.is_some()))
            .collect::<Result<Vec<_>, _>>()?;
        let dials = parsed.iter().map(|a| dial(a.as_str(), &dialing));
        let mut results = futures::future::join_all(dials).await;
        let failures = results.iter().filter(|r| r.is_err()).count();
        if failures == parsed.len() {
            return Err(TransportError::Unreachable {
                detail: summarize(&results, &parsed),
            });
        }
        let connected = Arc::new(Notify::new());
        let endpoints: Vec<Arc<Endpoint>> = parsed
            .into_iter()
            .map(|a| Arc::new(Endpoint::new(a, dialing.tls.is_some())))
            .collect();
        let supervisors = endpoints
            .iter()
            .zip(results.drain(..))
            .map(|(e, first)| {
                // Published before returning, so a fresh transport shows every endpoint
                // that answered as up.
                if let Ok(d) = &first {
                    e.set(Some(d.sender.clone()));
                }
                let task = supervise(e.clone(), first.ok(), dialing.clone(), connected.clone());
                tokio::spawn(task)
            })
            .collect();
        Ok(Transport {
            inner: Arc::new(Inner {
                endpoints,
                next: AtomicUsize::new(0),
                connected,
                wait: dialing.connect_timeout,
                supervisors,
            }),
        })
    }
}

/// One endpoint as the transport sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointView {
    /// `host:port`.
    pub address: String,
    /// Whether it has a live, answering connection now.
    pub up: bool,
    /// Calls sent to it so far.
    pub calls: u64,
}

impl Transport {
    /// etcd-client's clients over this transport.
    pub async fn etcd_client(&self) -> Result<etcd_client::Client, etcd_client::Error> {
        self.etcd_client_with(None).await
    }

    /// etcd-client's clients over this transport with `options`: with a user, etcd-client
    /// authenticates now and adds the token to every call (its interceptor), and with
    /// `with_auto_token_refresh` it re-authenticates once when a call's token was refused.
    pub async fn etcd_client_with(
        &self,
        options: Option<etcd_client::ConnectOptions>,
    ) -> Result<etcd_client::Client, etcd_client::Error> {
        let channel = etcd_client::Channel::Custom(BoxCloneSyncService::new(self.clone()));
        etcd_client::Client::from_channel(channel, options).await
    }

    /// Every endpoint's state, in the order given to [`Transport::connect`].
    pub fn endpoints(&self) -> Vec<EndpointView> {
        self.inner
            .endpoints
            .iter()
            .map(|e| EndpointView {
                address: e.address().to_string(),
                up: e.is_up(),
                calls: e.calls(),
            })
            .collect()
    }
}

impl Inner {
    /// The live endpoint with the fewest calls in flight, starting the scan in turn.
    fn pick(&self) -> Option<(usize, SendRequest<Bytes>)> {
        let n = self.endpoints.len();
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let best = (0..n)
            .map(|i| (start + i) % n)
            .filter(|&i| self.endpoints[i].is_up())
            .min_by_key(|&i| self.endpoints[i].load())?;
        Some((best, self.endpoints[best].sender()?))
    }

    /// [`Inner::pick`], waiting up to the connect timeout when no endpoint is up (every
    /// member restarting), as tonic's balancer waited for a ready endpoint.
    async fn pick_or_wait(&self) -> Result<(usize, SendRequest<Bytes>), Status> {
        let deadline = tokio::time::Instant::now() + self.wait;
        loop {
            let notified = self.connected.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(picked) = self.pick() {
                return Ok(picked);
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                let addresses: Vec<&str> = self.endpoints.iter().map(|e| e.address()).collect();
                return Err(Status::unavailable(format!(
                    "no connection to any of {}",
                    addresses.join(",")
                )));
            }
        }
    }

    /// One gRPC call: open the stream on the picked connection, send the request body
    /// (in place when it is complete, as a unary call's is), await the response headers.
    async fn call(self: Arc<Self>, request: Request) -> Result<Response, tower::BoxError> {
        let (index, sender) = self.pick_or_wait().await?;
        let endpoint = &self.endpoints[index];
        let _counted = endpoint.start_call();
        let (mut head, body) = request.into_parts();
        head.uri = endpoint.uri(head.uri.into_parts().path_and_query)?;
        let mut sender = sender.ready().await.map_err(status)?;
        let end_of_stream = http_body::Body::is_end_stream(&body);
        let (response, stream) = sender
            .send_request(http::Request::from_parts(head, ()), end_of_stream)
            .map_err(status)?;
        if !end_of_stream {
            let mut pump = Pump::new(body, stream);
            if futures::poll!(&mut pump).is_pending() {
                tokio::spawn(pump);
            }
        }
        let response = response.await.map_err(status)?;
        Ok(response.map(|recv| tonic::body::Body::new(ResponseBody::new(recv))))
    }
}

impl tower::Service<Request> for Transport {
    type Response = Response;
    type Error = tower::BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<Response, tower::BoxError>> + Send>>;

    /// Always ready: a call that finds no live endpoint waits inside its future.
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request) -> Self::Future {
        Box::pin(self.inner.clone().call(request))
    }
}

/// `http://host:port` (or `host:port`) without TLS, `https://host:port` with it →
/// `host:port`.
fn authority(endpoint: &str, tls: bool) -> Result<http::uri::Authority, TransportError> {
    let bad = |detail: &str| TransportError::BadEndpoint {
        endpoint: endpoint.to_string(),
        detail: detail.to_string(),
    };
    let uri: Uri = super::normalize(endpoint, tls)
        .parse()
        .map_err(|e: http::uri::InvalidUri| bad(&e.to_string()))?;
    match (uri.scheme_str(), tls) {
        (Some("http"), false) | (Some("https"), true) => {}
        (Some("https"), false) => return Err(bad("an https:// endpoint needs TLS settings")),
        (Some("http"), true) => {
            return Err(bad(
                "TLS is configured but the endpoint is http://; use https://",
            ))
        }
        _ => return Err(bad("only http:// and https:// endpoints are supported")),
    }
    uri.authority().cloned().ok_or_else(|| bad("no host:port"))
}

/// Every endpoint's dial failure in one line; one reason shared by all is said once.
fn summarize(
    results: &[Result<endpoint::Dialled, String>],
    endpoints: &[http::uri::Authority],
) -> String {
    let errors: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    if errors.len() > 1 && errors.iter().all(|e| *e == errors[0]) {
        let names: Vec<&str> = endpoints.iter().map(|a| a.as_str()).collect();
        return format!("{} (every endpoint: {})", errors[0], names.join(", "));
    }
    results
        .iter()
        .zip(endpoints)
        .filter_map(|(r, a)| r.as_ref().err().map(|e| format!("{a}: {e}")))
        .collect::<Vec<_>>()
        .join("; ")
}
