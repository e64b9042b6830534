//! One lease keep-alive stream per connection, shared by every session on it, as etcd's
//! clientv3 keeps all of a client's leases alive over one stream. A stream and a task per
//! lease held about 28 KB a session at 10,000 lock contenders (RESULTS.md, "Memory at
//! scale"); here a lease is an entry in one table.
//!
//! A task owns the stream. It refreshes each lease every `interval` (a third of its TTL),
//! reads every answer, and moves that lease's deadline to when the answered refresh was sent
//! plus the TTL the server gave. A lease counts as lost only when the server answers that it
//! is gone (TTL 0) or when its TTL has passed since the last acknowledged refresh, not when a
//! stream breaks: a broken or silent stream is reopened, through another member if need be,
//! or every leader failover would end every session. A frozen session's lease is not
//! refreshed ([`FreezeGate`]): a paused client sends nothing.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use etcd_client::{Client, LeaseKeepAliveStream, LeaseKeeper};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::{CounterHandle, FreezeGate};

/// How soon a lease is tried again when its stream broke, would not open, or its session
/// is frozen.
const RETRY: Duration = Duration::from_millis(200);
/// How soon a refresh is tried again when the stream's send queue is full.
const SEND_BACKOFF: Duration = Duration::from_millis(5);
/// The longest a stream may take to open before the member counts as unreachable for now.
const OPEN_TIMEOUT: Duration = Duration::from_secs(2);

/// A session's lease, handed to the connection's keep-alive task.
pub(super) struct KeptLease {
    pub id: i64,
    /// Between refreshes.
    pub interval: Duration,
    /// The TTL the server granted.
    pub ttl: Duration,
    /// Set when the lease is gone: the server said so, or its TTL passed unrefreshed.
    pub expired: Arc<AtomicBool>,
    pub freeze: FreezeGate,
    pub counters: CounterHandle,
}

enum Command {
    Keep(KeptLease),
    Stop(i64),
}

/// A connection's keep-alive task; clones share it. The task ends once every handle is
/// dropped.
#[derive(Clone)]
pub(super) struct LeaseMux {
    commands: mpsc::UnboundedSender<Command>,
}

impl LeaseMux {
    /// Starts the task for `client`'s connection; the stream opens with the first lease.
    pub fn start(client: Client) -> LeaseMux {
        let (commands, received) = mpsc::unbounded_channel();
        tokio::spawn(run(client, received));
        LeaseMux { commands }
    }

    /// Keeps `lease` alive until [`LeaseMux::stop`]. False if the task has ended.
    pub fn keep(&self, lease: KeptLease) -> bool {
        self.commands.send(Command::Keep(lease)).is_ok()
    }

    /// Stops refreshing lease `id` (the session revoked or abandoned it).
    pub fn stop(&self, id: i64) {
        let _ = self.commands.send(Command::Stop(id));
    }
}

/// A lease in the table.
struct Entry {
    lease: KeptLease,
    deadline: Instant,
    /// When the next refresh is due.
    due: Instant,
    /// When the refresh still awaiting its answer was sent.
    unanswered: Option<Instant>,
}

/// The leases and when each is due; a heap slot whose time is not its lease's `due` any
/// more (rescheduled or stopped) is skipped.
#[derive(Default)]
struct Table {
    entries: HashMap<i64, Entry>,
    schedule: BinaryHeap<Reverse<(Instant, i64)>>,
}

impl Table {
    fn keep(&mut self, lease: KeptLease, now: Instant) {
        let entry = Entry {
            deadline: now + lease.ttl,
            due: now + lease.interval,
            unanswered: None,
            lease,
        };
        self.schedule.push(Reverse((entry.due, entry.lease.id)));
        self.entries.insert(entry.lease.id, entry);
    }

    fn reschedule(&mut self, id: i64, due: Instant) {
        if let Some(entry) = self.entries.get_mut(&id) {
            entry.due = due;
            self.schedule.push(Reverse((due, id)));
        }
    }

    fn expire(&mut self, id: i64) {
        if let Some(entry) = self.entries.remove(&id) {
            entry.lease.expired.store(true, Ordering::Relaxed);
        }
    }

    /// When the earliest live slot is due, dropping stale slots on the way.
    fn next_due(&mut self) -> Option<Instant> {
        while let Some(Reverse((due, id))) = self.schedule.peek().copied() {
            if self.entries.get(&id).is_some_and(|e| e.due == due) {
                return Some(due);
            }
            self.schedule.pop();
        }
        None
    }

