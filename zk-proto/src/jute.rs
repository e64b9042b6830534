//! Jute's binary encoding, the primitives ZooKeeper's records are made of: big-endian
//! `int` / `long`, one-byte `boolean`, `buffer` and `ustring` as an int length (-1: null)
//! then the bytes, `vector` as an int count (-1: null) then the elements.
//!
//! [`Reader`] never panics and never trusts a length: every read is bounds-checked and
//! vector capacity is bounded by the bytes left, so hostile input costs no more memory
//! than its own size.

use thiserror::Error;

/// Why bytes are not a valid record.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    #[error("truncated: needed {needed} more bytes, {left} left")]
    Truncated { needed: usize, left: usize },
    #[error("negative length {0}")]
    NegativeLength(i32),
    #[error("string is not UTF-8")]
    BadUtf8,
    #[error("null where a value is required")]
    UnexpectedNull,
    #[error("{0} trailing bytes")]
    Trailing(usize),
    #[error("unknown op code {0} in a multi")]
    BadMultiOp(i32),
}

/// Reads jute primitives from a byte slice.
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf }
    }

    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.buf.len() {
            return Err(DecodeError::Truncated {
                needed: n,
                left: self.buf.len(),
            });
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub fn i32(&mut self) -> Result<i32, DecodeError> {
        self.array().map(i32::from_be_bytes)
    }

    pub fn i64(&mut self) -> Result<i64, DecodeError> {
        self.array().map(i64::from_be_bytes)
    }

    /// Java's `readBoolean`: any nonzero byte is true.
    pub fn bool(&mut self) -> Result<bool, DecodeError> {
        Ok(self.take(1)?[0] != 0)
    }

    /// A length: -1 is null (`None`), other negatives are errors.
    fn len(&mut self) -> Result<Option<usize>, DecodeError> {
        match self.i32()? {
            -1 => Ok(None),
            n if n < 0 => Err(DecodeError::NegativeLength(n)),
            n => Ok(Some(n as usize)),
        }
    }

    /// A `buffer`; null reads as `None`.
    pub fn buffer_opt(&mut self) -> Result<Option<&'a [u8]>, DecodeError> {
        match self.len()? {
            None => Ok(None),
            Some(n) => self.take(n).map(Some),
        }
    }

    /// A `buffer` where null means nothing more than empty (passwords, auth bytes): null
    /// reads as empty. Node data is not such a buffer: ZooKeeper stores null data as null
    /// and getData returns it as null (length -1), so it is read with [`Reader::data`].
    pub fn buffer(&mut self) -> Result<Vec<u8>, DecodeError> {
        Ok(self.buffer_opt()?.map(<[u8]>::to_vec).unwrap_or_default())
    }

    /// A node's data: `None` for null (length -1), kept apart from empty.
    pub fn data(&mut self) -> Result<Option<Vec<u8>>, DecodeError> {
        Ok(self.buffer_opt()?.map(<[u8]>::to_vec))
    }

    /// A `ustring` that may be null (`None`), as inside an ACL's `Id`.
    pub fn string_opt(&mut self) -> Result<Option<String>, DecodeError> {
        self.buffer_opt()?
            .map(|bytes| {
                std::str::from_utf8(bytes)
                    .map(str::to_string)
                    .map_err(|_| DecodeError::BadUtf8)
            })
            .transpose()
    }

    /// A `ustring` that must not be null.
    pub fn string(&mut self) -> Result<String, DecodeError> {
        let bytes = self.buffer_opt()?.ok_or(DecodeError::UnexpectedNull)?;
        std::str::from_utf8(bytes)
            .map(str::to_string)
            .map_err(|_| DecodeError::BadUtf8)
    }

    /// A `vector`; null reads as empty. `min_size` is the smallest encoding of one
    /// element, to bound the allocation by the bytes left.
    pub fn vector<T>(
        &mut self,
        min_size: usize,
        mut element: impl FnMut(&mut Self) -> Result<T, DecodeError>,
    ) -> Result<Vec<T>, DecodeError> {
        let Some(n) = self.len()? else {
            return Ok(Vec::new());
        };
        if n.saturating_mul(min_size) > self.buf.len() {
            return Err(DecodeError::Truncated {
                needed: n.saturating_mul(min_size),
                left: self.buf.len(),
            });
        }
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(element(self)?);
        }
        Ok(out)
    }

    pub fn strings(&mut self) -> Result<Vec<String>, DecodeError> {
        self.vector(4, Self::string)
    }

    /// Fails unless every byte was consumed.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match self.buf.len() {
            0 => Ok(()),
            n => Err(DecodeError::Trailing(n)),
        }
    }
}

