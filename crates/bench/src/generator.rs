//! The load generator's own cost in every run: the CPU time (user + system) and resident
//! memory of this process over the measured window, per operation and as a share of the
//! cores it may use, and whether it was saturated. On a small machine the generator shares
//! the cores with the servers it started; a saturated generator understates the target.
//!
//! The whole process is the generator: its clients and drivers, the open-loop timer, and,
//! where a run emulates a network or disk, the in-process proxy and FUSE threads too.

use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde::Serialize;

/// How often the process's CPU time and RSS are read.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// Above this share of its cores the generator counts as saturated...
pub const SATURATED_UTIL: f64 = 0.85;
/// ...when it stays there for this long (the utilization is taken over a trailing window
/// of this length).
pub const SATURATED_FOR: Duration = Duration::from_secs(1);

/// The generator runtime's worker threads for a run, or `None` for one per core.
///
/// `--client-threads` decides; else one per CPU of `--pin-client`; else, when coordbench
/// starts the servers on this machine, half of its CPUs (at least one): the servers get
/// the rest, and fewer workers wake each other less (RESULTS.md, the generator's own cost:
/// one worker took 0.7–0.9× the CPU per op at the same throughput on 2 cores). Attached
/// clusters, the in-process null target, and runs whose members talk through the
/// generator's delay proxy leave it every core.
pub fn workers(
    client_threads: Option<u16>,
    pinned_cpus: Option<usize>,
    servers_local: bool,
    cpus: usize,
) -> Option<usize> {
    client_threads
        .map(usize::from)
        .or(pinned_cpus.map(|n| n.max(1)))
        .or(servers_local.then_some((cpus / 2).max(1)))
}

#[derive(Debug, Clone, Copy)]
struct Reading {
    at: Instant,
    cpu_s: f64,
    /// Of `cpu_s`, the open-loop timer's spinning.
    spin_s: f64,
    /// Time the process's threads waited for a CPU.
    wait_s: f64,
    rss_bytes: u64,
}

impl Reading {
    /// What saturation is judged on: the CPU used, less the timer's spinning, plus the
    /// time spent waiting for a CPU.
    fn demand_s(&self) -> f64 {
        self.cpu_s - self.spin_s + self.wait_s
    }
}

/// What run.json (`generator`) and summary.csv (`client_*`) report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct GeneratorUsage {
    /// CPU seconds this process used in the measured window.
    pub cpu_s: f64,
    /// `cpu_s` per successful operation, µs.
    pub cpu_us_per_op: Option<f64>,
    /// `cpu_s` over the window's length times `cores`: 0 to 1.
    pub cpu_util: f64,
    /// Of `cpu_s`, the time the open-loop timer spun through the last µs before start
    /// times (`runner::timer`): spent, but not a sign of saturation.
    pub timer_spin_s: f64,
    /// Seconds the generator's threads were runnable but waited for a CPU in the window.
    pub runqueue_wait_s: f64,
    /// CPUs the process may run on (after `--pin-client`).
    pub cores: usize,
    /// The largest resident set sampled during the run, MiB.
    pub peak_rss_mb: f64,
    /// Whether, over a trailing second, the generator's demand for CPU (the CPU it used,
    /// less the timer's spinning, plus the time its threads waited for a CPU) exceeded
    /// [`SATURATED_UTIL`] of its cores in the window: it was saturated, or starved by what
    /// shares its cores.
    pub generator_saturated: bool,
    /// Seconds of the window at which it did.
    pub saturated_s: f64,
    /// Whether its threads ran at a real-time priority (`--realtime`).
    #[serde(default)]
    pub realtime: bool,
}

/// A thread reading this process's usage until [`stop`](Self::stop).
pub struct GeneratorMonitor {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<Vec<Reading>>,
    cores: usize,
}

