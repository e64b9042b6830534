//! Tolerating etcd clients that send a malformed HTTP/2 `:authority`.
//!
//! Some of etcd's own Go clients put something that is not an authority there: etcdctl 3.4's
//! `endpoint status` sends the endpoint URL (`http://127.0.0.1:2379`), etcd client 3.5.0
//! sends `#initially=[...]`. etcd's grpc-go server ignores the value; h2 (under tonic)
//! resets such a stream with PROTOCOL_ERROR and will not relax that. So each accepted
//! connection is read through [`FixAuthority`], which follows the client's HPACK state and
//! replaces a malformed `:authority` literal by a valid one of the same length (so that the
//! server's dynamic table stays in step with the client's); every other byte passes through
//! unchanged. If anything does not parse as expected, it stops looking and passes the rest
//! of the connection through untouched, leaving the verdict to h2.
//!
//! Why its own HPACK decoder: the rewrite needs, for each field of a block, its byte span
//! and its representation (indexing mode, indexed or literal name), so that one literal is
//! replaced in place and everything else, and so the server's dynamic table, stays as the
//! client sent it. The HPACK crates on crates.io decode to (name, value) lists and expose
//! neither: `hpack` 0.3 (unmaintained since 2016), `loona-hpack` 0.4 (formerly
//! `fluke-hpack`, whose per-field callback gives name and value only) and `httlib-hpack`
//! 0.1 (fields one at a time with their indexing flags, but not the name's index or the
//! field's bytes); h2's own is private. Re-encoding whole blocks with one of their
//! encoders instead would make every request's headers pass through a second, translating
//! HPACK state on etcd's request path. The decoder here only follows the table and reads
//! literals (`Decoder`, `huffman_decode`); the fuzz tests (`authority/fuzz.rs`) check that
//! a rewritten block keeps the two tables in step.

use std::collections::VecDeque;
use std::io;
use std::pin::Pin;
use std::sync::OnceLock;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tonic::transport::server::Connected;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const FRAME_HEADER: usize = 9;
const HEADERS: u8 = 0x1;
const CONTINUATION: u8 = 0x9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const PADDED: u8 = 0x8;
const PRIORITY: u8 = 0x20;
/// The smallest SETTINGS_MAX_FRAME_SIZE a server may announce; rewritten blocks are split
/// into frames no larger than this.
const MAX_FRAME: usize = 16_384;
/// Header blocks larger than this are not examined (h2 refuses them anyway).
const MAX_BLOCK: usize = 1 << 20;
/// SETTINGS_HEADER_TABLE_SIZE's default, which the server (h2) does not change.
const TABLE_SIZE: usize = 4096;
const READ_CHUNK: usize = 16 * 1024;

/// An accepted connection whose client-to-server bytes have malformed `:authority` values
/// replaced; writes go straight through.
pub(crate) struct FixAuthority<IO> {
    io: IO,
    scan: Scanner,
    chunk: Box<[u8]>,
    eof: bool,
}

