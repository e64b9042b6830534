//! `coordbench compare`'s options.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

#[derive(Debug, Clone, Args)]
pub struct CompareArgs {
    /// The baseline: a run, sweep or gate-side directory, a directory of run directories
    /// (repeats), or several of these joined by commas.
    pub base: String,

    /// The candidate, in the same forms.
    pub cand: String,

    /// Output: an aligned table, markdown (for pull-request comments) or JSON.
    #[arg(long, value_enum, default_value = "table")]
    pub format: CompareFormat,

    /// Significance level of the two-sided rank test (default 0.10: each direction at 0.05).
    #[arg(long, default_value_t = super::DEFAULT_ALPHA, value_parser = parse_alpha)]
    pub alpha: f64,

    /// Judge the `[thresholds]` table of this TOML file (a gate spec, for one) and exit 3
    /// when one is breached.
    #[arg(long, value_name = "FILE")]
    pub thresholds: Option<PathBuf>,

    /// Pair each point's runs by repeat index, as a gate's sides ran them (one baseline and
    /// one candidate run of each repeat back to back), and judge `--thresholds` with the
    /// paired signed-rank test where there are enough pairs, as `coordbench gate` does.
    /// The repeat index comes from the sweep or gate-side run.json that lists the run.
    #[arg(long)]
    pub paired: bool,
}

impl CompareArgs {
    pub fn base_paths(&self) -> Vec<PathBuf> {
        split_paths(&self.base)
    }

    pub fn cand_paths(&self) -> Vec<PathBuf> {
        split_paths(&self.cand)
    }
}

fn split_paths(list: &str) -> Vec<PathBuf> {
    list.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(PathBuf::from)
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompareFormat {
    Table,
    Markdown,
    Json,
}

fn parse_alpha(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(a) if a > 0.0 && a < 1.0 => Ok(a),
        _ => Err("must be a probability between 0 and 1, e.g. 0.05".into()),
    }
}
