//! A getChildren reply's names, kept in the bytes they arrived in.
//!
//! A lock queue of 10,000 contenders answers every listing with 10,000 names. Decoded into
//! a `Vec<String>` that is 10,000 allocations and about twice the reply's size, for a
//! recipe that looks for one name and one predecessor; while a busy generator has thousands
//! of such replies waiting for their tasks, that was most of its memory. Here a listing is
//! its frame, checked once (counts, lengths, UTF-8) and read in place.

use coordbench_zk_proto::jute::{DecodeError, Reader};
use tokio::sync::SemaphorePermit;

/// The names of a getChildren reply, in the server's order.
#[derive(Debug)]
pub struct Names {
    frame: Vec<u8>,
    /// Where the vector's count starts in `frame`.
    start: usize,
    count: usize,
    /// The listing's place among those in flight ([`super::budget`]), held while it lives.
    _place: Option<SemaphorePermit<'static>>,
}

impl Names {
    /// Checks the vector of strings at `frame[start..]` (which must end the frame).
    pub(super) fn parse(frame: Vec<u8>, start: usize) -> Result<Names, DecodeError> {
        let mut r = Reader::new(frame.get(start..).unwrap_or_default());
        let count = r.i32()?;
        // A null vector (-1) lists nothing.
        let count = usize::try_from(count).unwrap_or(0);
        for _ in 0..count {
            let bytes = r.buffer_opt()?.ok_or(DecodeError::UnexpectedNull)?;
            std::str::from_utf8(bytes).map_err(|_| DecodeError::BadUtf8)?;
        }
        r.finish()?;
        Ok(Names {
            frame,
            start,
            count,
            _place: None,
        })
    }

    /// Keeps `place` until these names are dropped.
    pub(super) fn holding(mut self, place: Option<SemaphorePermit<'static>>) -> Names {
        self._place = place;
        self
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The names, in the server's order.
    pub fn iter(&self) -> impl Iterator<Item = &str> + '_ {
        let mut r = Reader::new(self.frame.get(self.start + 4..).unwrap_or_default());
        // `parse` checked every length and every name, so these reads cannot fail.
        (0..self.count).map(move |_| match r.buffer_opt() {
            Ok(Some(bytes)) => std::str::from_utf8(bytes).unwrap_or_default(),
            _ => "",
        })
    }

    pub fn contains(&self, name: &str) -> bool {
        self.iter().any(|n| n == name)
    }

    pub fn to_vec(&self) -> Vec<String> {
        self.iter().map(String::from).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordbench_zk_proto::jute::Writer;

    fn frame(names: &[&str]) -> Vec<u8> {
        let mut w = Writer::new();
        w.i64(7).strings(names);
        w.buf
    }

    #[test]
    fn names_read_in_place_in_the_servers_order() {
        let names = Names::parse(frame(&["b", "a", "c-0000000001"]), 8).unwrap();
        assert_eq!(names.len(), 3);
        assert_eq!(names.to_vec(), ["b", "a", "c-0000000001"]);
        assert!(names.contains("a") && !names.contains("d"));
        assert!(Names::parse(frame(&[]), 8).unwrap().is_empty());
    }

    #[test]
    fn malformed_listings_are_refused_when_they_arrive() {
        let mut truncated = frame(&["abc"]);
        truncated.pop();
        assert!(Names::parse(truncated, 8).is_err());
        let mut bad_utf8 = frame(&["ab"]);
        let last = bad_utf8.len() - 1;
        bad_utf8[last] = 0xff;
        assert!(Names::parse(bad_utf8, 8).is_err());
        let mut trailing = frame(&["a"]);
        trailing.push(0);
        assert!(Names::parse(trailing, 8).is_err());
    }
}
