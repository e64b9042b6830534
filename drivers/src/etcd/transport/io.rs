//! The socket under an h2 connection, shaped so that concurrent calls share writes.
//!
//! h2 copies a frame into its 16 KiB write buffer unless the payload is at least 256 B and
//! the socket takes vectored writes; such a DATA frame is kept aside and forces a write
//! before the next frame, so every put of a 256 B value cost a `writev` of its own. Without
//! vectored writes h2's threshold is 1 KiB, so small requests are copied and written
//! together. And the connection task yields once before it writes: calls woken in the same
//! round (a read brings many responses) queue their next requests first, and one write
//! carries them all. On a VM a write syscall (which also runs loopback delivery) costs far
//! more than copying a few hundred bytes.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

pub(super) struct BatchingIo {
    tcp: TcpStream,
    /// Set once this flush round has yielded; cleared when h2 flushes.
    yielded: bool,
}

impl BatchingIo {
    pub(super) fn new(tcp: TcpStream) -> Self {
        BatchingIo {
            tcp,
            yielded: false,
        }
    }
}

impl AsyncRead for BatchingIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_read(cx, buf)
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
        Pin::new(&mut self.tcp).poll_write(cx, buf)
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
