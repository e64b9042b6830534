//! The socket under an h2 connection, shaped so that concurrent calls share writes.
//!
//! h2 copies a frame into its 16 KiB write buffer unless the payload is at least 256 B and
//! the socket takes vectored writes; such a DATA frame is kept aside and forces a write
//! before the next frame, so every put of a 256 B value cost a `writev` of its own. Without
//! vectored writes h2's threshold is 1 KiB, so small requests are copied and written
//! together. And the connection task yields once before it writes: calls woken in the same
//! round (a read brings many responses) queue their next requests first, and one write
//! carries them all. On a VM a write syscall (which also runs loopback delivery) costs far
//! more than copying a few hundred bytes. Over TLS the same holds one layer down: rustls
//! turns the batched frames into as few records and writes as it can.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};

use coordbench_tls::tokio_rustls::client::TlsStream;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// The byte stream under a connection: plain TCP (`http://`) or TLS over it (`https://`).
pub(super) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

pub(super) struct BatchingIo {
    tcp: Stream,
    /// Set once this flush round has yielded; cleared when h2 flushes.
    yielded: bool,
    /// The first TLS failure read or written, described (h2 keeps only an I/O error's
    /// kind and text, not the TLS error under it).
    tls_failure: TlsFailure,
}

/// Where a connection's TLS failure is kept for its dialer.
pub(super) type TlsFailure = Arc<OnceLock<String>>;

impl BatchingIo {
    pub(super) fn new(tcp: Stream, tls_failure: TlsFailure) -> Self {
        BatchingIo {
            tcp,
            yielded: false,
            tls_failure,
        }
    }

    fn keep<T>(&self, result: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if let Poll::Ready(Err(e)) = &result {
            if let Some(why) = coordbench_tls::describe(e) {
                let _ = self.tls_failure.set(why);
            }
        }
        result
    }
}

impl AsyncRead for BatchingIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let read = Pin::new(&mut self.tcp).poll_read(cx, buf);
        self.keep(read)
    }
}

impl AsyncWrite for BatchingIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if !self.yielded {
            // tokio runs a task that woke itself after the tasks already queued.
            self.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let written = Pin::new(&mut self.tcp).poll_write(cx, buf);
        self.keep(written)
    }

    /// No vectored writes: h2 then copies frames under 1 KiB into its buffer.
    fn is_write_vectored(&self) -> bool {
        false
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.yielded = false;
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_read(cx, buf),
            Stream::Tls(tls) => Pin::new(tls.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_write(cx, buf),
            Stream::Tls(tls) => Pin::new(tls.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_flush(cx),
            Stream::Tls(tls) => Pin::new(tls.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(tcp) => Pin::new(tcp).poll_shutdown(cx),
            Stream::Tls(tls) => Pin::new(tls.as_mut()).poll_shutdown(cx),
        }
    }
}