    /// A lease due by `now`, taken off the schedule.
    fn pop_due(&mut self, now: Instant) -> Option<i64> {
        let due = self.next_due()?;
        if due > now {
            return None;
        }
        self.schedule.pop().map(|Reverse((_, id))| id)
    }

    /// The server's answer for lease `id`: gone (TTL 0), or alive for `ttl` seconds from
    /// when the refresh was sent.
    fn answered(&mut self, id: i64, ttl: i64) {
        if ttl <= 0 {
            return self.expire(id);
        }
        if let Some(entry) = self.entries.get_mut(&id) {
            if let Some(sent) = entry.unanswered.take() {
                entry.lease.ttl = Duration::from_secs(ttl as u64);
                entry.deadline = sent + entry.lease.ttl;
            }
        }
    }

    /// The stream broke: refreshes awaiting an answer are lost, so those leases are tried
    /// again soon rather than an interval later.
    fn stream_lost(&mut self, now: Instant) {
        let lost: Vec<i64> = self
            .entries
            .iter_mut()
            .filter_map(|(id, e)| e.unanswered.take().map(|_| *id))
            .collect();
        for id in lost {
            self.reschedule(id, now + RETRY);
        }
    }
}

/// The open stream: the sender every refresh goes through, and the answers.
struct Stream {
    keeper: LeaseKeeper,
    answers: LeaseKeepAliveStream,
    /// When the last answer arrived (or the stream opened).
    heard: Instant,
}

async fn run(client: Client, mut commands: mpsc::UnboundedReceiver<Command>) {
    let mut table = Table::default();
    let mut stream: Option<Stream> = None;
    loop {
        let wake = table.next_due();
        tokio::select! {
            command = commands.recv() => match command {
                Some(Command::Keep(lease)) => table.keep(lease, Instant::now()),
                Some(Command::Stop(id)) => {
                    table.entries.remove(&id);
                }
                None => return,
            },
            answer = next_answer(&mut stream) => match answer {
                Some((id, ttl)) => table.answered(id, ttl),
                None => {
                    stream = None;
                    table.stream_lost(Instant::now());
                }
            },
            () = sleep_until(wake), if wake.is_some() => {
                refresh_due(&client, &mut table, &mut stream).await;
            }
        }
        // No lease left: the stream closes, as a server shutting down gracefully waits
        // for open streams to end.
        if table.entries.is_empty() {
            stream = None;
        }
    }
}

async fn sleep_until(wake: Option<Instant>) {
    if let Some(at) = wake {
        tokio::time::sleep_until(at).await;
    }
}

/// The next answer's lease and TTL; `None` when the stream broke. Never resolves without a
/// stream.
async fn next_answer(stream: &mut Option<Stream>) -> Option<(i64, i64)> {
    let Some(open) = stream.as_mut() else {
        return std::future::pending().await;
    };
    let answer = open.answers.message().await.ok().flatten()?;
    open.heard = Instant::now();
    Some((answer.id(), answer.ttl()))
}

/// Refreshes every lease that is due, opening the stream first if there is none.
async fn refresh_due(client: &Client, table: &mut Table, stream: &mut Option<Stream>) {
    let now = Instant::now();
    // After a failed open, the round's other leases wait for the next try rather than
    // each waiting out an open of its own.
    let mut unreachable = false;
    while let Some(id) = table.pop_due(now) {
        let Some(entry) = table.entries.get(&id) else {
            continue;
        };
        if now >= entry.deadline {
            table.expire(id);
            continue;
        }
        if entry.lease.freeze.is_frozen() {
            table.reschedule(id, now + RETRY);
            continue;
        }
        // A refresh unanswered for a whole interval with nothing heard since: the member
        // stopped answering (paused, partitioned) though the connection stands.
        if let (Some(sent), Some(open)) = (entry.unanswered, stream.as_ref()) {
            if open.heard < sent {
                *stream = None;
            }
        }
        let Some(open) = stream.as_mut() else {
            if unreachable {
                table.reschedule(id, now + RETRY);
                continue;
            }
            match open_with(client, table, id, now).await {
                Opened::Stream(opened) => *stream = Some(*opened),
                Opened::LeaseGone => table.expire(id),
                Opened::Failed => {
                    unreachable = true;
                    table.reschedule(id, now + RETRY);
                }
            }
            continue;
        };
        if open.keeper.sender.capacity() == 0 {
            table.reschedule(id, now + SEND_BACKOFF);
            continue;
        }
        let mut keeper = LeaseKeeper {
            id,
            sender: open.keeper.sender.clone(),
        };
        // Cannot wait: the queue has room and this task is its only sender.
        if keeper.keep_alive().await.is_err() {
            *stream = None;
            table.stream_lost(now);
            table.reschedule(id, now + RETRY);
            continue;
        }
        sent(table, id, now);
    }
}

