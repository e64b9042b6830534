//! Server-side counters around a run, where the server exposes them: ZooKeeper's `mntr`
//! (packets received and sent, watches, outstanding requests, znodes, latency), scraped
//! from every member before and after the run. Client-side counters say what the clients
//! did; these say what the servers saw, which is where the herd effect costs.

use std::collections::BTreeMap;

use coordbench_drivers::zookeeper::four_letter::four_letter_word;
use coordbench_drivers::zookeeper::ZkTls;
use futures::future::join_all;
use serde::Serialize;

use coordbench_lab::provision::Cluster;
use coordbench_results::kinds::TargetKind;

/// One member's numeric `mntr` values at one moment.
pub type Metrics = BTreeMap<String, f64>;

/// What the servers reported around a run (setup and warm-up included).
#[derive(Debug, Clone, Serialize)]
pub struct ServerCounters {
    /// How the values were read, e.g. "zookeeper mntr".
    pub source: &'static str,
    /// Per member (by client address): after − before for every numeric key present both
    /// times. For gauges (watch count, znode count) that is their change over the run.
    pub delta: BTreeMap<String, Metrics>,
    /// Per member: the values after the run.
    pub after: BTreeMap<String, Metrics>,
}

impl ServerCounters {
    /// The sum over members of a key's delta.
    pub fn total_delta(&self, key: &str) -> Option<f64> {
        sum(self.delta.values(), key)
    }

    /// The sum over members of a key's value after the run.
    pub fn total_after(&self, key: &str) -> Option<f64> {
        sum(self.after.values(), key)
    }
}

fn sum<'a>(members: impl Iterator<Item = &'a Metrics>, key: &str) -> Option<f64> {
    members
        .filter_map(|m| m.get(key))
        .copied()
        .reduce(|a, b| a + b)
}

/// Reads every member's counters; `None` for targets without server counters. A member
/// that does not answer is left out (a run on a degraded cluster still reports the rest).
pub async fn scrape(
    target: TargetKind,
    cluster: &Cluster,
    tls: Option<&ZkTls>,
) -> Option<BTreeMap<String, Metrics>> {
    if !crate::targets::descriptor(target).server_counters {
        return None;
    }
    let addrs: Vec<String> = cluster
        .info()
        .members
        .iter()
        .map(|m| m.client_url.clone())
        .collect();
    let replies = join_all(addrs.iter().map(|a| four_letter_word(a, "mntr", tls))).await;
    let metrics: BTreeMap<String, Metrics> = addrs
        .into_iter()
        .zip(replies)
        .filter_map(|(addr, reply)| Some((addr, parse_mntr(&reply.ok()?))))
        .filter(|(_, m)| !m.is_empty())
        .collect();
    (!metrics.is_empty()).then_some(metrics)
}

/// The difference of two scrapes.
pub fn difference(
    before: BTreeMap<String, Metrics>,
    after: BTreeMap<String, Metrics>,
) -> ServerCounters {
    let delta = after
        .iter()
        .filter_map(|(member, a)| {
            let b = before.get(member)?;
            let d = a
                .iter()
                .filter_map(|(k, v)| Some((k.clone(), v - b.get(k)?)))
                .collect();
            Some((member.clone(), d))
        })
        .collect();
    ServerCounters {
        source: "zookeeper mntr",
        delta,
        after,
    }
}

/// `mntr` replies are `key<TAB>value` lines; non-numeric values (version, state) are skipped.
pub fn parse_mntr(reply: &str) -> Metrics {
    reply
        .lines()
        .filter_map(|line| {
            let (key, value) = line.split_once('\t')?;
            Some((key.trim().to_string(), value.trim().parse::<f64>().ok()?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mntr_values_are_parsed_and_differenced_per_member() {
        let before = parse_mntr("zk_version\t3.8.0\nzk_packets_received\t10\nzk_watch_count\t2\n");
        let after = parse_mntr(
            "zk_version\t3.8.0\nzk_packets_received\t25\nzk_watch_count\t5\nzk_new\t1\n",
        );
        assert_eq!(before.len(), 2, "non-numeric values are skipped");
        let counters = difference(
            BTreeMap::from([("a".to_string(), before.clone()), ("b".to_string(), before)]),
            BTreeMap::from([("a".to_string(), after.clone()), ("b".to_string(), after)]),
        );
        assert_eq!(counters.total_delta("zk_packets_received"), Some(30.0));
        assert_eq!(
            counters.total_delta("zk_new"),
            None,
            "a key missing before has no delta"
        );
        assert_eq!(counters.total_after("zk_watch_count"), Some(10.0));
    }
}
