//! `coordbench capacity --slo 'p99<10ms' [--slo 'errors<0.1%'] [run options]`: the highest
//! open-loop `--rate` at which a whole window meets every objective, found on one cluster
//! ([`search`]: grow, bisect, confirm with a longer window), each window run through the
//! same path as `coordbench run` ([`coordbench_bench::run::measure`]) into its own directory
//! ([`probe`]), the fresh-cluster rule applied between windows ([`settle`]), and
//! capacity.json and summary.csv written ([`output`]). A sweep runs the same search per
//! point when its spec has a `[capacity]` table ([`search_into`]).

pub mod output;
pub mod probe;
pub mod search;
pub mod settle;

use std::path::Path;
use std::time::Duration;

use clap::{ArgMatches, Args, FromArgMatches};
use tokio_util::sync::CancellationToken;

use coordbench_analysis::slo::{self, Slo};
use coordbench_bench::args::RunArgs;
use coordbench_bench::config::RunConfig;
use coordbench_bench::outputs::RunRecord;
use coordbench_bench::run::{self as bench, Console, Started, Window};
use coordbench_results::kinds::value_name;
use coordbench_results::outcome::{Outcome, UsageError};
use coordbench_results::record::{EndReason, RecordHeader};
use coordbench_results::schema::RUN_SCHEMA;
use output::{answer_line, probe_line, AtMaxRate, CapacityRecord};
use probe::Probe;
use search::{Search, SearchPlan, Step};
use settle::Next;

/// The search's own options.
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Capacity search")]
pub struct SearchArgs {
    /// An objective every window must meet: p50|p90|p99|p99.9|max < or <= a latency
    /// (`p99<10ms`), or errors below a percentage (`errors<0.1%`); repeatable.
    /// config-watch: the notification latency to the last watcher (p50, p99, max).
    #[arg(long = "slo", value_name = "OBJECTIVE", required = true, value_parser = slo::parse_arg)]
    pub slos: Vec<Slo>,

    /// The first rate probed (default: 500; lock and config-watch: 10).
    #[arg(long, value_parser = coordbench_results::parse::parse_rate)]
    pub start_rate: Option<f64>,

    /// The highest rate probed.
    #[arg(long, default_value_t = 1_000_000.0, value_parser = coordbench_results::parse::parse_rate)]
    pub max_rate: f64,

    /// Bisect until the lowest failing rate is within this of the highest passing one.
    #[arg(long, default_value = "5%", value_parser = parse_precision)]
    pub precision: f64,

    /// The confirming window at the answer (search windows last --duration).
    #[arg(long, default_value = "20s", value_parser = coordbench_results::parse::parse_duration)]
    pub confirm_duration: Duration,

    /// Warm-up of a window on a freshly started cluster (other windows warm up for
    /// --warmup): a JVM's just-started servers run slow until their code is compiled.
    #[arg(long, default_value = "5s", value_parser = coordbench_results::parse::parse_duration)]
    pub fresh_warmup: Duration,
}

/// `coordbench capacity`: the search's options and every `coordbench run` option, with
/// defaults suited to a search (64 clients, 5 s windows).
#[derive(Debug, Clone)]
pub struct CapacityArgs {
    pub search: SearchArgs,
    pub run: RunArgs,
}

/// Search windows: long enough for a p99.9 and a backlog to show, short enough for a
/// search of a dozen windows to take a few minutes.
const PROBE_WINDOW: &str = "5s";
/// `run` options a search cannot take ([`check`] refuses them in one line).
const REFUSED_RUN_OPTIONS: [&str; 5] = ["rate", "ops", "fault", "fault_every", "fault_duration"];
/// Open-loop clients: enough in flight for tens of thousands of ops/s at a few ms each.
const CLIENTS: &str = "64";

impl Args for CapacityArgs {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        // The search's options first, so `capacity --help` opens with --slo.
        let cmd = RunArgs::augment_args(SearchArgs::augment_args(cmd))
            .mut_arg("duration", |a| a.default_value(PROBE_WINDOW))
            .mut_arg("clients", |a| a.default_value(CLIENTS));
        // Still parsed, so that [`check`] says why each is refused, but not offered.
        REFUSED_RUN_OPTIONS
            .iter()
            .fold(cmd, |cmd, id| cmd.mut_arg(*id, |a| a.hide(true)))
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        Self::augment_args(cmd)
    }
}