impl GeneratorMonitor {
    /// Starts reading; `cores` is how many CPUs the generator may use.
    pub fn start(cores: usize) -> std::io::Result<GeneratorMonitor> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = thread::Builder::new()
            .name("generator-usage".into())
            .spawn(move || {
                let mut readings = vec![read()];
                while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(SAMPLE_EVERY)
                {
                    readings.push(read());
                }
                readings.push(read());
                readings
            })?;
        Ok(GeneratorMonitor {
            stop,
            thread,
            cores: cores.max(1),
        })
    }

    /// Takes a last reading and summarizes the window [`from`, `to`] in which `ops`
    /// operations succeeded.
    pub fn stop(self, from: Instant, to: Instant, ops: u64) -> GeneratorUsage {
        let _ = self.stop.send(());
        let readings = self.thread.join().unwrap_or_default();
        summarize(&readings, from, to, ops, self.cores)
    }
}

fn read() -> Reading {
    let cpu_s = process_cpu_s();
    Reading {
        at: Instant::now(),
        cpu_s,
        spin_s: crate::runner::timer::spun_total().as_secs_f64(),
        wait_s: runqueue_wait_s(),
        rss_bytes: resident_bytes(),
    }
}

/// Time this process's living threads have spent runnable but waiting for a CPU
/// (/proc/self/task/*/schedstat, second field, ns): a generator that competes with the
/// servers for its cores is starved, not idle, even while its own CPU use is low.
fn runqueue_wait_s() -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    let waited_ns: u64 = tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("schedstat")).ok())
        .filter_map(|stat| stat.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum();
    waited_ns as f64 / 1e9
}

/// User + system CPU time of every thread of this process, living or ended.
fn process_cpu_s() -> f64 {
    // SAFETY: getrusage only writes the rusage it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0.0;
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}

/// This process's resident set now (/proc/self/statm's second field, in pages).
fn resident_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    pages * page
}

fn summarize(
    readings: &[Reading],
    from: Instant,
    to: Instant,
    ops: u64,
    cores: usize,
) -> GeneratorUsage {
    let window = to.saturating_duration_since(from).as_secs_f64();
    let in_window =
        |value: fn(&Reading) -> f64| (at(readings, to, value) - at(readings, from, value)).max(0.0);
    let cpu_s = in_window(|r| r.cpu_s);
    let cpu_util = if window > 0.0 {
        (cpu_s / (window * cores as f64)).min(1.0)
    } else {
        0.0
    };
    let saturated_s = saturated_seconds(readings, from, to, cores);
    GeneratorUsage {
        cpu_s,
        cpu_us_per_op: (ops > 0).then(|| cpu_s * 1e6 / ops as f64),
        cpu_util,
        timer_spin_s: in_window(|r| r.spin_s),
        runqueue_wait_s: in_window(|r| r.wait_s),
        cores,
        peak_rss_mb: readings.iter().map(|r| r.rss_bytes).max().unwrap_or(0) as f64
            / (1024.0 * 1024.0),
        generator_saturated: saturated_s > 0.0,
        saturated_s,
        realtime: coordbench_lab::affinity::realtime(),
    }
}

/// A cumulative reading at `t`.
fn at(readings: &[Reading], t: Instant, value: impl Fn(&Reading) -> f64) -> f64 {
    coordbench_lab::cumulative::at(readings, t, |r| r.at, value)
}

/// Seconds of [`from`, `to`] at whose end the demand over the trailing [`SATURATED_FOR`]
/// exceeded [`SATURATED_UTIL`] of `cores`.
fn saturated_seconds(readings: &[Reading], from: Instant, to: Instant, cores: usize) -> f64 {
    let start = from + SATURATED_FOR;
    readings
        .windows(2)
        .filter(|pair| pair[1].at >= start && pair[1].at <= to)
        .filter(|pair| {
            let end = pair[1].at;
            let used = pair[1].demand_s() - at(readings, end - SATURATED_FOR, Reading::demand_s);
            used / (SATURATED_FOR.as_secs_f64() * cores as f64) > SATURATED_UTIL
        })
        .map(|pair| (pair[1].at - pair[0].at).as_secs_f64())
        .sum::<f64>()
        .max(0.0) // an empty sum is -0.0
}

#[cfg(test)]
mod tests {
    #[test]
    fn local_servers_leave_the_generator_half_the_cpus() {
        use super::workers;
        assert_eq!(workers(None, None, true, 2), Some(1));
        assert_eq!(workers(None, None, true, 1), Some(1));
        assert_eq!(workers(None, None, true, 8), Some(4));
        assert_eq!(workers(None, None, false, 8), None);
        assert_eq!(workers(None, Some(3), true, 8), Some(3));
        assert_eq!(workers(Some(2), Some(3), true, 8), Some(2));
    }

