//! The simulated state machine: an append-only list of what was applied at
//! each log index (term and command, `None` for a no-op), with a snapshot
//! encoding so it can be compacted and shipped to lagging followers.

use coordbench_raft::{Entry, EntryKind};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppliedLog {
    /// `items[i - 1]` is what was applied at log index `i`.
    pub items: Vec<(u64, Option<Vec<u8>>)>,
}

impl AppliedLog {
    pub fn len(&self) -> u64 {
        self.items.len() as u64
    }

    pub fn apply(&mut self, e: &Entry) -> Result<(), String> {
        if e.index != self.len() + 1 {
            return Err(format!(
                "state machine at {} was handed entry {}",
                self.len(),
                e.index
            ));
        }
        let cmd = match &e.kind {
            EntryKind::Noop => None,
            EntryKind::Normal(d) => Some(d.clone()),
        };
        self.items.push((e.term, cmd));
        Ok(())
    }

    /// Encoding of the first `upto` items.
    pub fn encode(&self, upto: u64) -> Vec<u8> {
        let mut out = Vec::new();
        for (term, cmd) in self.items.iter().take(upto as usize) {
            out.extend_from_slice(&term.to_le_bytes());
            match cmd {
                None => out.push(0),
                Some(d) => {
                    out.push(1);
                    out.extend_from_slice(&(d.len() as u32).to_le_bytes());
                    out.extend_from_slice(d);
                }
            }
        }
        out
    }

    pub fn decode(mut data: &[u8]) -> Result<Self, String> {
        let mut items = Vec::new();
        let take = |data: &mut &[u8], n: usize| -> Result<Vec<u8>, String> {
            if data.len() < n {
                return Err("truncated snapshot".to_string());
            }
            let (head, rest) = data.split_at(n);
            *data = rest;
            Ok(head.to_vec())
        };
        while !data.is_empty() {
            let term = u64::from_le_bytes(take(&mut data, 8)?.try_into().map_err(|_| "term")?);
            let tag = take(&mut data, 1)?[0];
            let cmd = if tag == 0 {
                None
            } else {
                let len = u32::from_le_bytes(take(&mut data, 4)?.try_into().map_err(|_| "len")?);
                Some(take(&mut data, len as usize)?)
            };
            items.push((term, cmd));
        }
        Ok(Self { items })
    }
}
