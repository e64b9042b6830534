//! A raw ZooKeeper client made of this crate's codec, for tests and tools: it sends any
//! [`Request`] exactly as encoded (null data, null ACL ids, op codes client libraries do
//! not offer) and returns replies undecoded or decoded, so the same bytes can be sent to
//! ZooKeeper and to zab and the answers compared. No retries, no reconnects, no pings: a
//! session lives as long as its caller keeps it busy within the session timeout.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

use crate::jute::{DecodeError, Reader, Writer};
use crate::proto::{
    op, xid, ConnectRequest, ConnectResponse, ReplyHeader, RequestHeader, WatcherEvent,
};
use crate::reply::ReplyBody;
use crate::request::{self, Request};

/// Largest frame the client reads (ZooKeeper's default `jute.maxbuffer`, 1 MiB, and room).
const MAX_FRAME: usize = 4 << 20;
/// Notifications skipped while waiting for one reply.
const MAX_SKIPPED_EVENTS: usize = 1024;

/// Why a call did not get a reply.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        source: std::io::Error,
    },
    #[error("no answer to {what} within {bound:?}")]
    Timeout { what: &'static str, bound: Duration },
    #[error("server closed the connection while awaiting {0}")]
    Closed(&'static str),
    #[error("frame of {0} bytes is out of range")]
    BadFrame(i64),
    #[error("undecodable {what}: {source}")]
    Decode {
        what: &'static str,
        source: DecodeError,
    },
    #[error("reply to xid {got}, awaiting {want}")]
    WrongXid { got: i32, want: i32 },
    #[error("more than {MAX_SKIPPED_EVENTS} notifications before a reply")]
    TooManyEvents,
}

/// A frame from the server after the handshake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// A reply: its header and the undecoded body.
    Reply(ReplyHeader, Vec<u8>),
    /// A watch notification (xid -1) and the zxid its header carries.
    Event(i64, WatcherEvent),
}

/// One connection, with or without a session.
pub struct RawClient {
    stream: TcpStream,
    next_xid: i32,
    io_timeout: Duration,
    /// Notifications that arrived while a call awaited its reply, oldest first.
    events: Vec<(i64, WatcherEvent)>,
}

impl RawClient {
    /// Connects to `addr` (no handshake yet); every read waits at most `io_timeout`.
    pub async fn open(addr: &str, io_timeout: Duration) -> Result<RawClient, ClientError> {
        let stream = timed(io_timeout, "connect", TcpStream::connect(addr)).await?;
        Ok(RawClient {
            stream,
            next_xid: 0,
            io_timeout,
            events: Vec::new(),
        })
    }

    /// Connects and opens a new session of `timeout_ms`.
    pub async fn session(
        addr: &str,
        timeout_ms: i32,
        io_timeout: Duration,
    ) -> Result<(RawClient, ConnectResponse), ClientError> {
        let mut c = RawClient::open(addr, io_timeout).await?;
        let req = ConnectRequest {
            protocol_version: 0,
            last_zxid_seen: 0,
            timeout_ms,
            session_id: 0,
            password: vec![0; 16],
            read_only: Some(false),
        };
        let resp = c.handshake(&req).await?;
        Ok((c, resp))
    }

    /// Sends a ConnectRequest and reads the response.
    pub async fn handshake(
        &mut self,
        req: &ConnectRequest,
    ) -> Result<ConnectResponse, ClientError> {
        let mut w = Writer::new();
        req.encode(&mut w);
        self.send_frame(&w.buf).await?;
        let payload = self.read_payload("the connect response").await?;
        ConnectResponse::decode(&mut Reader::new(&payload)).map_err(|source| ClientError::Decode {
            what: "connect response",
            source,
        })
    }

    /// Writes one length-prefixed frame.
    pub async fn send_frame(&mut self, payload: &[u8]) -> Result<(), ClientError> {
        let len = i32::try_from(payload.len()).map_err(|_| ClientError::BadFrame(i64::MAX))?;
        let mut bytes = len.to_be_bytes().to_vec();
        bytes.extend_from_slice(payload);
        let write = self.stream.write_all(&bytes);
        timed(self.io_timeout, "write", write).await
    }

    /// Writes `bytes` as they are (malformed frames, for tests).
    pub async fn write_raw(&mut self, bytes: &[u8]) -> Result<(), ClientError> {
        let write = self.stream.write_all(bytes);
        timed(self.io_timeout, "write", write).await
    }

