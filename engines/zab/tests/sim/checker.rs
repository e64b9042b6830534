//! Global safety invariants of Zab, checked as the simulation runs:
//!
//! * integrity: every proposal any node holds or delivers was proposed by a
//!   leader, and a zxid names one command only (so no two leaders ever
//!   propose in the same epoch);
//! * prefix property: a zxid is always preceded by the same zxid, in every
//!   history that holds it;
//! * at most one established leader per epoch;
//! * agreement and total order: every node delivers a prefix of one global
//!   sequence with increasing zxids;
//! * primary order: within the global sequence, an epoch's proposals are
//!   delivered as (e, 1), (e, 2), ... with no gap;
//! * primary integrity / completeness: a proposal committed in epoch `e` is
//!   in the history of every leader established in a later epoch (checked
//!   when a leader is established and whenever a commit is observed);
//! * acknowledged proposals survive, and sync reads observe every commit
//!   made before them (checked by the cluster).

use std::collections::{BTreeMap, HashMap};

use coordbench_zab::{Proposal, RawNode, Zxid};

use super::state_machine::AppliedLog;

#[derive(Default)]
pub struct Checker {
    /// epoch -> the node established as its leader
    established: BTreeMap<u32, u64>,
    /// Every command any leader proposed.
    proposed: HashMap<Zxid, Vec<u8>>,
    /// zxid -> the zxid before it in the first history seen holding it.
    prev: HashMap<Zxid, Zxid>,
    /// Known committed (by a leader's commit point, or delivered anywhere):
    /// zxid -> (command, epoch of the leader that committed it).
    committed: BTreeMap<Zxid, (Vec<u8>, u32)>,
    /// Highest zxid known committed anywhere.
    pub committed_max: Zxid,
    /// (node, epoch) -> how far that leader's commits were recorded.
    leader_seen: HashMap<(u64, u32), Zxid>,
    /// The global delivery sequence: what the first node to deliver each
    /// position delivered.
    delivered: Vec<(Zxid, Vec<u8>)>,
    /// Proposals acknowledged to a client (delivered by the leader that
    /// accepted them).
    pub acked: Vec<(Zxid, Vec<u8>)>,
}

/// An established leader, as the checker sees it.
pub struct LeaderView<'a> {
    pub id: u64,
    pub epoch: u32,
    pub node: &'a RawNode,
}

fn holds(node: &RawNode, z: Zxid, data: &[u8]) -> bool {
    // Compacted proposals were delivered, so agreement covers them.
    z <= node.status().snapshot_zxid || node.proposal(z).is_some_and(|p| p.data == data)
}

impl Checker {
    pub fn epochs(&self) -> usize {
        self.established.len()
    }

    pub fn delivered_len(&self) -> usize {
        self.delivered.len()
    }

    pub fn on_propose(&mut self, node: u64, zxid: Zxid, data: &[u8]) -> Result<(), String> {
        match self.proposed.get(&zxid) {
            Some(d) if d != data => Err(format!(
                "integrity: node {node} proposed {data:?} at {zxid}, which already names {d:?}"
            )),
            Some(_) => Err(format!("node {node} proposed {zxid} twice")),
            None => {
                self.proposed.insert(zxid, data.to_vec());
                Ok(())
            }
        }
    }

    /// `entries` (from one Ready) entered a history where `prev` precedes the
    /// first of them.
    pub fn on_entries(
        &mut self,
        node: u64,
        prev: Zxid,
        entries: &[Proposal],
    ) -> Result<(), String> {
        let mut before = prev;
        for p in entries {
            match self.proposed.get(&p.zxid) {
                Some(d) if *d == p.data => {}
                other => {
                    return Err(format!(
                        "integrity: node {node} holds {} = {:?}, proposed {other:?}",
                        p.zxid, p.data
                    ))
                }
            }
            match self.prev.get(&p.zxid) {
                Some(&b) if b != before => {
                    return Err(format!(
                        "prefix property: node {node} holds {} after {before}, elsewhere after {b}",
                        p.zxid
                    ))
                }
                Some(_) => {}
                None => {
                    self.prev.insert(p.zxid, before);
                }
            }
            before = p.zxid;
        }
        Ok(())
    }

    /// `id` reports being the established leader of `epoch`.
    pub fn on_established(&mut self, id: u64, epoch: u32, node: &RawNode) -> Result<(), String> {
        match self.established.get(&epoch) {
            Some(&other) if other != id => {
                return Err(format!(
                    "nodes {other} and {id} both established epoch {epoch}"
                ))
            }
            Some(_) => return Ok(()),
            None => {
                self.established.insert(epoch, id);
            }
        }
        for (&z, (data, by)) in &self.committed {
            if *by < epoch && !holds(node, z, data) {
                return Err(format!(
                    "completeness: leader {id} established epoch {epoch} without {z} \
                     (committed in epoch {by}); holds {:?}",
                    node.proposal(z)
                ));
            }
        }
        Ok(())
    }

