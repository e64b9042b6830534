//! A line's figures: median, p99, max and mean of the election times, the share of trials
//! with a split vote, the trials cut off; and election.csv, summary.csv and summary.json.

use std::path::Path;

use coordbench_results::files;
use serde::Serialize;

use super::election::Trial;
use super::timeouts::TimeoutRange;

/// One line's summary (docs/reference.md, "simulate election", summary columns).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LineSummary {
    pub core: String,
    pub members: u64,
    pub timeout_range: String,
    pub trials: usize,
    /// Over every trial, a cut-off one counted at the cap (so a figure is a lower bound
    /// when `censored` > 0).
    pub median_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
    pub split_vote_share: f64,
    pub censored: usize,
    /// Writes the leaders accepted under `--load`, over every trial.
    pub writes: u64,
    pub wall_s: f64,
    pub trials_per_s: f64,
    pub simulated_s_per_wall_s: f64,
}

/// Election times in ms, a cut-off trial at `cap_ms`, sorted.
pub fn election_ms(trials: &[Trial], cap_ms: f64) -> Vec<f64> {
    let mut v: Vec<f64> = trials
        .iter()
        .map(|t| t.election_us.map_or(cap_ms, |us| us as f64 / 1000.0))
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// Nearest-rank percentile of sorted values (`q` in 0..=1).
fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

pub struct LineContext<'a> {
    pub core: &'a str,
    pub members: u64,
    pub range: &'a TimeoutRange,
    pub cap_ms: f64,
    pub wall_s: f64,
}

pub fn summarize(ctx: &LineContext, trials: &[Trial]) -> LineSummary {
    let ms = election_ms(trials, ctx.cap_ms);
    let n = trials.len().max(1) as f64;
    let simulated_s: f64 = trials.iter().map(|t| t.simulated_us as f64 / 1e6).sum();
    let wall = ctx.wall_s.max(1e-9);
    LineSummary {
        core: ctx.core.to_string(),
        members: ctx.members,
        timeout_range: ctx.range.to_string(),
        trials: trials.len(),
        median_ms: percentile(&ms, 0.5),
        p99_ms: percentile(&ms, 0.99),
        max_ms: ms.last().copied().unwrap_or(f64::NAN),
        mean_ms: ms.iter().sum::<f64>() / n,
        split_vote_share: trials.iter().filter(|t| t.split_votes > 0).count() as f64 / n,
        censored: trials.iter().filter(|t| t.election_us.is_none()).count(),
        writes: trials.iter().map(|t| t.writes).sum(),
        wall_s: ctx.wall_s,
        trials_per_s: trials.len() as f64 / wall,
        simulated_s_per_wall_s: simulated_s / wall,
    }
}

fn ms_cell(us: Option<u64>) -> String {
    us.map_or(String::new(), |us| format!("{:.3}", us as f64 / 1000.0))
}

/// election.csv: one row per trial, lines in the order given. Holds no wall-clock figure,
/// so a seed reproduces it byte for byte.
pub fn write_election_csv(
    path: &Path,
    core: &str,
    members: u64,
    lines: &[(TimeoutRange, Vec<Trial>)],
) -> anyhow::Result<()> {
    let header = [
        "core",
        "members",
        "timeout_range",
        "trial",
        "seed",
        "election_ms",
        "established_ms",
        "terms",
        "split_votes",
        "censored",
    ];
    let records = lines.iter().flat_map(|(range, trials)| {
        trials.iter().map(move |t| {
            [
                core.to_string(),
                members.to_string(),
                range.to_string(),
                t.trial.to_string(),
                t.seed.to_string(),
                ms_cell(t.election_us),
                ms_cell(t.established_us),
                t.terms.to_string(),
                t.split_votes.to_string(),
                t.election_us.is_none().to_string(),
            ]
        })
    });
    Ok(files::write_csv_table(path, header, records)?)
}

/// summary.csv (a row per line) and summary.json (the lines plus the run's seed and speed).
pub fn write_summaries(
    dir: &Path,
    summaries: &[LineSummary],
    meta: serde_json::Value,
) -> anyhow::Result<()> {
    files::write_csv_rows(&dir.join("summary.csv"), summaries)?;
    let json = serde_json::json!({ "run": meta, "lines": summaries });
    Ok(files::write_json(&dir.join("summary.json"), &json)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(ms: Option<u64>, split: u64) -> Trial {
        Trial {
            trial: 0,
            seed: 0,
            election_us: ms.map(|m| m * 1000),
            established_us: None,
            terms: split + 1,
            split_votes: split,
            simulated_us: 1_000_000,
            writes: 0,
        }
    }

    #[test]
    fn figures_count_cut_off_trials_at_the_cap() {
        let range = TimeoutRange::parse("150-150").unwrap();
        let ctx = LineContext {
            core: "raft",
            members: 5,
            range: &range,
            cap_ms: 1000.0,
            wall_s: 2.0,
        };
        let trials = [
            trial(Some(100), 0),
            trial(Some(300), 1),
            trial(None, 4),
            trial(Some(200), 0),
        ];
        let s = summarize(&ctx, &trials);
        assert_eq!((s.median_ms, s.max_ms, s.p99_ms), (200.0, 1000.0, 1000.0));
        assert_eq!(s.mean_ms, 400.0);
        assert_eq!((s.censored, s.split_vote_share), (1, 0.5));
        assert_eq!((s.trials_per_s, s.simulated_s_per_wall_s), (2.0, 2.0));
    }
}
