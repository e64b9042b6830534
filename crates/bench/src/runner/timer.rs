//! A high-resolution timer for open-loop starts. tokio's timer wheel rounds every sleep up
//! to its 1 ms tick, which would add up to a millisecond of the generator's own delay to
//! every open-loop latency. This timer keeps the pending deadlines in a heap and one Linux
//! timerfd, registered with the runtime's own epoll, armed [`SPIN`] before the earliest:
//! the worker that waits in epoll is woken by the kernel's hrtimer, with no thread of its
//! own and no hop between threads. Through the last [`SPIN`] before a deadline the timer's
//! task spins by yielding, so the generator spins only when a start is that close and
//! parks in epoll otherwise. A real-time generator (`--realtime`) never spins
//! ([`REALTIME_SPIN`]): its parked worker is woken within microseconds, and spinning at
//! high rates kept its core busy until the kernel throttled real-time threads.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;
use tokio::sync::Notify;

/// Within this of the next deadline the timer spins instead of parking. Parking and being
/// woken costs a worker more CPU than spinning this long (a VM exit each way), and its
/// wake-up latency, tens of µs on a busy VM, is what this timer exists to avoid.
const SPIN: Duration = Duration::from_micros(30);

/// The spin window of a generator whose threads run real-time. The kernel wakes a
/// real-time thread parked in epoll within microseconds, so spinning buys little; and
/// at 100,000 starts a second the 30 µs window covers every gap, so the timer never parked,
/// the core stayed busy, and the kernel's real-time throttling (by default, real-time
/// threads get at most 0.95 s of every second) stalled the generator for 50 ms at a time:
/// a p99 of 40–48 ms (RESULTS.md, "Pacing beside a CPU hog").
const REALTIME_SPIN: Duration = Duration::ZERO;

struct Entry {
    at: Instant,
    /// Tie-breaker so the heap never compares wakers.
    seq: u64,
    waker: Waker,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

struct Shared {
    pending: Mutex<BinaryHeap<Reverse<Entry>>>,
    /// A deadline earlier than any pending was added: the timerfd must be re-armed.
    earlier: Notify,
    seq: AtomicU64,
    stopped: AtomicBool,
}

/// Time every timer of this process has spent spinning towards deadlines, ns: CPU the
/// generator used while it had nothing to do but wait (see `generator`).
static SPUN_NS: AtomicU64 = AtomicU64::new(0);

/// [`SPUN_NS`] so far.
pub fn spun_total() -> Duration {
    Duration::from_nanos(SPUN_NS.load(Ordering::Relaxed))
}

impl Shared {
    fn pending(&self) -> MutexGuard<'_, BinaryHeap<Reverse<Entry>>> {
        // A panic while holding the lock leaves a valid heap; keep going.
        self.pending.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Wakes every entry due by `now`; whether there was one, and the next deadline.
    fn fire(&self, now: Instant) -> (bool, Option<Instant>) {
        let mut due = Vec::new();
        let mut pending = self.pending();
        while pending.peek().is_some_and(|Reverse(e)| e.at <= now) {
            if let Some(Reverse(entry)) = pending.pop() {
                due.push(entry.waker);
            }
        }
        let next = pending.peek().map(|Reverse(e)| e.at);
        drop(pending);
        let fired = !due.is_empty();
        due.into_iter().for_each(Waker::wake);
        (fired, next)
    }

