//! The bodies of one gRPC call on an h2 stream: the request body pumped into the stream's
//! send half, the response's receive half as the `http_body::Body` tonic decodes, and h2's
//! errors as gRPC statuses.

use std::future::Future;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use bytes::Bytes;
use h2::{RecvStream, SendStream};
use http_body::{Body, Frame};
use tonic::Status;

/// Moves a request body into its h2 stream: data frames as they come, the last one
/// carrying the end of the stream (a unary call is HEADERS + one DATA frame). A unary
/// call's body is complete at the first poll, so the caller polls once in place and spawns
/// the pump only for streaming bodies (watch, lease keep-alive).
pub(super) struct Pump {
    body: tonic::body::Body,
    stream: SendStream<Bytes>,
    /// A data frame held back until the next poll of the body tells whether it is the last.
    held: Option<Bytes>,
}

impl Pump {
    pub(super) fn new(body: tonic::body::Body, stream: SendStream<Bytes>) -> Self {
        Pump {
            body,
            stream,
            held: None,
        }
    }

    /// Sends the held frame, if any. Sent without waiting for window: h2 buffers beyond
    /// it, and request messages here are small (keys, values, watch and lease requests).
    fn send_held(&mut self, end_of_stream: bool) -> Result<(), h2::Error> {
        match self.held.take() {
            Some(data) => self.stream.send_data(data, end_of_stream),
            None if end_of_stream => self.stream.send_data(Bytes::new(), true),
            None => Ok(()),
        }
    }
}

/// A small message copied out of tonic's encode buffer: the frame shares that buffer (8 KiB
/// whatever the message's size), and h2 may hold a frame queued for a while. At 10,000
/// sessions opening at once the lease grants queued this way held 64 MB; copied, the buffer
/// goes with the call's body.
fn own_allocation(data: Bytes) -> Bytes {
    const SMALL: usize = 4096;
    if data.len() <= SMALL {
        Bytes::copy_from_slice(&data)
    } else {
        data
    }
}

impl Future for Pump {
    /// Nothing to report: a failed send shows as the call's failed response.
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = &mut *self;
        // The server reset the stream, or the connection went: stop reading the body.
        if this.stream.poll_reset(cx).is_ready() {
            return Poll::Ready(());
        }
        loop {
            let frame = match Pin::new(&mut this.body).poll_frame(cx) {
                Poll::Ready(frame) => frame,
                Poll::Pending => {
                    // A streaming body waits for its next message: what it has goes now.
                    return match this.send_held(false) {
                        Ok(()) => Poll::Pending,
                        Err(_) => Poll::Ready(()),
                    };
                }
            };
            let sent = match frame {
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        let sent = this.send_held(false);
                        this.held = Some(own_allocation(data));
                        sent
                    }
                    Err(frame) => match frame.into_trailers() {
                        Ok(trailers) => {
                            let _ = this
                                .send_held(false)
                                .and_then(|()| this.stream.send_trailers(trailers));
                            return Poll::Ready(());
                        }
                        Err(_) => Ok(()),
                    },
                },
                Some(Err(_)) => {
                    this.stream.send_reset(h2::Reason::CANCEL);
                    return Poll::Ready(());
                }
                None => {
                    let _ = this.send_held(true);
                    return Poll::Ready(());
                }
            };
            if sent.is_err() {
                return Poll::Ready(());
            }
        }
    }
}

/// A response's data then trailers (where gRPC puts the call's status), releasing each
/// data frame's flow-control window once tonic has it.
pub(super) struct ResponseBody {
    recv: RecvStream,
    data_done: bool,
}

impl ResponseBody {
    pub(super) fn new(recv: RecvStream) -> Self {
        ResponseBody {
            recv,
            data_done: false,
        }
    }
}

impl Body for ResponseBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        if !this.data_done {
            match ready!(this.recv.poll_data(cx)) {
                Some(Ok(data)) => {
                    // Fails only once the stream is gone, which the next poll reports.
                    let _ = this.recv.flow_control().release_capacity(data.len());
                    return Poll::Ready(Some(Ok(Frame::data(data))));
                }
                Some(Err(e)) => return Poll::Ready(Some(Err(status(e)))),
                None => this.data_done = true,
            }
        }
        match ready!(this.recv.poll_trailers(cx)) {
            Ok(Some(trailers)) => Poll::Ready(Some(Ok(Frame::trailers(trailers)))),
            Ok(None) => Poll::Ready(None),
            Err(e) => Poll::Ready(Some(Err(status(e)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.recv.is_end_stream()
    }
}

/// h2's error as the status gRPC gives it: a lost connection or a refused stream is
/// `Unavailable` (the driver counts it as unreachable), as in gRPC's own clients.
pub(super) fn status(e: h2::Error) -> Status {
    use h2::Reason;
    let message = format!("http/2: {e}");
    if e.is_io() || e.is_go_away() {
        return Status::unavailable(message);
    }
    match e.reason() {
        Some(Reason::REFUSED_STREAM) => Status::unavailable(message),
        Some(Reason::CANCEL) => Status::cancelled(message),
        Some(Reason::ENHANCE_YOUR_CALM) => Status::resource_exhausted(message),
        _ => Status::internal(message),
    }
}