impl<IO> FixAuthority<IO> {
    pub(crate) fn new(io: IO) -> Self {
        FixAuthority {
            io,
            scan: Scanner::default(),
            chunk: vec![0; READ_CHUNK].into_boxed_slice(),
            eof: false,
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for FixAuthority<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            if this.scan.take_into(buf) {
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            if this.scan.mode == Mode::Off {
                // Nothing to look at any more: read straight into the caller's buffer.
                return Pin::new(&mut this.io).poll_read(cx, buf);
            }
            let mut chunk = ReadBuf::new(&mut this.chunk);
            ready!(Pin::new(&mut this.io).poll_read(cx, &mut chunk))?;
            if chunk.filled().is_empty() {
                this.scan.finish();
                this.eof = true;
            } else {
                this.scan.push(chunk.filled());
            }
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for FixAuthority<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

impl<IO: Connected> Connected for FixAuthority<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Mode {
    #[default]
    Preface,
    Frames,
    /// Not HTTP/2, or something unexpected: pass everything through.
    Off,
}

/// A header block being collected: its frames as received, and the block itself.
struct Block {
    raw: Vec<u8>,
    fragment: Vec<u8>,
    flags: u8,
    stream: [u8; 4],
}

/// The client-to-server byte stream, frame by frame.
#[derive(Default)]
struct Scanner {
    mode: Mode,
    input: Vec<u8>,
    out: Vec<u8>,
    out_pos: usize,
    /// Payload bytes of a frame that passes through and are still to come.
    passing: usize,
    block: Option<Block>,
    hpack: Decoder,
}

impl Scanner {
    /// Copies ready output into `buf`; false if there was none.
    fn take_into(&mut self, buf: &mut ReadBuf<'_>) -> bool {
        if self.out_pos == self.out.len() || buf.remaining() == 0 {
            return false;
        }
        let n = buf.remaining().min(self.out.len() - self.out_pos);
        buf.put_slice(&self.out[self.out_pos..self.out_pos + n]);
        self.out_pos += n;
        if self.out_pos == self.out.len() {
            self.out.clear();
            self.out_pos = 0;
        }
        true
    }

    /// The connection ended: whatever is held back goes out as it came.
    fn finish(&mut self) {
        if let Some(b) = self.block.take() {
            self.out.extend_from_slice(&b.raw);
        }
        self.out.append(&mut self.input);
    }

    fn emit(&mut self, n: usize) {
        self.out.extend(self.input.drain(..n));
    }

    fn give_up(&mut self) {
        self.mode = Mode::Off;
        if let Some(b) = self.block.take() {
            self.out.extend_from_slice(&b.raw);
        }
    }

    /// Gives up at `frame`, which follows whatever was held back.
    fn give_up_at(&mut self, frame: &[u8]) {
        self.give_up();
        self.out.extend_from_slice(frame);
    }

    fn push(&mut self, data: &[u8]) {
        self.input.extend_from_slice(data);
        loop {
            match self.mode {
                Mode::Off => {
                    let n = self.input.len();
                    self.emit(n);
                    return;
                }
                Mode::Preface => {
                    let n = self.input.len().min(PREFACE.len());
                    if self.input[..n] != PREFACE[..n] {
                        self.mode = Mode::Off;
                    } else if n < PREFACE.len() {
                        return;
                    } else {
                        self.emit(n);
                        self.mode = Mode::Frames;
                    }
                }
                Mode::Frames if self.passing > 0 => {
                    let n = self.passing.min(self.input.len());
                    self.emit(n);
                    self.passing -= n;
                    if self.passing > 0 {
                        return;
                    }
                }
                Mode::Frames => {
                    if self.input.len() < FRAME_HEADER {
                        return;
                    }
                    let h = &self.input[..FRAME_HEADER];
                    let len =
                        (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]);
                    let kind = h[3];
                    if kind != HEADERS && kind != CONTINUATION {
                        if self.block.is_some() {
                            // Only CONTINUATION may follow an unfinished block.
                            self.give_up();
                            continue;
                        }
                        self.emit(FRAME_HEADER);
                        self.passing = len;
                        continue;
                    }
                    if len > MAX_BLOCK {
                        self.give_up();
                        continue;
                    }
                    if self.input.len() < FRAME_HEADER + len {
                        return;
                    }
                    let frame: Vec<u8> = self.input.drain(..FRAME_HEADER + len).collect();
                    self.on_header_frame(frame);
                }
            }
        }
    }

    fn on_header_frame(&mut self, frame: Vec<u8>) {
        let (kind, flags) = (frame[3], frame[4]);
        let payload = &frame[FRAME_HEADER..];
        match (kind, self.block.as_mut()) {
            (HEADERS, None) => {
                let mut start = 0;
                let mut end = payload.len();
                if flags & PADDED != 0 {
                    let Some(&pad) = payload.first() else {
                        return self.give_up_at(&frame);
                    };
                    start = 1;
                    end = end.saturating_sub(usize::from(pad));
                }
                if flags & PRIORITY != 0 {
                    start += 5;
                }
                if start > end {
                    return self.give_up_at(&frame);
                }
                let fragment = payload[start..end].to_vec();
                let stream = [frame[5], frame[6], frame[7], frame[8]];
                self.block = Some(Block {
                    raw: frame,
                    fragment,
                    flags,
                    stream,
                });
            }
            (CONTINUATION, Some(b)) if b.fragment.len() + payload.len() <= MAX_BLOCK => {
                b.fragment.extend_from_slice(payload);
                b.raw.extend_from_slice(&frame);
            }
            _ => {
                return self.give_up_at(&frame);
            }
        }
        if flags & END_HEADERS == 0 {
            return;
        }
        let Some(b) = self.block.take() else { return };
        match self.hpack.decode(&b.fragment) {
            Ok(None) => self.out.extend_from_slice(&b.raw),
            Ok(Some(fixed)) => write_block(&mut self.out, &fixed, b.flags & END_STREAM, b.stream),
            Err(Malformed) => {
                self.out.extend_from_slice(&b.raw);
                self.mode = Mode::Off;
            }
        }
    }
}

/// Writes `block` as a HEADERS frame and as many CONTINUATION frames as it needs.
fn write_block(out: &mut Vec<u8>, block: &[u8], end_stream: u8, stream: [u8; 4]) {
    let chunks: Vec<&[u8]> = if block.is_empty() {
        vec![block]
    } else {
        block.chunks(MAX_FRAME).collect()
    };
    let last = chunks.len() - 1;
    for (i, chunk) in chunks.into_iter().enumerate() {
        let len = chunk.len();
        let (kind, mut flags) = if i == 0 {
            (HEADERS, end_stream)
        } else {
            (CONTINUATION, 0)
        };
        if i == last {
            flags |= END_HEADERS;
        }
        out.extend_from_slice(&[(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags]);
        out.extend_from_slice(&stream);
        out.extend_from_slice(chunk);
    }
}

#[derive(Debug)]
struct Malformed;

/// The decoding side of HPACK (RFC 7541), enough to follow the dynamic table and read
/// `:authority`.
struct Decoder {
    /// Newest first, as HPACK indexes them.
    table: VecDeque<(Vec<u8>, usize)>,
    size: usize,
    max: usize,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            max: TABLE_SIZE,
        }
    }
}

impl Decoder {
    /// Decodes one header block; returns it rewritten if it carried a malformed
    /// `:authority` literal, `None` if it can pass as it is.
    fn decode(&mut self, block: &[u8]) -> Result<Option<Vec<u8>>, Malformed> {
        let mut r = Reader { buf: block, pos: 0 };
        let mut fixes: Vec<(usize, usize, Vec<u8>)> = Vec::new();
        while r.pos < block.len() {
            let start = r.pos;
            let first = block[start];
            if first & 0x80 != 0 {
                let index = r.int(7)?;
                self.name(index)?;
            } else if first & 0xe0 == 0x20 {
                let size = r.int(5)?;
                if size > TABLE_SIZE {
                    return Err(Malformed);
                }
                self.max = size;
                self.evict(0);
            } else {
                // 01: with incremental indexing (6-bit index); 0000 / 0001: without / never.
                let indexing = first & 0x40 != 0;
                let index = r.int(if indexing { 6 } else { 4 })?;
                let name = if index == 0 {
                    r.string()?
                } else {
                    self.name(index)?.to_vec()
                };
                let value = r.string()?;
                if name == b":authority"
                    && http::uri::Authority::try_from(value.as_slice()).is_err()
                    && !value.is_empty()
                {
                    let mut fixed = vec![first & if indexing { 0xc0 } else { 0xf0 }];
                    put_int(&mut fixed, if indexing { 6 } else { 4 }, index);
                    if index == 0 {
                        put_string(&mut fixed, &name);
                    }
                    put_string(&mut fixed, &sanitize(&value));
                    fixes.push((start, r.pos, fixed));
                }
                if indexing {
                    self.insert(name, value.len());
                }
            }
        }
        if fixes.is_empty() {
            return Ok(None);
        }
        let mut out = Vec::with_capacity(block.len() + 16);
        let mut at = 0;
        for (start, end, fixed) in fixes {
            out.extend_from_slice(&block[at..start]);
            out.extend_from_slice(&fixed);
            at = end;
        }
        out.extend_from_slice(&block[at..]);
        Ok(Some(out))
    }

    /// The name at HPACK index `index` (1..=61 static, then the dynamic table).
    fn name(&self, index: usize) -> Result<&[u8], Malformed> {
        match index {
            0 => Err(Malformed),
            1..=61 => Ok(STATIC_NAMES[index - 1].as_bytes()),
            _ => self
                .table
                .get(index - 62)
                .map(|(n, _)| n.as_slice())
                .ok_or(Malformed),
        }
    }

    /// Records an entry; only its name and size matter here.
    fn insert(&mut self, name: Vec<u8>, value_len: usize) {
        let size = name.len() + value_len + 32;
        if size > self.max {
            self.table.clear();
            self.size = 0;
            return;
        }
        self.evict(size);
        self.table.push_front((name, size));
        self.size += size;
    }

    /// Evicts the oldest entries until `room` more bytes fit.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            match self.table.pop_back() {
                Some((_, s)) => self.size -= s,
                None => break,
            }
        }
    }
}