fn sent(table: &mut Table, id: i64, now: Instant) {
    if let Some(entry) = table.entries.get_mut(&id) {
        entry.lease.counters.keepalive();
        entry.unanswered = Some(now);
        let due = now + entry.lease.interval;
        table.reschedule(id, due);
    }
}

enum Opened {
    Stream(Box<Stream>),
    /// The server answered the opening refresh: no such lease.
    LeaseGone,
    Failed,
}

/// Opens the stream with a refresh of lease `id`, which etcd-client sends and whose answer
/// it reads before returning.
async fn open_with(client: &Client, table: &mut Table, id: i64, now: Instant) -> Opened {
    let mut client = client.clone();
    let Some(entry) = table.entries.get_mut(&id) else {
        return Opened::Failed;
    };
    entry.lease.counters.keepalive();
    let bound = OPEN_TIMEOUT.min(entry.deadline.saturating_duration_since(now));
    match tokio::time::timeout(bound, client.lease_keep_alive(id)).await {
        Ok(Ok((keeper, answers))) => {
            entry.deadline = now + entry.lease.ttl;
            entry.unanswered = None;
            let due = now + entry.lease.interval;
            table.reschedule(id, due);
            Opened::Stream(Box::new(Stream {
                keeper,
                answers,
                heard: Instant::now(),
            }))
        }
        Ok(Err(etcd_client::Error::LeaseKeepAliveError(_))) => Opened::LeaseGone,
        _ => Opened::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(id: i64, ttl_s: u64) -> (KeptLease, Arc<AtomicBool>) {
        let expired = Arc::new(AtomicBool::new(false));
        let lease = KeptLease {
            id,
            interval: Duration::from_secs(ttl_s) / 3,
            ttl: Duration::from_secs(ttl_s),
            expired: expired.clone(),
            freeze: FreezeGate::default(),
            counters: CounterHandle::default(),
        };
        (lease, expired)
    }

    /// A table keeping a lease of each `(id, ttl in s)` from `now`, and their expiry flags.
    fn table(leases: &[(i64, u64)], now: Instant) -> (Table, Vec<Arc<AtomicBool>>) {
        let mut table = Table::default();
        let expired = leases
            .iter()
            .map(|&(id, ttl_s)| {
                let (kept, expired) = lease(id, ttl_s);
                table.keep(kept, now);
                expired
            })
            .collect();
        (table, expired)
    }

    #[test]
    fn leases_come_due_in_order_and_a_stopped_or_rescheduled_slot_is_skipped() {
        let now = Instant::now();
        let (mut table, _) = table(&[(1, 9), (2, 3), (3, 6)], now);
        table.entries.remove(&3);
        table.reschedule(2, now + Duration::from_secs(10));
        let later = now + Duration::from_secs(20);
        assert_eq!(table.pop_due(now), None);
        assert_eq!(table.pop_due(later), Some(1));
        assert_eq!(table.pop_due(later), Some(2));
        assert_eq!(table.pop_due(later), None);
    }

    #[test]
    fn an_answer_moves_the_deadline_from_the_send_and_ttl_zero_expires_the_lease() {
        let now = Instant::now();
        let (mut table, expired) = table(&[(1, 3), (2, 3)], now);
        let sent_at = now + Duration::from_secs(1);
        sent(&mut table, 1, sent_at);
        table.answered(1, 5);
        assert_eq!(table.entries[&1].deadline, sent_at + Duration::from_secs(5));
        // An answer with no refresh awaiting it (a duplicate) changes nothing.
        table.answered(1, 50);
        assert_eq!(table.entries[&1].deadline, sent_at + Duration::from_secs(5));
        table.answered(2, 0);
        assert!(expired[1].load(Ordering::Relaxed));
        assert!(!expired[0].load(Ordering::Relaxed));
        assert!(!table.entries.contains_key(&2));
    }

    #[test]
    fn a_lost_stream_brings_forward_only_the_leases_awaiting_an_answer() {
        let now = Instant::now();
        let (mut table, _) = table(&[(1, 30), (2, 30)], now);
        sent(&mut table, 1, now);
        table.stream_lost(now);
        assert_eq!(table.entries[&1].due, now + RETRY);
        assert_eq!(table.entries[&2].due, now + Duration::from_secs(10));
        assert_eq!(table.entries[&1].unanswered, None);
    }
}
