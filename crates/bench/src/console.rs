//! What a person sees: a live status line while a run goes on (only on a terminal) and a
//! short summary table at the end.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use crate::outputs::record::{LatencySummary, MeasuredResults};
use crate::outputs::RunRecord;
use crate::runner::Aggregator;
use coordbench_results::format::format_us;
use coordbench_results::{noise, tails};
use coordbench_workloads::checker::LockCheckSummary;

/// Prints the status line at most once per interval, overwriting itself.
pub struct StatusLine {
    enabled: bool,
    last_ops: u64,
    last_elapsed: Duration,
}

impl StatusLine {
    /// Enabled only when stderr is a terminal and the user did not ask for quiet.
    pub fn new(quiet: bool) -> Self {
        StatusLine {
            enabled: !quiet && std::io::stderr().is_terminal(),
            last_ops: 0,
            last_elapsed: Duration::ZERO,
        }
    }

    pub fn update(&mut self, elapsed: Duration, aggregator: &Aggregator) {
        if !self.enabled {
            return;
        }
        let (ops, errors) = aggregator.live_totals();
        let dt = elapsed.saturating_sub(self.last_elapsed).as_secs_f64();
        let rate = if dt > 0.0 {
            (ops - self.last_ops) as f64 / dt
        } else {
            0.0
        };
        self.last_ops = ops;
        self.last_elapsed = elapsed;
        // The successes so far: a lower bound of the sample p99 is read from.
        let p99 = if tails::supported(ops, 0.99) {
            aggregator.p99_so_far().map_or("-".into(), format_us)
        } else {
            tails::WITHHELD.into()
        };
        let phase = if elapsed.is_zero() {
            "warm-up"
        } else {
            "measuring"
        };
        eprint!(
            "\r\x1b[K{phase} {:>6.1}s  {:>10.0} ops/s  p99 {:>9}  errors {}",
            elapsed.as_secs_f64(),
            rate,
            p99,
            errors
        );
        let _ = std::io::stderr().flush();
    }

    pub fn clear(&self) {
        if self.enabled {
            eprint!("\r\x1b[K");
        }
    }
}

/// The latency rows of the end-of-run table: p50, p99 and p99.9 where the sample supports
/// them ([`tails::supported`]; "–" and the operations it would need where not), the
/// sample size beside the first, and the maximum.
/// A percentile that is one of the `timeouts` (recorded at the limit) is marked so.
pub fn latency_lines(latency: &LatencySummary, timeouts: u64) -> Vec<String> {
    let n = latency.count;
    let mut lines = Vec::new();
    for (label, p, value) in [
        ("p50", 0.5, latency.p50_us),
        ("p99", 0.99, latency.p99_us),
        ("p99.9", 0.999, latency.p999_us),
    ] {
        let Some(value) = value else {
            lines.push(format!("  {label:<14} {:>12}", "-"));
            continue;
        };
        let line = if tails::supported(n, p) {
            let size = if lines.is_empty() {
                format!("  {}", tails::n_label(n))
            } else {
                String::new()
            };
            let limit = if tails::at_timeout(n, timeouts, p) {
                "  (a timeout: the limit)"
            } else {
                ""
            };
            format!("  {label:<14} {:>12}{limit}{size}", format_us(value))
        } else {
            format!(
                "  {label:<14} {:>12}  {} (needs {})",
                tails::WITHHELD,
                tails::n_label(n),
                tails::thousands(tails::min_ops(p))
            )
        };
        lines.push(line);
    }
    let max = latency.max_us.map_or("-".into(), format_us);
    lines.push(format!("  {:<14} {:>12}", "max", max));
    lines
}

/// What the errors row adds when operations timed out: ` (3 timeouts at --op-timeout 5s)`.
pub fn timeouts_note(timeouts: u64, op_timeout_ms: u64) -> String {
    if timeouts == 0 {
        return String::new();
    }
    let plural = if timeouts == 1 { "" } else { "s" };
    let limit = if op_timeout_ms % 1000 == 0 {
        format!("{}s", op_timeout_ms / 1000)
    } else {
        format!("{op_timeout_ms}ms")
    };
    format!(" ({timeouts} timeout{plural} at --op-timeout {limit})")
}

/// A warning when the generator waited for a CPU beyond [`noise::CPU_WAIT_SHARE`] of the
/// window: its timings then include the wait.
pub fn cpu_wait_warning(record: &RunRecord) -> Option<String> {
    let wait = record.generator.as_ref()?.runqueue_wait_s;
    let window = record.results.as_ref()?.window_s;
    let share = noise::cpu_wait(wait, window)?;
    Some(format!(
        "  warning: noisy: the load generator waited for a CPU {wait:.2} s of the {window:.1} s window \
         ({:.0}% > {:.0}%); its latencies include the wait",
        share * 100.0,
        noise::CPU_WAIT_SHARE * 100.0
    ))
}

/// The lock rows of the end-of-run table: safety, handover, holder pauses.
fn print_lock(r: &MeasuredResults, lock: &LockCheckSummary) {
    let opt = |v: Option<u64>| v.map_or("-".into(), format_us);
    println!("  {:<14} {:>12}", "violations", r.violations);
    println!("  {:<14} {:>12}", "handover p99", opt(lock.handover_p99_us));
    if let Some(f) = &r.holder_pauses {
        println!("  {:<14} {:>12}", "protect", f.protect);
        println!("  {:<14} {:>12}", "paused", f.paused_sections);
        println!("  {:<14} {:>12}", "unsafe", f.unsafe_sections);
        println!("  {:<14} {:>12}", "stale accepted", f.stale_writes_accepted);
        println!("  {:<14} {:>12}", "stale rejected", f.stale_writes_rejected);
        if f.stale_writes_failed > 0 {
            println!("  {:<14} {:>12}", "stale failed", f.stale_writes_failed);
        }
        println!("  {:<14} {:>12}", "lost locks", f.lost_locks);
    }
    if r.session_reestablishments > 0 {
        println!(
            "  warning: {} sessions were silently re-established: locks may have been lost without the holder knowing",
            r.session_reestablishments
        );
    }
}