/// Appends jute primitives to a byte vector.
#[derive(Debug, Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Self {
        Self::default()
    }

    /// A writer that starts with room for a frame's length prefix ([`Writer::into_frame`]).
    pub fn frame() -> Self {
        Writer { buf: vec![0; 4] }
    }

    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.buf.push(u8::from(v));
        self
    }

    pub fn buffer(&mut self, v: &[u8]) -> &mut Self {
        self.i32(len_i32(v.len()));
        self.buf.extend_from_slice(v);
        self
    }

    /// A `buffer` that may be null (written as length -1).
    pub fn buffer_opt(&mut self, v: Option<&[u8]>) -> &mut Self {
        match v {
            Some(v) => self.buffer(v),
            None => self.i32(-1),
        }
    }

    pub fn string(&mut self, v: &str) -> &mut Self {
        self.buffer(v.as_bytes())
    }

    /// A `ustring` that may be null (written as length -1).
    pub fn string_opt(&mut self, v: Option<&str>) -> &mut Self {
        self.buffer_opt(v.map(str::as_bytes))
    }

    pub fn strings<S: AsRef<str>>(&mut self, v: &[S]) -> &mut Self {
        self.i32(len_i32(v.len()));
        for s in v {
            self.string(s.as_ref());
        }
        self
    }

    /// The bytes of a writer made with [`Writer::frame`], length prefix filled in.
    pub fn into_frame(mut self) -> Vec<u8> {
        let len = len_i32(self.buf.len().saturating_sub(4));
        self.buf[..4].copy_from_slice(&len.to_be_bytes());
        self.buf
    }
}

/// Lengths above i32::MAX cannot be framed; frames are capped far below that.
fn len_i32(n: usize) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn primitives_round_trip() {
        let mut w = Writer::new();
        w.i32(-7)
            .i64(i64::MIN)
            .bool(true)
            .bool(false)
            .buffer(b"\x00\xff")
            .string("/é")
            .strings(&["a", "", "b"]);
        let mut r = Reader::new(&w.buf);
        assert_eq!(r.i32(), Ok(-7));
        assert_eq!(r.i64(), Ok(i64::MIN));
        assert_eq!(r.bool(), Ok(true));
        assert_eq!(r.bool(), Ok(false));
        assert_eq!(r.buffer(), Ok(vec![0, 255]));
        assert_eq!(r.string().as_deref(), Ok("/é"));
        assert_eq!(r.strings(), Ok(vec!["a".into(), String::new(), "b".into()]));
        assert_eq!(r.finish(), Ok(()));
    }

    #[test]
    fn nulls_and_bad_lengths() {
        let null = (-1i32).to_be_bytes();
        assert_eq!(Reader::new(&null).buffer(), Ok(vec![]));
        assert_eq!(Reader::new(&null).data(), Ok(None));
        assert_eq!(Reader::new(&[0, 0, 0, 0]).data(), Ok(Some(vec![])));
        assert_eq!(Reader::new(&null).string_opt(), Ok(None));
        let mut w = Writer::new();
        w.buffer_opt(None).string_opt(None).buffer_opt(Some(b""));
        assert_eq!(w.buf, [null, null, [0; 4]].concat());
        assert_eq!(Reader::new(&null).strings(), Ok(vec![]));
        assert_eq!(
            Reader::new(&null).string(),
            Err(DecodeError::UnexpectedNull)
        );
        let neg = (-2i32).to_be_bytes();
        assert_eq!(
            Reader::new(&neg).buffer(),
            Err(DecodeError::NegativeLength(-2))
        );
        // A huge count with few bytes behind it is refused before allocating.
        let huge = i32::MAX.to_be_bytes();
        assert!(matches!(
            Reader::new(&huge).strings(),
            Err(DecodeError::Truncated { .. })
        ));
        assert!(matches!(
            Reader::new(&[0, 0, 0, 5, b'a']).buffer(),
            Err(DecodeError::Truncated { needed: 5, left: 1 })
        ));
        assert_eq!(
            Reader::new(&[0, 0, 0, 1, 0xff]).string(),
            Err(DecodeError::BadUtf8)
        );
        assert_eq!(Reader::new(&[2]).bool(), Ok(true));
        assert_eq!(Reader::new(&[1, 2]).finish(), Err(DecodeError::Trailing(2)));
    }

    #[test]
    fn frames_carry_their_length() {
        let mut w = Writer::frame();
        w.i32(1).i64(2);
        assert_eq!(
            w.into_frame(),
            [0, 0, 0, 12, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2]
        );
    }
}
