//! One connection of a session: TCP (or TLS) to one server, the ConnectRequest /
//! ConnectResponse handshake, the digest `addauth` right after it, and frames read one at a
//! time.
//!
//! Memory is the reason this exists: a frame is read into a buffer of exactly its length,
//! handed on, and freed, so a session that once received a large reply (a getChildren of
//! 10,000 names, 400 KB) does not keep a buffer of that size for the rest of its life.
//! Between frames a connection holds only its small read buffer ([`READ_BUFFER`]).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use coordbench_tls::rustls::pki_types::ServerName;
use coordbench_tls::rustls::ClientConfig;
use coordbench_tls::tokio_rustls::TlsConnector;
use coordbench_zk_proto::jute::{Reader, Writer};
use coordbench_zk_proto::proto::{
    op, xid, AuthPacket, ConnectRequest, ConnectResponse, ReplyHeader, RequestHeader,
};
use coordbench_zk_proto::request::{self, Request};
use tokio::io::{
    AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, ReadHalf, WriteHalf,
};
use tokio::net::TcpStream;

use super::Error;

/// Bytes read from the socket at a time; frames larger than this get a buffer of their own.
const READ_BUFFER: usize = 4096;
/// The largest frame accepted: ZooKeeper's default `jute.maxbuffer` is 1 MiB per record,
/// and a getChildren of 100,000 sequential nodes is about 4 MB.
const MAX_FRAME: usize = 16 << 20;
/// Length of the session password ZooKeeper hands out.
pub(super) const PASSWORD_LEN: usize = 16;

/// A plain or TLS byte stream.
pub(super) trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

pub(super) type BoxStream = Box<dyn Stream>;

/// Reads whole frames (4-byte big-endian length, then the payload).
pub(super) struct FrameReader {
    io: BufReader<ReadHalf<BoxStream>>,
}

impl FrameReader {
    /// The next frame's payload; `None` when the server closed the connection between frames.
    pub(super) async fn next(&mut self) -> io::Result<Option<Vec<u8>>> {
        match self.next_len().await? {
            Some(len) => self.payload(len).await.map(Some),
            None => Ok(None),
        }
    }

    /// The next frame's length; `None` when the server closed the connection between frames.
    async fn next_len(&mut self) -> io::Result<Option<usize>> {
        let mut len = [0u8; 4];
        match self.io.read_exact(&mut len).await {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        let len = i32::from_be_bytes(len);
        usize::try_from(len)
            .ok()
            .filter(|&n| n <= MAX_FRAME)
            .map(Some)
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("frame length {len} out of range"),
                )
            })
    }

    /// The payload of a frame whose length [`FrameReader::next_len`] returned.
    async fn payload(&mut self, len: usize) -> io::Result<Vec<u8>> {
        let mut payload = vec![0; len];
        self.io.read_exact(&mut payload).await?;
        Ok(payload)
    }
}

/// What a connection negotiated.
pub(super) struct Negotiated {
    pub session_id: i64,
    pub password: Vec<u8>,
    pub timeout: Duration,
}

/// The session to resume (id and password) and the last zxid seen, or a new session.
pub(super) struct Resume {
    pub session: Option<(i64, Vec<u8>)>,
    pub last_zxid: i64,
}

/// What [`open`] needs from the session's options.
pub(super) struct Dial<'a> {
    pub endpoint: &'a str,
    pub tls: Option<&'a Arc<ClientConfig>>,
    pub timeout_ms: i32,
    pub digest: Option<&'a str>,
}