    use super::*;

    fn readings(t0: Instant, cpu_per_step: &[f64]) -> Vec<Reading> {
        let mut cpu = 0.0;
        let mut out = vec![Reading {
            at: t0,
            cpu_s: 0.0,
            spin_s: 0.0,
            wait_s: 0.0,
            rss_bytes: 1 << 20,
        }];
        for (i, step) in cpu_per_step.iter().enumerate() {
            cpu += step;
            out.push(Reading {
                at: t0 + SAMPLE_EVERY * (i as u32 + 1),
                cpu_s: cpu,
                spin_s: 0.0,
                wait_s: 0.0,
                rss_bytes: (2 + i as u64) << 20,
            });
        }
        out
    }

    #[test]
    fn cpu_per_op_and_utilization_cover_the_window_only() {
        let t0 = Instant::now();
        // 0.05 s of CPU per 0.1 s on 2 cores: 25% utilization throughout.
        let r = readings(t0, &[0.05; 40]);
        let usage = summarize(
            &r,
            t0 + Duration::from_secs(1),
            t0 + Duration::from_secs(3),
            1000,
            2,
        );
        assert!((usage.cpu_s - 1.0).abs() < 1e-9, "{usage:?}");
        assert!((usage.cpu_us_per_op.unwrap() - 1000.0).abs() < 1e-6);
        assert!((usage.cpu_util - 0.25).abs() < 1e-9);
        assert!(!usage.generator_saturated);
        assert_eq!(usage.peak_rss_mb, 41.0);
    }

    #[test]
    fn a_second_above_the_threshold_is_saturation_a_short_burst_is_not() {
        let t0 = Instant::now();
        let end = t0 + Duration::from_secs(4);
        // One core, 0.5 s at 100% in the middle of idling: never a whole second.
        let mut burst = vec![0.01; 15];
        burst.extend([0.1; 5]);
        burst.extend([0.01; 20]);
        assert!(!summarize(&readings(t0, &burst), t0, end, 1, 1).generator_saturated);
        // 2 s at 95%: saturated for about the last second of it.
        let mut busy = vec![0.01; 10];
        busy.extend([0.095; 20]);
        busy.extend([0.01; 10]);
        let usage = summarize(&readings(t0, &busy), t0, end, 1, 1);
        assert!(usage.generator_saturated, "{usage:?}");
        assert!(
            usage.saturated_s > 0.5 && usage.saturated_s < 1.6,
            "{usage:?}"
        );
        // The same CPU spent spinning towards start times is not saturation...
        let mut spinning = readings(t0, &busy);
        spinning.iter_mut().for_each(|r| r.spin_s = r.cpu_s * 0.5);
        let usage = summarize(&spinning, t0, end, 1, 1);
        assert!(!usage.generator_saturated, "{usage:?}");
        assert!(usage.timer_spin_s > 1.0, "{usage:?}");
        // ...but waiting for a CPU the servers hold is: the generator is starved.
        let mut starved = readings(t0, &[0.03; 40]);
        starved.iter_mut().for_each(|r| r.wait_s = r.cpu_s * 2.5);
        let usage = summarize(&starved, t0, end, 1, 1);
        assert!(usage.generator_saturated, "{usage:?}");
        assert!(
            usage.cpu_util < 0.5 && usage.runqueue_wait_s > 2.0,
            "{usage:?}"
        );
    }

    #[test]
    fn the_monitor_reads_this_process() {
        let monitor = GeneratorMonitor::start(1).unwrap();
        let from = Instant::now();
        // Burn 0.2 s of CPU (bounded in time: the machine may be busy).
        let (start_cpu, give_up) = (process_cpu_s(), from + Duration::from_secs(10));
        let mut x = 0u64;
        while process_cpu_s() - start_cpu < 0.2 && Instant::now() < give_up {
            for _ in 0..10_000 {
                x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
            }
        }
        std::hint::black_box(x);
        let usage = monitor.stop(from, Instant::now(), 10);
        assert!(usage.cpu_s > 0.15, "{usage:?}");
        assert!(usage.peak_rss_mb > 0.0);
    }
}