/// A valid authority of the same length: every byte that is not unreserved becomes '-'
/// (`http://127.0.0.1:2379` → `http---127.0.0.1-2379`).
fn sanitize(value: &[u8]) -> Vec<u8> {
    value
        .iter()
        .map(|&b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                b
            } else {
                b'-'
            }
        })
        .collect()
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Result<u8, Malformed> {
        let b = *self.buf.get(self.pos).ok_or(Malformed)?;
        self.pos += 1;
        Ok(b)
    }

    /// An integer with an `n`-bit prefix (RFC 7541 5.1).
    fn int(&mut self, n: u32) -> Result<usize, Malformed> {
        let mask = (1usize << n) - 1;
        let mut v = usize::from(self.byte()?) & mask;
        if v < mask {
            return Ok(v);
        }
        let mut shift = 0;
        loop {
            let b = self.byte()?;
            if shift > 28 {
                return Err(Malformed);
            }
            v += usize::from(b & 0x7f) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
    }

    /// A string literal, Huffman-decoded if so flagged (RFC 7541 5.2).
    fn string(&mut self) -> Result<Vec<u8>, Malformed> {
        let huffman = self.buf.get(self.pos).ok_or(Malformed)? & 0x80 != 0;
        let len = self.int(7)?;
        let end = self
            .pos
            .checked_add(len)
            .filter(|&e| e <= self.buf.len())
            .ok_or(Malformed)?;
        let raw = &self.buf[self.pos..end];
        self.pos = end;
        if huffman {
            huffman_decode(raw)
        } else {
            Ok(raw.to_vec())
        }
    }
}