    fn record_committed(&mut self, z: Zxid, data: &[u8], epoch: u32) -> Result<(), String> {
        match self.committed.get(&z) {
            Some((d, _)) if d != data => {
                return Err(format!("agreement: {z} committed as {data:?} and as {d:?}"))
            }
            Some(_) => {}
            None => {
                self.committed.insert(z, (data.to_vec(), epoch));
            }
        }
        self.committed_max = self.committed_max.max(z);
        Ok(())
    }

    /// An established leader's commit point is `commit`.
    pub fn on_leader_commit(
        &mut self,
        view: &LeaderView<'_>,
        commit: Zxid,
        leaders: &[LeaderView<'_>],
    ) -> Result<(), String> {
        let seen = self
            .leader_seen
            .get(&(view.id, view.epoch))
            .copied()
            .unwrap_or(Zxid::ZERO);
        if commit <= seen {
            return Ok(());
        }
        let fresh: Vec<Proposal> = view
            .node
            .proposals()
            .iter()
            .filter(|p| p.zxid > seen && p.zxid <= commit)
            .cloned()
            .collect();
        for p in fresh {
            self.record_committed(p.zxid, &p.data, view.epoch)?;
            for l in leaders {
                if l.epoch > view.epoch && !holds(l.node, p.zxid, &p.data) {
                    return Err(format!(
                        "completeness: leader {} of epoch {} lacks {} committed by {} in epoch {}",
                        l.id, l.epoch, p.zxid, view.id, view.epoch
                    ));
                }
            }
        }
        self.leader_seen.insert((view.id, view.epoch), commit);
        Ok(())
    }

    fn check_delivered_at(
        &mut self,
        node: u64,
        k: usize,
        item: &(Zxid, Vec<u8>),
    ) -> Result<(), String> {
        match self.delivered.get(k) {
            Some(seen) if seen != item => Err(format!(
                "agreement: node {node} delivered {:?} at position {k}, another node {:?}",
                item, seen
            )),
            Some(_) => Ok(()),
            None if k == self.delivered.len() => {
                let (z, data) = item;
                if self.proposed.get(z) != Some(data) {
                    return Err(format!(
                        "integrity: node {node} delivered unproposed {item:?}"
                    ));
                }
                if let Some((pz, _)) = self.delivered.last() {
                    let ok = if z.epoch() == pz.epoch() {
                        z.counter() == pz.counter() + 1
                    } else {
                        z.epoch() > pz.epoch() && z.counter() == 1
                    };
                    if !ok {
                        return Err(format!(
                            "primary order: node {node} delivered {z} right after {pz}"
                        ));
                    }
                } else if z.counter() != 1 {
                    return Err(format!("primary order: first delivery is {z}"));
                }
                self.record_committed(*z, data, z.epoch())?;
                self.delivered.push(item.clone());
                Ok(())
            }
            None => Err(format!(
                "node {node} delivered position {k} before anyone delivered {}",
                self.delivered.len()
            )),
        }
    }

    pub fn on_apply(&mut self, node: u64, sm: &AppliedLog) -> Result<(), String> {
        if let Some(item) = sm.items.last() {
            self.check_delivered_at(node, sm.len() - 1, &item.clone())?;
        }
        Ok(())
    }

    /// A node installed (or restarted from) a snapshot state machine.
    pub fn on_restore(&mut self, node: u64, sm: &AppliedLog) -> Result<(), String> {
        for (k, item) in sm.items.iter().enumerate() {
            self.check_delivered_at(node, k, item)?;
        }
        Ok(())
    }

    pub fn ack(&mut self, zxid: Zxid, data: Vec<u8>) {
        self.acked.push((zxid, data));
    }

    /// Every acknowledged proposal is delivered by `node`.
    pub fn check_acked(&self, node: u64, sm: &AppliedLog) -> Result<(), String> {
        for (z, data) in &self.acked {
            let k = sm.items.partition_point(|(x, _)| x < z);
            match sm.items.get(k) {
                Some((x, d)) if x == z && d == data => {}
                other => {
                    return Err(format!(
                    "acknowledged proposal lost: node {node} has {other:?} for {z}, acked {data:?}"
                ))
                }
            }
        }
        Ok(())
    }
}
