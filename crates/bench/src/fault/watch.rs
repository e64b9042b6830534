//! What the members' answers showed after a fault, poll by poll: when the fault showed
//! (effect), when a follower noticed its leader was gone (detect), and when a new leader
//! had a majority (new leader). docs/reference.md ("failover.csv columns") defines each.

use std::time::{Duration, Instant};

use super::injector::micros;
use super::leadership::{agreed_leader, MemberView, Role};
use super::record::FaultRecord;

/// The figures one fault's polls have shown so far.
#[derive(Debug, Clone)]
pub struct Watch {
    t_f: Instant,
    old_leader: usize,
    old_term: u64,
    /// Members that followed before the fault and can still answer during it: the ones
    /// whose answers can show detection. (A follower may show an older term than its
    /// leader's: etcd's Status gives the term of the last entry applied, ZooKeeper's `srvr`
    /// the epoch of the last transaction.)
    followers: Vec<usize>,
    /// Members the fault keeps from answering (killed, paused); none for a partition.
    silenced: Vec<usize>,
    effect: Option<Duration>,
    detect: Option<Duration>,
    new_leader: Option<(usize, u64, Duration)>,
}

impl Watch {
    /// `before`: every member's answer just before the fault (a healthy cluster).
    pub fn new(
        t_f: Instant,
        old_leader: usize,
        old_term: u64,
        before: &[Option<MemberView>],
        silenced: &[usize],
    ) -> Self {
        let followers = (0..before.len())
            .filter(|i| before[*i].is_some_and(|v| v.role == Role::Follower))
            .filter(|i| !silenced.contains(i))
            .collect();
        Watch {
            t_f,
            old_leader,
            old_term,
            followers,
            silenced: silenced.to_vec(),
            effect: None,
            detect: None,
            new_leader: None,
        }
    }

    /// Takes in one poll's answers, read at `at`.
    pub fn observe(&mut self, views: &[Option<MemberView>], at: Instant) {
        let since = at.saturating_duration_since(self.t_f);
        if self.detect.is_none()
            && self
                .followers
                .iter()
                .any(|&i| views[i].is_some_and(|v| self.left_old_leader(v)))
        {
            self.detect = Some(since);
        }
        if self.new_leader.is_none() {
            if let Some((leader, term)) =
                agreed_leader(views, views.len()).filter(|&(_, term)| term > self.old_term)
            {
                self.new_leader = Some((leader, term, since));
            }
        }
        if self.effect.is_none() && self.shows_effect(views) {
            self.effect = Some(since);
        }
    }

    /// A follower that no longer follows the old leader: electing, leading, or following
    /// at a higher term.
    fn left_old_leader(&self, v: MemberView) -> bool {
        v.role != Role::Follower || v.term > self.old_term
    }

    /// Killed or paused members: all of them silent. A partition: a follower noticed, the
    /// old leader stopped leading at its term, or a new leader took over.
    fn shows_effect(&self, views: &[Option<MemberView>]) -> bool {
        if !self.silenced.is_empty() {
            return self.silenced.iter().all(|&i| views[i].is_none());
        }
        let leading = MemberView {
            role: Role::Leader,
            term: self.old_term,
        };
        let stepped_down = views[self.old_leader].is_some_and(|v| v != leading);
        self.detect.is_some() || stepped_down || self.new_leader.is_some()
    }

    pub fn new_leader_found(&self) -> bool {
        self.new_leader.is_some()
    }

    /// Writes the figures into `record` (member names from `names`).
    pub fn fill(&self, record: &mut FaultRecord, names: &[String]) {
        record.effect_us = self.effect.map(micros);
        record.detect_us = self.detect.map(micros);
        if let Some((leader, term, at)) = self.new_leader {
            record.new_leader = Some(names[leader].clone());
            record.new_term = Some(term);
            record.new_leader_us = Some(micros(at));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(role: Role, term: u64) -> Option<MemberView> {
        Some(MemberView { role, term })
    }

    #[test]
    fn a_killed_leader_shows_silence_then_detection_then_a_new_leader() {
        use Role::*;
        let t_f = Instant::now();
        let before = [v(Leader, 2), v(Follower, 2), v(Follower, 2)];
        let mut w = Watch::new(t_f, 0, 2, &before, &[0]);
        let ms = |n| t_f + Duration::from_millis(n);
        w.observe(&before, ms(5));
        assert!(w.effect.is_none() && w.detect.is_none());
        w.observe(&[None, v(Follower, 2), v(Follower, 2)], ms(10));
        assert_eq!(w.effect, Some(Duration::from_millis(10)));
        w.observe(&[None, v(Electing, 3), v(Follower, 2)], ms(900));
        assert_eq!(w.detect, Some(Duration::from_millis(900)));
        assert!(!w.new_leader_found());
        w.observe(&[None, v(Leader, 3), v(Follower, 3)], ms(1000));
        assert_eq!(w.new_leader, Some((1, 3, Duration::from_millis(1000))));
    }

    #[test]
    fn a_partition_shows_when_the_isolated_leader_steps_down() {
        use Role::*;
        let t_f = Instant::now();
        let before = [v(Follower, 4), v(Leader, 4), v(Follower, 4)];
        let mut w = Watch::new(t_f, 1, 4, &before, &[]);
        w.observe(&before, t_f + Duration::from_millis(5));
        assert!(w.effect.is_none());
        w.observe(
            &[v(Follower, 4), v(Electing, 5), v(Follower, 4)],
            t_f + Duration::from_millis(1200),
        );
        assert_eq!(w.effect, Some(Duration::from_millis(1200)));
        assert!(w.detect.is_none(), "the followers still follow");
    }

    #[test]
    fn a_follower_catching_up_to_the_old_term_is_no_detection() {
        use Role::*;
        let t_f = Instant::now();
        let before = [v(Leader, 4), v(Follower, 4), v(Follower, 2)];
        let mut w = Watch::new(t_f, 0, 4, &before, &[]);
        let ms = |n| t_f + Duration::from_millis(n);
        w.observe(&[v(Leader, 4), v(Follower, 4), v(Follower, 4)], ms(5));
        assert!(w.detect.is_none() && w.effect.is_none());
        w.observe(&[v(Leader, 4), v(Follower, 4), v(Electing, 4)], ms(1250));
        assert_eq!(w.detect, Some(Duration::from_millis(1250)));
        assert_eq!(
            w.effect, w.detect,
            "a partitioned follower electing is the effect"
        );
    }

    #[test]
    fn a_follower_killed_is_no_detection() {
        use Role::*;
        let t_f = Instant::now();
        let before = [v(Leader, 2), v(Follower, 2), v(Follower, 2)];
        let mut w = Watch::new(t_f, 0, 2, &before, &[2]);
        w.observe(
            &[v(Leader, 2), v(Follower, 2), None],
            t_f + Duration::from_millis(5),
        );
        assert!(w.effect.is_some() && w.detect.is_none() && !w.new_leader_found());
    }
}
