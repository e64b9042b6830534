//! A gate spec: a sweep spec (targets, workload or workload axis, repeats, warm-up,
//! duration, `[options]`, `[axes]`, `[quick]`) plus what makes it a gate: `[baseline]` and
//! `[candidate]` (run options each side sets on top of the spec's, `target` included),
//! `[thresholds]` ([`coordbench_analysis::compare::thresholds`]) and `false_alarm`. Each side becomes a sweep
//! spec of its own, so its points are planned and checked exactly as a sweep's are.

use std::path::{Path, PathBuf};

use crate::sweep::spec::{Location, Setting, SideTable, Spec};
use coordbench_analysis::compare::checks;
use coordbench_analysis::compare::thresholds::{self, Rule, Threshold};
use coordbench_results::spec_error::SpecError;

/// What the command line changes in a gate spec.
#[derive(Debug, Clone, Default)]
pub struct Overrides {
    /// KEY=VALUE run options for each side, applied after the spec's side tables.
    pub baseline: Vec<String>,
    pub candidate: Vec<String>,
    /// Repeats per side instead of the spec's.
    pub repeats: Option<u32>,
}

/// A checked gate spec.
#[derive(Debug, Clone)]
pub struct GateSpec {
    pub file: PathBuf,
    pub name: String,
    pub quick: bool,
    pub baseline: Spec,
    pub candidate: Spec,
    /// What each side adds, as `coordbench run` arguments (for gate.json and gate.md).
    pub baseline_options: Vec<String>,
    pub candidate_options: Vec<String>,
    pub thresholds: Vec<Threshold>,
    /// The bound on the chance that the gate fails with no real change.
    pub false_alarm: f64,
    /// Relative limits × configurations: the checks Holm's procedure shares the bound among
    /// (at most; a point that does not measure a figure has no check of it).
    pub relative_checks: usize,
}

impl GateSpec {
    /// Reads `file`; `quick` applies `[quick]`, then the command line's `overrides`.
    pub fn load(file: &Path, quick: bool, overrides: &Overrides) -> Result<GateSpec, SpecError> {
        let text = std::fs::read_to_string(file).map_err(|source| SpecError::Read {
            file: file.display().to_string(),
            source,
        })?;
        GateSpec::parse(file, text, quick, overrides)
    }

    pub fn parse(
        file: &Path,
        text: String,
        quick: bool,
        overrides: &Overrides,
    ) -> Result<GateSpec, SpecError> {
        let (mut spec, mut gate) = Spec::parse_gate(file, text.clone(), quick)?;
        if let Some(repeats) = overrides.repeats {
            spec.repeats = repeats;
            spec.repeats_location = Location {
                line: 0,
                field: "--repeats".into(),
            };
        }
        for (table, given, flag) in [
            (&mut gate.baseline, &overrides.baseline, "--baseline"),
            (&mut gate.candidate, &overrides.candidate, "--candidate"),
        ] {
            for option in given {
                spec.command_line_setting(flag, option, table)?;
            }
        }
        let thresholds = match &gate.thresholds {
            Some(raw) => thresholds::parse(file, &text, raw)?,
            None => Vec::new(),
        };
        if thresholds.is_empty() {
            return Err(spec.error_at(
                &Location {
                    line: 1,
                    field: "thresholds".into(),
                },
                "a gate needs a [thresholds] table, e.g. throughput_ops_s = { max_drop = \"5%\" }"
                    .into(),
            ));
        }
        let false_alarm = match &gate.false_alarm {
            Some((f, location)) => {
                thresholds::probability(*f).map_err(|m| spec.error_at(location, m))?
            }
            None => thresholds::DEFAULT_FALSE_ALARM,
        };
        let relative = thresholds
            .iter()
            .filter(|t| matches!(t.rule, Rule::MaxDrop(_) | Rule::MaxRise(_)))
            .count();
        let configs = spec.targets.len() * spec.combinations().len();
        let need = checks::min_gate_repeats(relative * configs, false_alarm);
        // Absolute limits judge every repeat on its own and need no minimum.
        if relative > 0 && (spec.repeats as usize) < need {
            return Err(spec.error_at(
                &spec.repeats_location,
                format!(
                    "{} relative checks at false_alarm {false_alarm} need at least {need} repeats per side before any can fail (has {})",
                    relative * configs,
                    spec.repeats
                ),
            ));
        }
        Ok(GateSpec {
            file: file.to_path_buf(),
            name: spec.name.clone(),
            quick,
            baseline_options: side_args(&gate.baseline),
            candidate_options: side_args(&gate.candidate),
            baseline: side(&spec, &gate.baseline)?,
            candidate: side(&spec, &gate.candidate)?,
            thresholds,
            false_alarm,
            relative_checks: relative * configs,
        })
    }

