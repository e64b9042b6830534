//! The simulated state machine: the list of (zxid, command) it applied, in
//! order, with a snapshot encoding so it can be compacted and shipped to
//! lagging followers.

use coordbench_zab::{Proposal, Zxid};

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AppliedLog {
    pub items: Vec<(Zxid, Vec<u8>)>,
}

impl AppliedLog {
    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn last_zxid(&self) -> Zxid {
        self.items.last().map_or(Zxid::ZERO, |i| i.0)
    }

    pub fn apply(&mut self, p: &Proposal) -> Result<(), String> {
        if p.zxid <= self.last_zxid() {
            return Err(format!(
                "state machine at {} was handed {}",
                self.last_zxid(),
                p.zxid
            ));
        }
        self.items.push((p.zxid, p.data.clone()));
        Ok(())
    }

    /// Encoding of the first `upto` items.
    pub fn encode(&self, upto: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for (z, d) in self.items.iter().take(upto) {
            out.extend_from_slice(&z.0.to_le_bytes());
            out.extend_from_slice(&(d.len() as u32).to_le_bytes());
            out.extend_from_slice(d);
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
            let z = u64::from_le_bytes(take(&mut data, 8)?.try_into().map_err(|_| "zxid")?);
            let len = u32::from_le_bytes(take(&mut data, 4)?.try_into().map_err(|_| "len")?);
            items.push((Zxid(z), take(&mut data, len as usize)?));
        }
        Ok(Self { items })
    }
}
