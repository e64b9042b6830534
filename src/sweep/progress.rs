//! Sweep progress on stderr: an indicatif bar with ETA on a terminal, plain lines (with the
//! same ETA) otherwise, so logs of CI and `nohup` runs stay readable.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use coordbench_results::format::format_us;

pub struct Progress {
    bar: Option<ProgressBar>,
    /// Points this invocation runs (complete ones skipped on resume are not counted).
    total: usize,
    done: usize,
    started: Instant,
    /// What one point is expected to take before any has finished: warm-up + duration
    /// plus starting and stopping a cluster.
    guess: Duration,
}

/// Start-up and teardown of a cluster, added to a point's window for the first ETA.
const CLUSTER_OVERHEAD: Duration = Duration::from_secs(5);

impl Progress {
    pub fn new(total: usize, window: Duration) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total as u64);
            let style = ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} points  ETA {eta}  {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar());
            bar.set_style(style);
            bar.enable_steady_tick(Duration::from_millis(250));
            bar
        });
        Progress {
            bar,
            total,
            done: 0,
            started: Instant::now(),
            guess: window + CLUSTER_OVERHEAD,
        }
    }

    /// A line above the bar (or on its own).
    pub fn line(&self, text: &str) {
        match &self.bar {
            Some(bar) => bar.println(text),
            None => eprintln!("{text}"),
        }
    }

    pub fn begin(&self, label: &str) {
        match &self.bar {
            Some(bar) => bar.set_message(label.to_string()),
            None => eprintln!(
                "[{}/{}] {label} ... (ETA {})",
                self.done + 1,
                self.total,
                humantime::format_duration(round(self.eta()))
            ),
        }
    }

    pub fn end(&mut self, line: &str) {
        self.done += 1;
        self.line(line);
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    /// Time left for the points not yet finished, from the mean so far.
    fn eta(&self) -> Duration {
        let per_point = if self.done == 0 {
            self.guess
        } else {
            self.started.elapsed() / self.done as u32
        };
        per_point * (self.total - self.done) as u32
    }
}

fn round(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs())
}

/// The result line of a finished point: `etcd cluster_size=3 r1: 5120 ops/s, p99 3.1ms`.
pub fn point_line(
    label: &str,
    status: &str,
    throughput: Option<f64>,
    p99_us: Option<u64>,
) -> String {
    match throughput {
        Some(t) => format!(
            "{label}: {t:.0} ops/s, p99 {} ({status})",
            p99_us.map_or("-".into(), format_us)
        ),
        None => format!("{label}: {status}"),
    }
}