    /// Whether the server closes the connection within the I/O timeout (what it sends
    /// first is read and dropped).
    pub async fn closed(&mut self) -> bool {
        let mut buf = [0u8; 256];
        let drain = async {
            loop {
                match self.stream.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(_) => continue,
                }
            }
        };
        timeout(self.io_timeout, drain).await.is_ok()
    }

    /// Sends `req` under op code `code` and returns the xid used (ZooKeeper's fixed xids
    /// for ping, addauth and setWatches, else the next one).
    pub async fn send(&mut self, code: i32, req: &Request) -> Result<i32, ClientError> {
        let x = match code {
            op::PING => xid::PING,
            op::AUTH => xid::AUTH,
            op::SET_WATCHES | op::SET_WATCHES2 => xid::SET_WATCHES,
            _ => {
                self.next_xid += 1;
                self.next_xid
            }
        };
        let mut w = Writer::new();
        request::encode(RequestHeader { xid: x, op: code }, req, &mut w);
        self.send_frame(&w.buf).await?;
        Ok(x)
    }

    /// The next frame.
    pub async fn frame(&mut self) -> Result<Frame, ClientError> {
        let payload = self.read_payload("a frame").await?;
        let mut r = Reader::new(&payload);
        let h = ReplyHeader::decode(&mut r).map_err(|source| ClientError::Decode {
            what: "reply header",
            source,
        })?;
        if h.xid == xid::NOTIFICATION {
            let event = WatcherEvent::decode(&mut r).map_err(|source| ClientError::Decode {
                what: "notification",
                source,
            })?;
            return Ok(Frame::Event(h.zxid, event));
        }
        Ok(Frame::Reply(h, payload[16..].to_vec()))
    }

    /// The notifications that arrived during calls since the last take (a notification
    /// precedes every reply sent after the change it reports).
    pub fn take_events(&mut self) -> Vec<(i64, WatcherEvent)> {
        std::mem::take(&mut self.events)
    }

    /// Sends a request and returns its reply's header and undecoded body; notifications
    /// that arrive first are kept for [`RawClient::take_events`].
    pub async fn call_raw(
        &mut self,
        code: i32,
        req: &Request,
    ) -> Result<(ReplyHeader, Vec<u8>), ClientError> {
        let want = self.send(code, req).await?;
        for _ in 0..MAX_SKIPPED_EVENTS {
            match self.frame().await? {
                Frame::Event(zxid, e) => self.events.push((zxid, e)),
                Frame::Reply(h, _) if h.xid != want => {
                    return Err(ClientError::WrongXid { got: h.xid, want })
                }
                Frame::Reply(h, body) => return Ok((h, body)),
            }
        }
        Err(ClientError::TooManyEvents)
    }

    /// [`RawClient::call_raw`] with the body decoded for `code` (empty on an error).
    pub async fn call(
        &mut self,
        code: i32,
        req: &Request,
    ) -> Result<(ReplyHeader, ReplyBody), ClientError> {
        let (h, body) = self.call_raw(code, req).await?;
        if h.err != 0 {
            return Ok((h, ReplyBody::Empty));
        }
        let body = ReplyBody::decode(code, &mut Reader::new(&body)).map_err(|source| {
            ClientError::Decode {
                what: "reply body",
                source,
            }
        })?;
        Ok((h, body))
    }

    async fn read_payload(&mut self, what: &'static str) -> Result<Vec<u8>, ClientError> {
        let bound = self.io_timeout;
        let mut len = [0u8; 4];
        match timeout(bound, self.stream.read_exact(&mut len)).await {
            Err(_) => return Err(ClientError::Timeout { what, bound }),
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(ClientError::Closed(what))
            }
            Ok(Err(source)) => return Err(ClientError::Io { what, source }),
            Ok(Ok(_)) => {}
        }
        let n = i32::from_be_bytes(len);
        let n = usize::try_from(n)
            .ok()
            .filter(|n| *n <= MAX_FRAME)
            .ok_or(ClientError::BadFrame(i64::from(n)))?;
        let mut payload = vec![0; n];
        match timeout(bound, self.stream.read_exact(&mut payload)).await {
            Err(_) => Err(ClientError::Timeout { what, bound }),
            Ok(Err(_)) => Err(ClientError::Closed(what)),
            Ok(Ok(_)) => Ok(payload),
        }
    }
}

/// `fut` within `bound`, its I/O error named by `what`.
async fn timed<T>(
    bound: Duration,
    what: &'static str,
    fut: impl std::future::Future<Output = std::io::Result<T>>,
) -> Result<T, ClientError> {
    match timeout(bound, fut).await {
        Err(_) => Err(ClientError::Timeout { what, bound }),
        Ok(r) => r.map_err(|source| ClientError::Io { what, source }),
    }
}