fn put_int(out: &mut Vec<u8>, n: u32, mut v: usize) {
    let mask = (1usize << n) - 1;
    let last = out.len() - 1;
    if v < mask {
        out[last] |= v as u8;
        return;
    }
    out[last] |= mask as u8;
    v -= mask;
    while v >= 0x80 {
        out.push((v as u8 & 0x7f) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A raw (not Huffman-coded) string literal.
fn put_string(out: &mut Vec<u8>, s: &[u8]) {
    out.push(0);
    put_int(out, 7, s.len());
    out.extend_from_slice(s);
}

/// Decodes HPACK's canonical Huffman code (RFC 7541 Appendix B).
fn huffman_decode(data: &[u8]) -> Result<Vec<u8>, Malformed> {
    let code = huffman_code();
    let mut out = Vec::with_capacity(data.len() * 8 / 5);
    let (mut value, mut len) = (0u32, 0usize);
    for &byte in data {
        for bit in (0..8).rev() {
            value = (value << 1) | u32::from((byte >> bit) & 1);
            len += 1;
            let offset = value.wrapping_sub(code.first[len]);
            if offset < code.count[len] {
                let symbol = code.symbols[(code.start[len] + offset) as usize];
                if symbol == 256 {
                    return Err(Malformed); // EOS must not appear in the data
                }
                out.push(symbol as u8);
                value = 0;
                len = 0;
            } else if len == 30 {
                return Err(Malformed);
            }
        }
    }
    // Padding: fewer than 8 bits, all ones (a prefix of EOS).
    if len > 7 || value != (1u32 << len) - 1 {
        return Err(Malformed);
    }
    Ok(out)
}

/// For each code length, the first code, the number of codes and where their symbols
/// start in `symbols` (symbols ordered by code length, then value).
struct Canonical {
    first: [u32; 31],
    count: [u32; 31],
    start: [u32; 31],
    symbols: Vec<u16>,
}

fn huffman_code() -> &'static Canonical {
    static CODE: OnceLock<Canonical> = OnceLock::new();
    CODE.get_or_init(|| {
        let mut symbols: Vec<u16> = (0..=256).collect();
        symbols.sort_by_key(|&s| (CODE_LENGTHS[s as usize], s));
        let mut c = Canonical {
            first: [0; 31],
            count: [0; 31],
            start: [0; 31],
            symbols,
        };
        for &l in &CODE_LENGTHS {
            c.count[l as usize] += 1;
        }
        let (mut code, mut start) = (0u32, 0u32);
        for len in 1..=30 {
            c.first[len] = code;
            c.start[len] = start;
            code = (code + c.count[len]) << 1;
            start += c.count[len];
        }
        c
    })
}

/// Code length of each symbol, 0..=255 and EOS (256), from RFC 7541 Appendix B; the codes
/// themselves follow (the code is canonical).
const CODE_LENGTHS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

/// Names of HPACK's static table (RFC 7541 Appendix A), indexes 1..=61.
const STATIC_NAMES: [&str; 61] = [
    ":authority",
    ":method",
    ":method",
    ":path",
    ":path",
    ":scheme",
    ":scheme",
    ":status",
    ":status",
    ":status",
    ":status",
    ":status",
    ":status",
    ":status",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "accept",
    "access-control-allow-origin",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "content-disposition",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-range",
    "content-type",
    "cookie",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "link",
    "location",
    "max-forwards",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "refresh",
    "retry-after",
    "server",
    "set-cookie",
    "strict-transport-security",
    "transfer-encoding",
    "user-agent",
    "vary",
    "via",
    "www-authenticate",
];

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn huffman_decodes_the_rfc_examples() {
        let cases = [
            ("f1e3 c2e5 f23a 6ba0 ab90 f4ff", "www.example.com"),
            ("a8eb 1064 9cbf", "no-cache"),
            ("25a8 49e9 5ba9 7d7f", "custom-key"),
            ("25a8 49e9 5bb8 e8b4 bf", "custom-value"),
            ("6402", "302"),
            ("aec3 771a 4b", "private"),
        ];
        for (coded, text) in cases {
            assert_eq!(
                huffman_decode(&hex(coded)).unwrap(),
                text.as_bytes(),
                "{text}"
            );
        }
        // Padding longer than 7 bits, or not all ones, is malformed.
        assert!(huffman_decode(&hex("f1e3 c2e5 f23a 6ba0 ab90 f4ff ff")).is_err());
        assert!(huffman_decode(&hex("00")).is_err());
    }

    #[test]
    fn follows_the_dynamic_table_of_the_rfc_request_examples() {
        // RFC 7541 C.4.1-C.4.3: three requests with Huffman coding on one connection.
        let mut d = Decoder::default();
        assert!(d
            .decode(&hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"))
            .unwrap()
            .is_none());
        assert_eq!(d.size, 57);
        assert!(d
            .decode(&hex("8286 84be 5886 a8eb 1064 9cbf"))
            .unwrap()
            .is_none());
        assert_eq!(d.size, 110);
        let third = hex("8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf");
        assert!(d.decode(&third).unwrap().is_none());
        assert_eq!(d.size, 164);
        let names: Vec<&[u8]> = d.table.iter().map(|(n, _)| n.as_slice()).collect();
        assert_eq!(names, [&b"custom-key"[..], b"cache-control", b":authority"]);
    }

    /// A literal `:authority` with incremental indexing (indexed name, raw value).
    pub(super) fn authority_literal(value: &str) -> Vec<u8> {
        let mut b = vec![0x41];
        put_string(&mut b, value.as_bytes());
        b
    }

    #[test]
    fn replaces_a_malformed_authority_and_keeps_the_table_in_step() {
        let mut d = Decoder::default();
        let mut block = hex("8286 84");
        block.extend(authority_literal("http://127.0.0.1:2379"));
        let fixed = d.decode(&block).unwrap().expect("rewritten");
        let mut want = hex("8286 84");
        want.extend(authority_literal("http---127.0.0.1-2379"));
        assert_eq!(fixed, want);
        assert_eq!(
            d.size,
            32 + ":authority".len() + "http://127.0.0.1:2379".len()
        );
        // The next request refers to the entry by index: it passes as it is.
        assert!(d.decode(&hex("8286 84be")).unwrap().is_none());
        // A valid authority passes untouched.
        let mut ok = hex("8286 84");
        ok.extend(authority_literal("127.0.0.1:2379"));
        assert!(d.decode(&ok).unwrap().is_none());
    }

    pub(super) fn frame(kind: u8, flags: u8, stream: u8, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![
            (len >> 16) as u8,
            (len >> 8) as u8,
            len as u8,
            kind,
            flags,
            0,
            0,
            0,
            stream,
        ];
        f.extend_from_slice(payload);
        f
    }

    pub(super) fn scan(chunks: &[&[u8]]) -> Vec<u8> {
        let mut s = Scanner::default();
        for c in chunks {
            s.push(c);
        }
        s.finish();
        s.out
    }

    #[test]
    fn rewrites_only_header_blocks_with_a_malformed_authority() {
        let settings = frame(0x4, 0, 0, &[]);
        let mut bad = hex("8286 84");
        bad.extend(authority_literal("#initially=[http://a:1]"));
        let data = frame(0x0, END_STREAM, 1, b"hello, world");
        // The bad block arrives padded and split over a CONTINUATION frame.
        let mut padded = vec![3];
        padded.extend_from_slice(&bad[..5]);
        padded.extend_from_slice(&[0, 0, 0]);
        let mut input = PREFACE.to_vec();
        input.extend(&settings);
        input.extend(frame(HEADERS, PADDED, 1, &padded));
        input.extend(frame(CONTINUATION, END_HEADERS, 1, &bad[5..]));
        input.extend(&data);

        let mut fixed_block = hex("8286 84");
        fixed_block.extend(authority_literal("-initially--http---a-1-"));
        let mut want = PREFACE.to_vec();
        want.extend(&settings);
        want.extend(frame(HEADERS, END_HEADERS, 1, &fixed_block));
        want.extend(&data);
        // Whole, and byte by byte.
        assert_eq!(scan(&[&input]), want);
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(scan(&bytes), want);

        // A connection with nothing to fix comes out byte for byte.
        let mut good = PREFACE.to_vec();
        good.extend(&settings);
        good.extend(frame(
            HEADERS,
            END_HEADERS | END_STREAM,
            3,
            &hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff"),
        ));
        good.extend(&data);
        assert_eq!(scan(&[&good]), good);
        // A block broken off by another frame goes out as it came, in order, and so does the
        // rest of the connection (h2 will refuse it).
        let mut broken = PREFACE.to_vec();
        broken.extend(frame(HEADERS, 0, 1, &bad));
        broken.extend(&data);
        broken.extend(frame(HEADERS, END_HEADERS, 3, &bad));
        assert_eq!(scan(&[&broken]), broken);
        // So does anything that is not HTTP/2.
        assert_eq!(
            scan(&[b"GET / HTTP/1.1\r\n\r\n"]),
            b"GET / HTTP/1.1\r\n\r\n"
        );
    }
}