impl FromArgMatches for CapacityArgs {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        Ok(CapacityArgs {
            search: SearchArgs::from_arg_matches(m)?,
            run: RunArgs::from_arg_matches(m)?,
        })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

fn parse_precision(s: &str) -> Result<f64, String> {
    let number = s.strip_suffix('%').unwrap_or(s);
    match number.trim().parse::<f64>() {
        Ok(p) if (0.1..=50.0).contains(&p) => Ok(p / 100.0),
        _ => Err("must be a percentage between 0.1% and 50%, e.g. 5%".into()),
    }
}

/// Growth factor until the first failed window.
const GROWTH: f64 = 2.0;
/// Confirming windows at most: the first, and after it fails, those of the search that
/// goes on with confirming windows only ([`search`]).
const CONFIRMATIONS: usize = 6;

pub async fn run(args: CapacityArgs) -> Result<Outcome, UsageError> {
    let unit = check(&args.run)?;
    let config = RunConfig::from_args(&args.run)?;
    let stop = coordbench_lab::signals::stop_on_signals()?;
    let out = match &args.run.generator.out {
        Some(out) => out.clone(),
        None => coordbench_results::time::default_out_dir(
            &format!("capacity-{}", value_name(config.target)),
            &value_name(config.workload),
        ),
    };
    let out = bench::results_dir(Some(&out), &config)?;
    let search = Searching {
        options: &args.search,
        config: &config,
        out: &out,
        stop: &stop,
        unit,
        console: if args.run.generator.quiet {
            Console::Silent
        } else {
            Console::Full
        },
    };
    let (outcome, record) = search_into(&search).await?;
    println!("{}", answer_line(&record));
    println!(
        "capacity: {} and {}",
        out.join("capacity.json").display(),
        out.join("summary.csv").display()
    );
    Ok(outcome)
}

/// Refuses what a search cannot do, in one line; the rate's unit.
pub fn check(args: &RunArgs) -> Result<&'static str, UsageError> {
    let Some(unit) = probe::rate_unit(args.load.workload) else {
        return Err(UsageError(
            "capacity needs a workload with a rate: --workload kv-put, kv-get, kv-mixed, lock or config-watch".into(),
        ));
    };
    let refused = [
        (
            args.load.rate.is_some(),
            "--rate (the search sets it; use --start-rate and --max-rate)",
        ),
        (
            args.load.ops.is_some(),
            "--ops (every window lasts --duration)",
        ),
        (
            !args.faults.fault.is_empty(),
            "--fault (a window with faults measures failover, not capacity)",
        ),
    ];
    match refused.into_iter().find(|(given, _)| *given) {
        Some((_, what)) => Err(UsageError(format!("capacity cannot take {what}; omit it"))),
        None => Ok(unit),
    }
}

/// One search: where it writes, and what stops it.
pub struct Searching<'a> {
    pub options: &'a SearchArgs,
    pub config: &'a RunConfig,
    pub out: &'a Path,
    pub stop: &'a CancellationToken,
    pub unit: &'static str,
    /// Full: a line per window and the preload's progress bar.
    pub console: Console,
}

/// The cluster the windows run on, and the record of its start.
struct Live {
    started: Started,
    record: RunRecord,
}

