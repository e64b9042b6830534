//! What a person sees: a live status line while a run goes on (only on a terminal) and a
//! short summary table at the end.

use std::io::{IsTerminal, Write};
use std::time::Duration;

use crate::outputs::RunRecord;
use crate::runner::Aggregator;
use coordbench_results::format::format_us;

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
        let p99 = aggregator.p99_so_far().map_or("-".into(), format_us);
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
        println!("  {:<14} {:>12}", "p50", opt(r.latency.p50_us));
        println!("  {:<14} {:>12}", "p99", opt(r.latency.p99_us));
        println!("  {:<14} {:>12}", "p99.9", opt(r.latency.p999_us));
        println!("  {:<14} {:>12}", "max", opt(r.latency.max_us));
        println!("  {:<14} {:>12}", "errors", r.errors);
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
    }
    if let Some(error) = &record.header.error {
        println!("  error: {error}");
    }
    println!("  results in {}", dir.display());
}