/// The end-of-run table, on stdout.
pub fn print_summary(record: &RunRecord, dir: &std::path::Path) {
    let c = &record.config;
    let status = if record.header.complete {
        "complete"
    } else {
        "INCOMPLETE"
    };
    println!(
        "{} {} ({}{}) — {status}",
        c.target,
        c.workload,
        c.mode,
        if c.recipe.is_empty() {
            String::new()
        } else {
            format!(", recipe {}", c.recipe)
        }
    );
    if let Some(r) = &record.results {
        let opt = |v: Option<u64>| v.map_or("-".into(), format_us);
        println!("  {:<14} {:>12}", "ops", r.ops);
        println!("  {:<14} {:>12.1}", "throughput/s", r.throughput_ops_s);
        for line in latency_lines(&r.latency, r.timeouts) {
            println!("{line}");
        }
        println!(
            "  {:<14} {:>12}{}",
            "errors",
            r.errors,
            timeouts_note(r.timeouts, c.op_timeout_ms)
        );
        if let Some(herd) = &r.herd {
            let f = |v: Option<f64>| v.map_or("-".into(), |v| format!("{v:.2}"));
            println!("  {:<14} {:>12}", "waiters", f(herd.waiters));
            println!(
                "  {:<14} {:>12}",
                "notif/release",
                f(herd.notifications_per_release)
            );
            println!(
                "  {:<14} {:>12}",
                "req/release",
                f(herd.requests_per_release)
            );
        }
        if let Some(e) = &r.election {
            println!("  {:<14} {:>12}", "split brains", e.split_brains);
            println!(
                "  {:<14} {:>12}",
                "handover p99",
                opt(e.handover.handover_p99_us)
            );
            println!("  {:<14} {:>12}", "observer p99", opt(e.observer_p99_us));
        }
        if let Some(d) = &r.discovery {
            println!(
                "  {:<14} {:>12}",
                "propagation p99",
                opt(d.propagation_p99_us)
            );
            println!("  {:<14} {:>12}", "unpropagated", d.unpropagated);
        }
        if let Some(w) = &r.config_watch {
            println!(
                "  {:<14} {:>12}",
                "last watcher p99",
                opt(w.notify_last_p99_us)
            );
            println!("  {:<14} {:>12}", "missed", w.missed_versions);
            println!("  {:<14} {:>12}", "coalesced", w.coalesced_versions);
        }
        if let Some(g) = &r.register {
            println!("  {:<14} {:>12}", "linearizable", g.linearizable);
            println!("  {:<14} {:>12}", "stale reads", g.stale_reads);
            println!("  {:<14} {:>12}", "indeterminate", g.indeterminate);
            if let Some(v) = &g.violation {
                println!("  violation: {}", v.why);
            }
            if let Some(reason) = &g.unknown_reason {
                println!("  unknown: {reason}");
            }
        }
        if let Some(lock) = &r.lock {
            print_lock(r, lock);
        }
    }
    if let Some(line) = cpu_wait_warning(record) {
        println!("{line}");
    }
    if let Some(error) = &record.header.error {
        println!("  error: {error}");
    }
    println!("  results in {}", dir.display());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn latency(count: u64) -> LatencySummary {
        LatencySummary {
            count,
            mean_us: Some(900.0),
            p50_us: Some(800),
            p90_us: Some(1_500),
            p99_us: Some(2_000),
            p999_us: Some(9_000),
            max_us: Some(50_000),
        }
    }

    #[test]
    fn tails_the_sample_cannot_support_are_withheld_with_the_count() {
        let lines = latency_lines(&latency(1_365), 0);
        assert_eq!(lines.len(), 4);
        assert!(
            lines[0].contains("800µs") && lines[0].ends_with("n=1,365"),
            "{lines:?}"
        );
        assert!(lines[1].contains("2.00ms"), "{lines:?}");
        assert!(!lines[2].contains("9.00ms"), "{lines:?}");
        assert!(
            lines[2].contains("– ") && lines[2].ends_with("n=1,365 (needs 10,000)"),
            "{lines:?}"
        );
        assert!(lines[3].contains("50.00ms"), "{lines:?}");
        let few = latency_lines(&latency(999), 0);
        let timed_out = latency_lines(&latency(1_000), 600);
        assert!(
            timed_out[0].contains("800µs  (a timeout: the limit)  n=1,000"),
            "{timed_out:?}"
        );
        assert!(
            timed_out[1].contains("(a timeout: the limit)"),
            "{timed_out:?}"
        );
        assert!(
            few[1].contains("(needs 1,000)") && !few[1].contains("2.00ms"),
            "{few:?}"
        );
    }

    #[test]
    fn the_errors_row_counts_timeouts_at_the_limit() {
        assert_eq!(timeouts_note(0, 5000), "");
        assert_eq!(timeouts_note(1, 5000), " (1 timeout at --op-timeout 5s)");
        assert_eq!(timeouts_note(7, 50), " (7 timeouts at --op-timeout 50ms)");
    }
}
