//! Server resources during a run: every member process's CPU time, RSS and bytes written
//! to storage, sampled once a second (sysinfo) into resources.csv, and summarized for
//! summary.csv: the largest RSS any member reached and the servers' CPU time per operation
//! in the measured window.

use std::sync::mpsc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};

/// One reading of one member process.
#[derive(Debug, Clone, Serialize)]
pub struct Sample {
    /// Seconds since sampling began.
    pub t_s: f64,
    pub member: String,
    pub pid: u32,
    /// CPU time (user + system) the process has used since it started, seconds.
    pub cpu_s: f64,
    pub rss_bytes: u64,
    /// Bytes the process has caused to be written to storage since it started
    /// (/proc/PID/io write_bytes: 0 on tmpfs).
    pub disk_written_bytes: u64,
    #[serde(skip)]
    at: Instant,
}

/// What summary.csv and run.json report.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ResourceSummary {
    /// The largest RSS any one member reached, MiB.
    pub peak_rss_mb: Option<f64>,
    /// CPU seconds all members used during the measured window (interpolated between
    /// samples at the window's edges).
    pub cpu_s: Option<f64>,
    /// `cpu_s` per successful operation, µs.
    pub cpu_us_per_op: Option<f64>,
    /// Bytes all members caused to be written to storage during the window.
    pub disk_written_bytes: Option<u64>,
}

/// A background thread sampling the given processes until [`stop`](Self::stop).
pub struct Sampler {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<Vec<Sample>>,
}

impl Sampler {
    /// Starts sampling `members` (name, pid) every `every`, with a first sample at once.
    pub fn start(members: Vec<(String, u32)>, every: Duration) -> std::io::Result<Sampler> {
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = thread::Builder::new()
            .name("resource-sampler".into())
            .spawn(move || {
                let pids: Vec<Pid> = members.iter().map(|(_, p)| Pid::from_u32(*p)).collect();
                let mut system = System::new();
                let start = Instant::now();
                let mut samples = Vec::new();
                loop {
                    read(&mut system, &pids, &members, start, &mut samples);
                    match stopped.recv_timeout(every) {
                        Err(mpsc::RecvTimeoutError::Timeout) => continue,
                        // Stopped: one last reading so the window's end is covered.
                        _ => {
                            read(&mut system, &pids, &members, start, &mut samples);
                            return samples;
                        }
                    }
                }
            })?;
        Ok(Sampler { stop, thread })
    }

    /// Takes a last sample and returns them all.
    pub fn stop(self) -> Vec<Sample> {
        let _ = self.stop.send(());
        self.thread.join().unwrap_or_default()
    }
}

fn read(
    system: &mut System,
    pids: &[Pid],
    members: &[(String, u32)],
    start: Instant,
    out: &mut Vec<Sample>,
) {
    system.refresh_processes_specifics(
        ProcessesToUpdate::Some(pids),
        true,
        ProcessRefreshKind::nothing()
            .with_cpu()
            .with_memory()
            .with_disk_usage(),
    );
    let at = Instant::now();
    for ((name, pid), spid) in members.iter().zip(pids) {
        // A member that exited (or was killed on purpose) has no reading.
        if let Some(p) = system.process(*spid) {
            out.push(Sample {
                t_s: (at - start).as_secs_f64(),
                member: name.clone(),
                pid: *pid,
                cpu_s: p.accumulated_cpu_time() as f64 / 1000.0,
                rss_bytes: p.memory(),
                disk_written_bytes: p.disk_usage().total_written_bytes,
                at,
            });
        }
    }
}

/// Summarizes `samples` for the window [`from`, `to`] in which `ops` operations succeeded.
pub fn summarize(samples: &[Sample], from: Instant, to: Instant, ops: u64) -> ResourceSummary {
    if samples.is_empty() {
        return ResourceSummary::default();
    }
    let peak = samples.iter().map(|s| s.rss_bytes).max().unwrap_or(0);
    let mut pids: Vec<u32> = samples.iter().map(|s| s.pid).collect();
    pids.sort_unstable();
    pids.dedup();
    let (mut cpu, mut written) = (0.0, 0.0);
    for pid in pids {
        let mine: Vec<&Sample> = samples.iter().filter(|s| s.pid == pid).collect();
        let at = |t: Instant, f: &dyn Fn(&Sample) -> f64| {
            crate::cumulative::at(&mine, t, |s| s.at, |s| f(s))
        };
        cpu += at(to, &|s| s.cpu_s) - at(from, &|s| s.cpu_s);
        written +=
            at(to, &|s| s.disk_written_bytes as f64) - at(from, &|s| s.disk_written_bytes as f64);
    }
    ResourceSummary {
        peak_rss_mb: Some(peak as f64 / (1024.0 * 1024.0)),
        cpu_s: Some(cpu),
        cpu_us_per_op: (ops > 0).then(|| cpu * 1e6 / ops as f64),
        disk_written_bytes: Some(written.round() as u64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at: Instant, pid: u32, cpu_s: f64, rss: u64) -> Sample {
        Sample {
            t_s: 0.0,
            member: format!("m{pid}"),
            pid,
            cpu_s,
            rss_bytes: rss,
            disk_written_bytes: (cpu_s * 1000.0) as u64,
            at,
        }
    }

    #[test]
    fn cpu_in_the_window_is_interpolated_per_process_and_peak_rss_is_the_largest_member() {
        let t0 = Instant::now();
        let s = |secs: u64| t0 + Duration::from_secs(secs);
        let samples = [
            sample(s(0), 1, 0.0, 100 << 20),
            sample(s(0), 2, 10.0, 50 << 20),
            sample(s(2), 1, 2.0, 300 << 20),
            sample(s(2), 2, 14.0, 60 << 20),
        ];
        // Window [0.5 s, 1.5 s]: process 1 uses 1 s/s, process 2 uses 2 s/s.
        let sum = summarize(
            &samples,
            t0 + Duration::from_millis(500),
            t0 + Duration::from_millis(1500),
            1000,
        );
        let cpu = sum.cpu_s.unwrap();
        assert!((cpu - 3.0).abs() < 1e-9, "{cpu}");
        assert!((sum.cpu_us_per_op.unwrap() - 3000.0).abs() < 1e-6);
        assert_eq!(sum.peak_rss_mb, Some(300.0));
        assert_eq!(sum.disk_written_bytes, Some(3000));
        assert_eq!(summarize(&[], t0, t0, 1), ResourceSummary::default());
    }

    #[test]
    fn the_sampler_reads_a_live_process() {
        let me = std::process::id();
        let sampler = Sampler::start(vec![("self".into(), me)], Duration::from_millis(20)).unwrap();
        // Burn a little CPU so that the counter moves.
        let until = Instant::now() + Duration::from_millis(150);
        let mut x = 0u64;
        while Instant::now() < until {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let samples = sampler.stop();
        assert!(samples.len() >= 2, "{samples:?}");
        let (first, last) = (&samples[0], &samples[samples.len() - 1]);
        assert!(
            last.rss_bytes > 0 && last.cpu_s >= first.cpu_s,
            "{samples:?}"
        );
        assert!(last.cpu_s > 0.0);
    }
}