    fn stop(&self) {
        self.stopped.store(true, Ordering::Release);
        let rest: Vec<_> = self.pending().drain().collect();
        rest.into_iter().for_each(|Reverse(e)| e.waker.wake());
    }
}

/// The timer of one run. Must be created inside a tokio runtime with IO enabled; dropping
/// it ends the task that drives it and ends every sleep still waiting.
pub struct PreciseTimer {
    shared: Arc<Shared>,
    driver: tokio::task::JoinHandle<()>,
}

impl PreciseTimer {
    pub fn start() -> std::io::Result<PreciseTimer> {
        // SAFETY: TimerFd owns its fd for its whole life and always returns the same one.
        let fd = unsafe { AsyncFd::register_with_interest(TimerFd::new()?, Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        let shared = Arc::new(Shared {
            pending: Mutex::new(BinaryHeap::new()),
            earlier: Notify::new(),
            seq: AtomicU64::new(0),
            stopped: AtomicBool::new(false),
        });
        let spin = match coordbench_lab::affinity::realtime() {
            true => REALTIME_SPIN,
            false => SPIN,
        };
        let driver = tokio::spawn(drive(shared.clone(), fd, spin));
        Ok(PreciseTimer { shared, driver })
    }

    /// A future that completes at `at` (at once if it has passed).
    pub fn sleep_until(&self, at: Instant) -> PreciseSleep {
        PreciseSleep {
            at,
            shared: self.shared.clone(),
            registered: false,
        }
    }
}

impl Drop for PreciseTimer {
    fn drop(&mut self) {
        self.driver.abort();
        self.shared.stop();
    }
}

/// See [`PreciseTimer::sleep_until`].
pub struct PreciseSleep {
    at: Instant,
    shared: Arc<Shared>,
    registered: bool,
}

impl Future for PreciseSleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.at || self.shared.stopped.load(Ordering::Acquire) {
            return Poll::Ready(());
        }
        // Polled again before the deadline (a sibling branch of a select woke the task):
        // the entry already registered still wakes this task.
        if !self.registered {
            self.registered = true;
            let entry = Entry {
                at: self.at,
                seq: self.shared.seq.fetch_add(1, Ordering::Relaxed),
                waker: cx.waker().clone(),
            };
            let mut pending = self.shared.pending();
            let earliest = pending.peek().is_none_or(|Reverse(e)| entry.at < e.at);
            pending.push(Reverse(entry));
            drop(pending);
            // Only a new earliest deadline changes when the timerfd must fire.
            if earliest {
                self.shared.earlier.notify_one();
            }
        }
        Poll::Pending
    }
}

/// The task that fires deadlines. It wakes what is due and yields so the woken clients
/// run; within `spin` of the next deadline it keeps yielding (the worker runs other tasks
/// and polls its epoll in between); further off it arms the timerfd `spin` early and
/// parks in epoll until it fires or an earlier deadline arrives.
async fn drive(shared: Arc<Shared>, fd: AsyncFd<TimerFd>, spin: Duration) {
    let mut now = Instant::now();
    loop {
        let (fired, next) = shared.fire(now);
        let Some(at) = next else {
            if fired {
                tokio::task::yield_now().await;
            } else {
                shared.earlier.notified().await;
            }
            now = Instant::now();
            continue;
        };
        let left = at.saturating_duration_since(now);
        if fired || left <= spin {
            tokio::task::yield_now().await;
            let after = Instant::now();
            if !fired {
                SPUN_NS.fetch_add((after - now).as_nanos() as u64, Ordering::Relaxed);
            }
            now = after;
            continue;
        }
        if fd.get_ref().arm(left - spin).is_err() {
            // Cannot happen for a valid timerfd; fall back to tokio's coarse timer.
            tokio::time::sleep(left - spin).await;
        } else {
            tokio::select! {
                ready = fd.readable() => {
                    if let Ok(mut guard) = ready {
                        guard.get_inner().consume();
                        guard.clear_ready();
                    }
                }
                _ = shared.earlier.notified() => {}
            }
        }
        now = Instant::now();
    }
}

/// A CLOCK_MONOTONIC timerfd (the clock `Instant` reads), non-blocking.
struct TimerFd(OwnedFd);

impl TimerFd {
    fn new() -> std::io::Result<TimerFd> {
        // SAFETY: timerfd_create has no memory preconditions; a valid fd is owned below.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd was just created and is owned by nobody else.
        Ok(TimerFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Fires once, `after` from now.
    fn arm(&self, after: Duration) -> std::io::Result<()> {
        let after = after.max(Duration::from_nanos(1)); // zero would disarm it
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs() as libc::time_t,
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: spec is a valid itimerspec; the old value is not asked for.
        let r =
            unsafe { libc::timerfd_settime(self.0.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// Reads the expiration count so the fd stops being readable.
    fn consume(&self) {
        let mut count = 0u64;
        // SAFETY: reads 8 bytes into a u64; EAGAIN (not expired) is fine.
        unsafe {
            libc::read(
                self.0.as_raw_fd(),
                (&mut count as *mut u64).cast(),
                std::mem::size_of::<u64>(),
            )
        };
    }
}

impl AsRawFd for TimerFd {
    fn as_raw_fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sleeps_end_at_their_deadlines_not_before() {
        let timer = PreciseTimer::start().unwrap();
        let base = Instant::now() + Duration::from_millis(5);
        let deadlines: Vec<_> = (0..50)
            .rev()
            .map(|i| base + Duration::from_micros(200 * i))
            .collect();
        let woke = futures::future::join_all(deadlines.iter().map(|&at| {
            let sleep = timer.sleep_until(at);
            async move {
                sleep.await;
                Instant::now()
            }
        }))
        .await;
        for (at, woke) in deadlines.iter().zip(&woke) {
            assert!(woke >= at, "a sleep ended before its deadline");
        }
    }

    #[tokio::test]
    async fn a_passed_deadline_is_ready_at_once_and_drop_ends_waiting_sleeps() {
        let timer = PreciseTimer::start().unwrap();
        timer.sleep_until(Instant::now()).await;
        let far = timer.sleep_until(Instant::now() + Duration::from_secs(3600));
        let waiter = tokio::spawn(far);
        tokio::time::sleep(Duration::from_millis(10)).await;
        drop(timer);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .expect("dropping the timer ends its sleeps")
            .unwrap();
    }
}
