//! Envelopes larger than one peer frame (snapshot installs), sent as a run of chunks and
//! reassembled by the receiver, so a snapshot of any size up to a configured bound reaches a
//! follower. The cores never see chunks: the TCP transport splits an encoded envelope and
//! delivers it whole once every chunk has arrived.
//!
//! A frame's body starts with a tag byte: [`WHOLE`] then a postcard [`Envelope`], or
//! [`CHUNK`] then a postcard [`ChunkHeader`] and the chunk's bytes. The chunks of one
//! transfer arrive in order on one connection, possibly with whole envelopes between them;
//! a transfer that breaks off (a gap, a new transfer, the connection lost) is discarded.

use serde::{Deserialize, Serialize};

use crate::envelope::Envelope;

/// Tag of a frame carrying a whole envelope.
pub const WHOLE: u8 = 0;
/// Tag of a frame carrying one chunk of a larger envelope.
pub const CHUNK: u8 = 1;
/// Room kept in a chunk frame for its tag and header (varints: at most 31 bytes).
pub const CHUNK_OVERHEAD: usize = 64;

/// Where a chunk belongs: the transfer (numbered per connection), the encoded envelope's
/// whole length, and this chunk's offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkHeader {
    pub transfer: u64,
    pub total: u64,
    pub offset: u64,
}

/// One decoded frame body.
#[derive(Debug)]
pub enum Frame<'a> {
    Whole(Envelope),
    Chunk(ChunkHeader, &'a [u8]),
}

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("empty frame")]
    Empty,
    #[error("unknown frame tag {0}")]
    Tag(u8),
    #[error("undecodable frame: {0}")]
    Decode(#[from] postcard::Error),
}

/// Decodes a frame body (the bytes after the length).
pub fn decode(body: &[u8]) -> Result<Frame<'_>, FrameError> {
    let (&tag, rest) = body.split_first().ok_or(FrameError::Empty)?;
    match tag {
        WHOLE => Ok(Frame::Whole(Envelope::decode(rest)?)),
        CHUNK => {
            let (header, data) = postcard::take_from_bytes::<ChunkHeader>(rest)?;
            Ok(Frame::Chunk(header, data))
        }
        other => Err(FrameError::Tag(other)),
    }
}

/// The tag and header that precede a chunk's bytes.
pub fn chunk_prefix(header: &ChunkHeader) -> Vec<u8> {
    let mut prefix = vec![CHUNK];
    // A struct of three u64 always encodes.
    prefix.extend(postcard::to_stdvec(header).unwrap_or_default());
    prefix
}

/// Why a transfer was discarded.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReassemblyError {
    #[error("transfer {transfer} of {total} bytes exceeds the snapshot limit of {max} bytes")]
    TooLarge { transfer: u64, total: u64, max: u64 },
    #[error("chunk at {offset} of transfer {transfer} does not follow {expected} (of transfer {current:?}); discarded")]
    OutOfOrder {
        transfer: u64,
        offset: u64,
        expected: u64,
        current: Option<u64>,
    },
    #[error("chunks of transfer {transfer} overrun its length {total}")]
    Overrun { transfer: u64, total: u64 },
}

/// A transfer in progress.
#[derive(Debug)]
struct Partial {
    transfer: u64,
    total: u64,
    bytes: Vec<u8>,
}

/// The receiving side of one connection: at most one transfer in progress, bounded by
/// `max_total` bytes. Memory grows with the bytes received, not with the length announced.
#[derive(Debug)]
pub struct Reassembly {
    max_total: u64,
    partial: Option<Partial>,
}

impl Reassembly {
    pub fn new(max_total: u64) -> Self {
        Reassembly {
            max_total,
            partial: None,
        }
    }

    /// Adds a chunk; the encoded envelope once its last chunk arrived. On an error the
    /// transfer in progress (if any) is gone; a later transfer starts afresh.
    pub fn accept(
        &mut self,
        header: ChunkHeader,
        data: &[u8],
    ) -> Result<Option<Vec<u8>>, ReassemblyError> {
        let ChunkHeader {
            transfer,
            total,
            offset,
        } = header;
        if offset == 0 {
            // A new transfer replaces one left unfinished (the sender gave up on it).
            self.partial = None;
            if total > self.max_total {
                return Err(ReassemblyError::TooLarge {
                    transfer,
                    total,
                    max: self.max_total,
                });
            }
            self.partial = Some(Partial {
                transfer,
                total,
                bytes: Vec::new(),
            });
        }
        let mut partial = match self.partial.take() {
            Some(p) if p.transfer == transfer && p.bytes.len() as u64 == offset => p,
            other => {
                return Err(ReassemblyError::OutOfOrder {
                    transfer,
                    offset,
                    expected: other.as_ref().map_or(0, |p| p.bytes.len() as u64),
                    current: other.map(|p| p.transfer),
                })
            }
        };
        if offset + data.len() as u64 > partial.total {
            return Err(ReassemblyError::Overrun { transfer, total });
        }
        partial.bytes.extend_from_slice(data);
        if partial.bytes.len() as u64 == partial.total {
            return Ok(Some(partial.bytes));
        }
        self.partial = Some(partial);
        Ok(None)
    }