    /// Which test will judge the relative limits, and why: the paired signed-rank test when
    /// the repeats give enough pairs ([`checks::min_gate_pairs`]), else Mann-Whitney U.
    /// None without relative limits.
    pub fn judging(&self) -> Option<String> {
        if self.relative_checks == 0 {
            return None;
        }
        let need = checks::min_gate_pairs(self.relative_checks, self.false_alarm);
        let repeats = self.baseline.repeats as usize;
        Some(if repeats >= need {
            format!("relative limits judged pair by pair (paired Wilcoxon signed-rank, {repeats} pairs per point)")
        } else {
            format!(
                "relative limits judged unpaired (Mann-Whitney U): {} relative checks at false_alarm {} need {need} pairs for the paired test, the gate has {repeats}",
                self.relative_checks, self.false_alarm
            )
        })
    }
}

fn side_args(table: &SideTable) -> Vec<String> {
    let mut args: Vec<String> = table
        .target
        .iter()
        .flat_map(|(t, _)| ["--target".to_string(), t.clone()])
        .collect();
    args.extend(table.settings.iter().flat_map(|s| s.args.clone()));
    args
}

/// The spec one side runs: the spec's settings, each replaced by the side's setting of the
/// same option, then the side's others; the side's target instead of the spec's targets.
fn side(spec: &Spec, table: &SideTable) -> Result<Spec, SpecError> {
    let mut side = spec.clone();
    for setting in &table.settings {
        let flag = flag_of(setting);
        if let Some(axis) = spec.axes.iter().find(|a| a.axis.flag() == flag) {
            return Err(spec.error_at(
                &setting.location,
                format!(
                    "{} is an axis of this spec ({}); a side cannot also set it",
                    axis.axis.name(),
                    axis.location.field
                ),
            ));
        }
        side.settings.retain(|s| flag_of(s) != flag);
        side.settings.push(setting.clone());
        // The side's setting wins over a target's own too.
        for (_, own) in &mut side.target_settings {
            own.retain(|s| flag_of(s) != flag);
        }
    }
    if let Some((target, location)) = &table.target {
        side.targets = vec![(target.clone(), location.clone())];
    }
    Ok(side)
}