/// Runs a search into `s.out`: capacity.json after every window, summary.csv at the end.
pub async fn search_into(s: &Searching<'_>) -> Result<(Outcome, CapacityRecord), UsageError> {
    let workload = s.config.workload;
    let default_start = if probe::rate_unit(workload) == Some("ops/s") {
        500.0
    } else {
        10.0
    };
    let mut search = Search::new(SearchPlan {
        start_rate: s.options.start_rate.unwrap_or(default_start),
        max_rate: s.options.max_rate,
        growth: GROWTH,
        precision: s.options.precision,
        confirmations: CONFIRMATIONS,
    });
    let mut record = CapacityRecord::new(
        s.config,
        &s.options.slos,
        s.unit,
        coordbench_results::time::now_rfc3339(),
    );
    let mut live: Option<Live> = None;
    let mut next = Next::Fresh;
    let outcome = loop {
        let (rate, duration, kind) = match search.next() {
            Step::Probe(r) => (r, s.config.plan.duration, "search"),
            Step::Confirm(r) => (r, s.options.confirm_duration, "confirm"),
            Step::Done(answer) => {
                record.max_rate_ops_s = answer;
                break Outcome::Complete;
            }
        };
        let fresh = match prepare(s, &mut live, next).await {
            Ok(Some(fresh)) => fresh,
            Ok(None) => break Outcome::Interrupted,
            // The first cluster not starting is the environment's problem (exit 2); a
            // later one fails a search that has measured windows.
            Err(e) if record.probes.is_empty() => {
                record.header.error = Some(e.0.clone());
                record.write_json(s.out)?;
                return Err(e);
            }
            Err(e) => {
                record.header.error = Some(e.0.clone());
                break Outcome::Failed;
            }
        };
        let Some(cluster) = live.as_mut() else {
            break Outcome::Failed;
        };
        let index = record.probes.len() + 1;
        let (probe, window) = run_probe(s, cluster, index, (rate, duration, kind), fresh).await?;
        if s.console == Console::Full {
            println!("{}", probe_line(index, &probe, s.unit));
        }
        if window.header.end_reason == EndReason::Interrupted {
            record.probes.push(probe);
            break Outcome::Interrupted;
        }
        next = settle::after(probe.passed, &window);
        let failed = probe.limited_by;
        if kind == "confirm" {
            if failed.is_none() {
                record.at_max_rate = Some(AtMaxRate::of(&probe, &window));
            }
            search.confirmed(rate, failed);
        } else {
            search.probed(rate, failed);
        }
        record.probes.push(probe);
        record.limited_by = search.limited_by();
        record.write_json(s.out)?;
    };
    if let Some(cluster) = live.take() {
        cluster.started.stop().await;
    }
    record.limited_by = search.limited_by();
    record.note_unconfirmed();
    record.end(outcome);
    record.write_json(s.out)?;
    record.write_summary(s.out)?;
    Ok((outcome, record))
}

/// Makes the cluster ready for the next window as the rule says; whether it is fresh.
/// `None` when interrupted.
async fn prepare(
    s: &Searching<'_>,
    live: &mut Option<Live>,
    next: Next,
) -> Result<Option<bool>, UsageError> {
    if next == Next::Continue && live.is_some() {
        return Ok(Some(false));
    }
    // An attached cluster cannot be replaced: the next window runs on it as it is.
    if live.is_some() && s.config.attached() {
        return Ok(Some(false));
    }
    if let Some(old) = live.take() {
        old.started.stop().await;
    }
    let mut record = bench::new_record(s.config);
    let window = Window {
        config: s.config,
        out: s.out,
        stop: s.stop,
        quiet: s.console != Console::Full,
        console: s.console,
    };
    match bench::start(&window, &mut record).await? {
        Some(started) => {
            *live = Some(Live { started, record });
            Ok(Some(true))
        }
        None => Ok(None),
    }
}

/// One window at `rate` for `duration` into its own directory; its probe entry and record.
async fn run_probe(
    s: &Searching<'_>,
    cluster: &mut Live,
    index: usize,
    (rate, duration, kind): (f64, Duration, &'static str),
    fresh: bool,
) -> Result<(Probe, RunRecord), UsageError> {
    let mut config = probe::at_rate(s.config, rate, duration);
    if fresh {
        probe::warm_up_for(&mut config, s.options.fresh_warmup);
    }
    let name = probe::dir_name(index, rate);
    let dir = bench::results_dir(Some(&s.out.join(&name)), &config)?;
    let mut record = cluster.record.clone();
    record.config = config.record();
    record.header = RecordHeader::begin(RUN_SCHEMA, coordbench_results::time::now_rfc3339());
    let window = Window {
        config: &config,
        out: &dir,
        stop: s.stop,
        quiet: true,
        console: Console::Silent,
    };
    let (_, record) = bench::measure(&window, &mut cluster.started.target, record).await?;
    let (failed, limited_by) = probe::verdict(&s.options.slos, &record, rate);
    let probe = Probe {
        kind,
        rate,
        duration_s: duration.as_secs_f64(),
        passed: failed.is_empty(),
        failed,
        limited_by,
        throughput_ops_s: record.results.as_ref().map_or(0.0, |r| r.throughput_ops_s),
        figures: probe::figures(&record),
        generator_saturated: record.generator_saturated,
        fresh_cluster: fresh,
        dir: name,
    };
    Ok((probe, record))
}