/// Connects to one server, establishes (or resumes) the session, and authenticates.
/// The caller bounds the time it takes.
pub(super) async fn open(
    dial: &Dial<'_>,
    resume: &Resume,
) -> Result<(FrameReader, WriteHalf<BoxStream>, Negotiated), Error> {
    let stream = connect(dial.endpoint, dial.tls)
        .await
        .map_err(|e| Error::Connect(format!("{}: {e}", dial.endpoint)))?;
    let (read, mut write) = tokio::io::split(stream);
    let mut reader = FrameReader {
        io: BufReader::with_capacity(READ_BUFFER, read),
    };
    let (session_id, password) = resume.session.clone().unwrap_or((0, vec![0; PASSWORD_LEN]));
    let mut w = Writer::frame();
    ConnectRequest {
        protocol_version: 0,
        last_zxid_seen: resume.last_zxid,
        timeout_ms: dial.timeout_ms,
        session_id,
        password,
        read_only: Some(false),
    }
    .encode(&mut w);
    send(&mut write, &w.into_frame()).await?;
    let frame = expect_frame(&mut reader, dial.endpoint).await?;
    let response = ConnectResponse::decode(&mut Reader::new(&frame))
        .map_err(|e| Error::Protocol(format!("connect response: {e}")))?;
    if response.timeout_ms <= 0 {
        // ZooKeeper's answer to a resumed session it no longer knows.
        return Err(Error::SessionExpired);
    }
    if let Some(digest) = dial.digest {
        authenticate(&mut reader, &mut write, dial.endpoint, digest).await?;
    }
    let negotiated = Negotiated {
        session_id: response.session_id,
        password: response.password,
        timeout: Duration::from_millis(response.timeout_ms as u64),
    };
    Ok((reader, write, negotiated))
}

/// Sends `addauth digest` and waits for its answer. Sent only after the connect response,
/// so no server (ZooKeeper's TLS listener among them) can answer it first.
async fn authenticate(
    reader: &mut FrameReader,
    write: &mut WriteHalf<BoxStream>,
    endpoint: &str,
    digest: &str,
) -> Result<(), Error> {
    let auth = Request::Auth(AuthPacket {
        kind: 0,
        scheme: "digest".into(),
        auth: digest.as_bytes().to_vec(),
    });
    send(write, &encode(xid::AUTH, op::AUTH, &auth)).await?;
    let frame = expect_frame(reader, endpoint).await?;
    let header = ReplyHeader::decode(&mut Reader::new(&frame))
        .map_err(|e| Error::Protocol(format!("auth reply: {e}")))?;
    match header.err {
        0 => Ok(()),
        _ => Err(Error::AuthFailed),
    }
}

/// A request frame: header (`xid`, `op`) and record.
pub(super) fn encode(xid: i32, op: i32, req: &Request) -> Vec<u8> {
    let mut w = Writer::frame();
    request::encode(RequestHeader { xid, op }, req, &mut w);
    w.into_frame()
}

pub(super) async fn send(write: &mut WriteHalf<BoxStream>, frame: &[u8]) -> Result<(), Error> {
    write
        .write_all(frame)
        .await
        .map_err(|e| Error::Connect(format!("sending: {e}")))
}

async fn expect_frame(reader: &mut FrameReader, endpoint: &str) -> Result<Vec<u8>, Error> {
    match reader.next().await {
        Ok(Some(frame)) => Ok(frame),
        Ok(None) => Err(Error::Connect(format!(
            "{endpoint} closed the connection during the handshake"
        ))),
        Err(e) => Err(Error::Connect(format!("{endpoint}: {e}"))),
    }
}

async fn connect(endpoint: &str, tls: Option<&Arc<ClientConfig>>) -> io::Result<BoxStream> {
    let tcp = TcpStream::connect(endpoint).await?;
    // Requests are small and latency is what is measured.
    tcp.set_nodelay(true)?;
    let Some(config) = tls else {
        return Ok(Box::new(tcp));
    };
    let host = endpoint.rsplit_once(':').map_or(endpoint, |(host, _)| host);
    let name = ServerName::try_from(host.to_string())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let stream = TlsConnector::from(config.clone())
        .connect(name, tcp)
        .await?;
    Ok(Box::new(stream))
}