fn flag_of(setting: &Setting) -> &str {
    setting.args.first().map_or("", String::as_str)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GATE: &str = r#"
targets = ["raft", "zab"]
workload = "kv-put"
repeats = 5
[options]
disk = "tmpfs"
clients = 8
[axes]
cluster_size = [1, 3]
[candidate]
disk = "hdd"
[thresholds]
throughput_ops_s = { max_drop = "5%" }
"#;

    fn parse(text: &str, baseline: &[&str], candidate: &[&str]) -> Result<GateSpec, SpecError> {
        let owned = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let overrides = Overrides {
            baseline: owned(baseline),
            candidate: owned(candidate),
            repeats: None,
        };
        GateSpec::parse(Path::new("g.toml"), text.to_string(), false, &overrides)
    }

    fn args(spec: &Spec) -> Vec<String> {
        spec.settings.iter().flat_map(|s| s.args.clone()).collect()
    }

    #[test]
    fn a_side_replaces_the_spec_option_it_sets_and_keeps_the_others() {
        let g = parse(GATE, &[], &[]).unwrap();
        assert_eq!(args(&g.baseline), ["--clients", "8", "--disk", "tmpfs"]);
        assert_eq!(args(&g.candidate), ["--clients", "8", "--disk", "hdd"]);
        assert_eq!(g.candidate_options, ["--disk", "hdd"]);
        assert!(g.baseline_options.is_empty());
        assert_eq!(g.false_alarm, thresholds::DEFAULT_FALSE_ALARM);
    }

    #[test]
    fn the_gate_says_which_test_will_judge_its_relative_limits() {
        // 2 targets × 2 cluster sizes × 1 relative limit: 4 checks, 7 pairs for the paired test.
        let g = parse(GATE, &[], &[]).unwrap();
        assert_eq!(g.relative_checks, 4);
        assert_eq!(
            g.judging().unwrap(),
            "relative limits judged unpaired (Mann-Whitney U): 4 relative checks at false_alarm 0.05 need 7 pairs for the paired test, the gate has 5"
        );
        let g = parse(&GATE.replace("repeats = 5", "repeats = 7"), &[], &[]).unwrap();
        assert_eq!(
            g.judging().unwrap(),
            "relative limits judged pair by pair (paired Wilcoxon signed-rank, 7 pairs per point)"
        );
        let absolute = GATE.replace(
            "throughput_ops_s = { max_drop = \"5%\" }",
            "violations = { max = 0 }",
        );
        assert_eq!(parse(&absolute, &[], &[]).unwrap().judging(), None);
    }

    #[test]
    fn command_line_options_apply_after_the_side_tables() {
        let g = parse(GATE, &["engine_bin=/bin/sh"], &["disk=ssd", "target=raft"]).unwrap();
        assert_eq!(
            args(&g.baseline),
            [
                "--clients",
                "8",
                "--disk",
                "tmpfs",
                "--engine-bin",
                "/bin/sh"
            ]
        );
        assert_eq!(args(&g.candidate), ["--clients", "8", "--disk", "ssd"]);
        assert_eq!(g.candidate.targets.len(), 1);
        let e = parse(GATE, &[], &["disk"]).unwrap_err().to_string();
        assert!(
            e.starts_with("g.toml: --candidate (command line): write KEY=VALUE"),
            "{e}"
        );
        let e = parse(GATE, &[], &["clients=0"]).unwrap_err().to_string();
        assert!(
            e.starts_with("g.toml: --candidate clients (command line):"),
            "{e}"
        );
    }

    #[test]
    fn bad_gate_specs_are_refused_at_their_field() {
        let cases = [
            (GATE.replace("repeats = 5", "repeats = 4"), "g.toml:4: repeats: 4 relative checks at false_alarm 0.05 need at least 5 repeats per side"),
            (GATE.replace("[thresholds]\nthroughput_ops_s = { max_drop = \"5%\" }", ""), "g.toml:1: thresholds: a gate needs a [thresholds] table"),
            (GATE.replace("disk = \"hdd\"", "cluster_size = 5"), "g.toml:11: candidate.cluster_size: cluster_size is an axis"),
            (GATE.replace("disk = \"hdd\"", "duration = \"5s\""), "g.toml:11: candidate.duration: not allowed in a side"),
            (format!("false_alarm = 1.5\n{GATE}"), "g.toml:1: false_alarm: a probability between 0 and 1"),
            (GATE.replace("max_drop = \"5%\"", "max_drop = \"100%\""), "g.toml:13: thresholds.throughput_ops_s.max_drop: a percentage from 0% to below 100%"),
        ];
        for (text, expected) in cases {
            let e = parse(&text, &[], &[]).unwrap_err().to_string();
            assert!(e.starts_with(expected), "{e}\nexpected: {expected}");
        }
    }

    #[test]
    fn a_sweep_refuses_the_gate_tables() {
        let e = Spec::parse(Path::new("g.toml"), GATE.to_string(), false)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("g.toml:10: candidate: only a gate spec has this"),
            "{e}"
        );
    }
}
