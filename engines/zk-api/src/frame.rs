//! Framing on the client port: every packet is a 4-byte big-endian length and that many
//! bytes. A connection's first 4 bytes may instead be a four-letter word (`ruok`, `srvr`,
//! ...), as ZooKeeper serves them on the same port.

use tokio::io::{AsyncRead, AsyncReadExt};

use crate::four_letter::WORDS;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame length {len} outside 0..={max}")]
    BadLength { len: i64, max: usize },
    #[error("connection closed mid-frame")]
    Truncated,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// What a connection's first 4 bytes say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Opening {
    FourLetter(&'static str),
    /// The length of the first frame (the ConnectRequest).
    Frame(usize),
}

/// Classifies a connection's first 4 bytes.
pub fn opening(first: [u8; 4], max: usize) -> Result<Opening, FrameError> {
    if let Some(word) = WORDS.iter().find(|w| w.as_bytes() == first) {
        return Ok(Opening::FourLetter(word));
    }
    frame_len(first, max).map(Opening::Frame)
}

/// A frame length, checked against `max` (ZooKeeper's `jute.maxbuffer`).
pub fn frame_len(raw: [u8; 4], max: usize) -> Result<usize, FrameError> {
    let len = i32::from_be_bytes(raw);
    match usize::try_from(len) {
        Ok(n) if n <= max => Ok(n),
        _ => Err(FrameError::BadLength {
            len: i64::from(len),
            max,
        }),
    }
}

/// Reads 4 bytes; `None` on a clean end of stream before the first byte.
pub async fn read_prefix<R: AsyncRead + Unpin>(r: &mut R) -> Result<Option<[u8; 4]>, FrameError> {
    let mut raw = [0u8; 4];
    let mut got = 0;
    while got < 4 {
        match r.read(&mut raw[got..]).await? {
            0 if got == 0 => return Ok(None),
            0 => return Err(FrameError::Truncated),
            n => got += n,
        }
    }
    Ok(Some(raw))
}

/// The first allocation for a payload; it doubles as bytes arrive.
const FIRST_CHUNK: usize = 256;

/// Reads a frame's payload of `len` bytes, growing its buffer only as bytes arrive, so a
/// client that announced a large frame and went quiet costs a few hundred bytes, not `len`.
pub async fn read_payload<R: AsyncRead + Unpin>(
    r: &mut R,
    len: usize,
) -> Result<Vec<u8>, FrameError> {
    let mut payload = Vec::new();
    while payload.len() < len {
        let missing = len - payload.len();
        if payload.len() == payload.capacity() {
            payload.reserve_exact(missing.min(payload.len().max(FIRST_CHUNK)));
        }
        // `take` keeps the read inside this frame; the buffer has room for at least a byte.
        let n = (&mut *r)
            .take(missing as u64)
            .read_buf(&mut payload)
            .await?;
        if n == 0 {
            return Err(FrameError::Truncated);
        }
    }
    Ok(payload)
}

/// Reads one whole frame; `None` on a clean end of stream between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    max: usize,
) -> Result<Option<Vec<u8>>, FrameError> {
    let Some(raw) = read_prefix(r).await? else {
        return Ok(None);
    };
    let len = frame_len(raw, max)?;
    read_payload(r, len).await.map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openings() {
        assert_eq!(
            opening(*b"ruok", 1 << 20).unwrap(),
            Opening::FourLetter("ruok")
        );
        assert_eq!(opening([0, 0, 0, 45], 1 << 20).unwrap(), Opening::Frame(45));
        assert!(
            opening(*b"nope", 1 << 20).is_err(),
            "unknown words are huge lengths"
        );
        assert!(opening([0xff, 0xff, 0xff, 0xff], 1 << 20).is_err());
        assert!(opening([0, 0x10, 0, 1], 1 << 20).is_err());
    }

    /// A payload larger than the first chunk arrives in small pieces and comes out whole,
    /// without the bytes of the next frame.
    #[tokio::test]
    async fn large_payloads_grow_as_they_arrive() {
        let body: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        let (mut client, mut server) = tokio::io::duplex(64);
        let sent = body.clone();
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            client.write_all(&(sent.len() as u32).to_be_bytes()).await?;
            client.write_all(&sent).await?;
            client.write_all(&[0, 0, 0, 1, 9]).await
        });
        assert_eq!(read_frame(&mut server, 1 << 20).await.unwrap(), Some(body));
        assert_eq!(
            read_frame(&mut server, 1 << 20).await.unwrap(),
            Some(vec![9])
        );
        writer.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn frames_and_truncation() {
        let mut ok: &[u8] = &[0, 0, 0, 2, 7, 8, 0, 0, 0, 0];
        assert_eq!(read_frame(&mut ok, 16).await.unwrap(), Some(vec![7, 8]));
        assert_eq!(read_frame(&mut ok, 16).await.unwrap(), Some(vec![]));
        assert_eq!(read_frame(&mut ok, 16).await.unwrap(), None);
        let mut short: &[u8] = &[0, 0, 0, 9, 1];
        assert!(matches!(
            read_frame(&mut short, 16).await,
            Err(FrameError::Truncated)
        ));
        let mut half: &[u8] = &[0, 0];
        assert!(matches!(
            read_frame(&mut half, 16).await,
            Err(FrameError::Truncated)
        ));
        let mut two: &[u8] = &[0, 0, 0, 3, 1, 2, 3, 0, 0, 0, 1, 4];
        assert_eq!(read_frame(&mut two, 16).await.unwrap(), Some(vec![1, 2, 3]));
        assert_eq!(read_frame(&mut two, 16).await.unwrap(), Some(vec![4]));
        let mut big: &[u8] = &[0, 0, 1, 0];
        assert!(matches!(
            read_frame(&mut big, 16).await,
            Err(FrameError::BadLength { .. })
        ));
    }
}