    /// Bytes received and announced of the transfer in progress, if any.
    pub fn in_progress(&self) -> Option<(u64, u64)> {
        self.partial
            .as_ref()
            .map(|p| (p.bytes.len() as u64, p.total))
    }
}

/// The sending side: an encoded envelope cut into chunks of at most `chunk` bytes.
#[derive(Debug)]
pub struct Outgoing {
    transfer: u64,
    bytes: Vec<u8>,
    sent: usize,
    chunk: usize,
}

impl Outgoing {
    pub fn new(transfer: u64, bytes: Vec<u8>, chunk: usize) -> Self {
        Outgoing {
            transfer,
            bytes,
            sent: 0,
            chunk: chunk.max(1),
        }
    }

    /// The next chunk's header and bytes; `None` once all were taken.
    pub fn next_chunk(&mut self) -> Option<(ChunkHeader, &[u8])> {
        if self.sent >= self.bytes.len() {
            return None;
        }
        let start = self.sent;
        let end = (start + self.chunk).min(self.bytes.len());
        self.sent = end;
        let header = ChunkHeader {
            transfer: self.transfer,
            total: self.bytes.len() as u64,
            offset: start as u64,
        };
        Some((header, &self.bytes[start..end]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunks(transfer: u64, bytes: &[u8], size: usize) -> Vec<(ChunkHeader, Vec<u8>)> {
        let mut out = Outgoing::new(transfer, bytes.to_vec(), size);
        std::iter::from_fn(|| out.next_chunk().map(|(h, d)| (h, d.to_vec()))).collect()
    }

    #[test]
    fn split_and_reassembled() {
        let bytes: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let parts = chunks(7, &bytes, 300);
        assert_eq!(parts.len(), 4);
        let mut r = Reassembly::new(1 << 20);
        for (h, d) in &parts[..3] {
            assert_eq!(r.accept(*h, d), Ok(None));
        }
        assert_eq!(r.in_progress(), Some((900, 1000)));
        let (h, d) = &parts[3];
        assert_eq!(r.accept(*h, d), Ok(Some(bytes)));
        assert_eq!(r.in_progress(), None);
    }

    #[test]
    fn too_large_gaps_and_restarts_are_discarded() {
        let bytes = vec![5u8; 100];
        let mut small = Reassembly::new(99);
        let (h, d) = &chunks(1, &bytes, 10)[0];
        assert!(matches!(
            small.accept(*h, d),
            Err(ReassemblyError::TooLarge { total: 100, .. })
        ));
        let mut r = Reassembly::new(1000);
        let parts = chunks(1, &bytes, 10);
        r.accept(parts[0].0, &parts[0].1).unwrap();
        // A chunk skipped: the transfer is gone, and its later chunks are refused too.
        assert!(r.accept(parts[2].0, &parts[2].1).is_err());
        assert!(r.accept(parts[3].0, &parts[3].1).is_err());
        // A new transfer starts over, replacing an unfinished one.
        let again = chunks(2, &bytes, 10);
        r.accept(again[0].0, &again[0].1).unwrap();
        let third = chunks(3, &bytes, 50);
        r.accept(third[0].0, &third[0].1).unwrap();
        assert!(r.accept(again[1].0, &again[1].1).is_err(), "replaced");
        let lying = ChunkHeader {
            transfer: 4,
            total: 5,
            offset: 0,
        };
        assert!(matches!(
            r.accept(lying, &[0; 6]),
            Err(ReassemblyError::Overrun { .. })
        ));
    }

    #[test]
    fn frames_decode_by_tag() {
        let header = ChunkHeader {
            transfer: u64::MAX,
            total: u64::MAX,
            offset: u64::MAX,
        };
        let mut body = chunk_prefix(&header);
        assert!(body.len() <= CHUNK_OVERHEAD);
        body.extend_from_slice(b"data");
        match decode(&body) {
            Ok(Frame::Chunk(h, d)) => assert_eq!((h, d), (header, &b"data"[..])),
            other => panic!("{other:?}"),
        }
        assert!(matches!(decode(&[]), Err(FrameError::Empty)));
        assert!(matches!(decode(&[9, 1]), Err(FrameError::Tag(9))));
        assert!(decode(&[WHOLE, 0xff, 0xff]).is_err());
    }
}
