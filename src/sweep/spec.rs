//! A sweep spec: the TOML file naming the targets (a list, or one `[targets.NAME]` table
//! each with run options for that target's points alone, e.g. the endpoints of a cluster
//! you run), the workload (at the top level, or several as the `workload` axis),
//! `coordbench run` options, the axes to vary, repeats, warm-up and duration, and a
//! `[quick]` table of overrides.
//!
//! Every value keeps where it was written (toml's spans), so a bad spec is refused in one
//! line naming the file, the line and the field. Values are checked by the `run` command
//! line itself (clap), so a spec accepts exactly what `coordbench run` accepts.

use coordbench_results::axis::HERD_FREE;
use coordbench_results::spec_error::{line_of, SpecError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use crate::capacity::CapacityArgs;
use coordbench_analysis::compare::thresholds::RawThresholds;
use coordbench_bench::args::{parse_args, parse_run_args};
use coordbench_results::axis::Axis;

/// Where a value was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    pub line: usize,
    /// Dotted path, e.g. `axes.cluster_size` or `quick.options.clients`.
    pub field: String,
}

/// One `coordbench run` option as the spec sets it, already turned into arguments
/// (`["--clients", "16"]`; a `true` flag is `["--quiet"]`, a `false` one nothing).
#[derive(Debug, Clone)]
pub struct Setting {
    pub location: Location,
    pub args: Vec<String>,
}

/// One swept axis and its values, in the spec's order.
#[derive(Debug, Clone)]
pub struct AxisSpec {
    pub axis: Axis,
    pub values: Vec<String>,
    pub location: Location,
}

/// A checked spec, with `[quick]` applied when asked for.
#[derive(Debug, Clone)]
pub struct Spec {
    pub file: PathBuf,
    /// The file as written, kept in the sweep's run.json.
    pub text: String,
    pub name: String,
    pub description: Option<String>,
    pub quick: bool,
    pub targets: Vec<(String, Location)>,
    /// The top-level `workload`; `None` when the workload is an axis (see
    /// [`Spec::workloads`]).
    pub workload: Option<(String, Location)>,
    pub repeats: u32,
    /// Where `repeats` was set (line 1 when it was not).
    pub repeats_location: Location,
    /// `interleave = true`: points run repeat by repeat ([`Spec::run_order`]).
    pub interleave: bool,
    /// Warm-up, duration and `[options]`: the same for every point.
    pub settings: Vec<Setting>,
    /// `[targets.NAME]` tables: options for one target's points only (the target entry as
    /// written, e.g. `etcd` or `redis:redlock`); they replace `[options]` of the same name.
    pub target_settings: Vec<(String, Vec<Setting>)>,
    /// In [`Axis::ALL`] order.
    pub axes: Vec<AxisSpec>,
    /// `[capacity]`: every point searches for its highest rate meeting these objectives.
    pub capacity: Option<crate::capacity::SearchArgs>,
}

type Values = Spanned<Vec<Spanned<String>>>;
type Options = BTreeMap<String, Spanned<toml::Value>>;
type Axes = BTreeMap<String, Spanned<Vec<Spanned<toml::Value>>>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: Option<String>,
    description: Option<String>,
    targets: Spanned<RawTargets>,
    workload: Option<Spanned<String>>,
    repeats: Option<Spanned<u32>>,
    /// Run repeat by repeat (every point's r1, then every point's r2, ...) rather than point
    /// by point, so drift on a shared machine lands on every point alike.
    #[serde(default)]
    interleave: bool,
    warmup: Option<Spanned<String>>,
    duration: Option<Spanned<String>>,
    #[serde(default)]
    options: Options,
    #[serde(default)]
    axes: Axes,
    quick: Option<Spanned<RawQuick>>,
    /// `[quick] targets`, once [`apply_quick`] took it: the targets `--quick` runs.
    #[serde(skip)]
    quick_targets: Option<Values>,
    /// `[capacity]`: every point is a capacity search (`coordbench capacity`).
    capacity: Option<Spanned<RawCapacity>>,
    // Gate specs only (`coordbench gate`).
    false_alarm: Option<Spanned<f64>>,
    baseline: Option<Spanned<Options>>,
    candidate: Option<Spanned<Options>>,
    thresholds: Option<Spanned<RawThresholds>>,
}

/// What a gate spec adds to a sweep spec: the two sides, the thresholds, the false-alarm
/// bound.
#[derive(Debug, Clone, Default)]
pub struct GateTables {
    pub false_alarm: Option<(f64, Location)>,
    pub baseline: SideTable,
    pub candidate: SideTable,
    /// `[thresholds]` as written; [`coordbench_analysis::compare::thresholds::parse`] checks it.
    pub thresholds: Option<RawThresholds>,
    /// Where the first gate-only field is, if the spec has one.
    first: Option<Location>,
}

impl GateTables {
    /// Whether the spec had any gate-only field (it is meant for `coordbench gate`).
    pub fn is_gate(&self) -> bool {
        self.first.is_some()
    }
}

/// `[baseline]` or `[candidate]`: run options one side sets on top of the spec's.
#[derive(Debug, Clone, Default)]
pub struct SideTable {
    /// `target = "etcd"`: the side runs this target instead of the spec's `targets`.
    pub target: Option<(String, Location)>,
    pub settings: Vec<Setting>,
}

/// `targets`: a list of names, or one table of run options per target (the tables' order
/// is the targets' order). A custom visitor, because serde's untagged enums lose the
/// spans.
enum RawTargets {
    List(Vec<Spanned<String>>),
    Tables(Vec<(String, Spanned<Options>)>),
}

impl<'de> Deserialize<'de> for RawTargets {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = RawTargets;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a list of targets, or a [targets.NAME] table per target")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<RawTargets, A::Error> {
                let mut names = Vec::new();
                while let Some(name) = seq.next_element()? {
                    names.push(name);
                }
                Ok(RawTargets::List(names))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RawTargets, A::Error> {
                let mut tables: Vec<(String, Spanned<Options>)> = Vec::new();
                while let Some(name) = map.next_key()? {
                    tables.push((name, map.next_value()?));
                }
                // Written order, whatever order the parser hands the keys over in.
                tables.sort_by_key(|(_, t)| t.span().start);
                Ok(RawTargets::Tables(tables))
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// What `[quick]` may override (serde's flatten would lose the spans).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawQuick {
    targets: Option<Values>,
    repeats: Option<Spanned<u32>>,
    warmup: Option<Spanned<String>>,
    duration: Option<Spanned<String>>,
    #[serde(default)]
    options: Options,
    #[serde(default)]
    axes: Axes,
    capacity: Option<Spanned<RawCapacity>>,
}

/// `[capacity]`: the objectives and search options of `coordbench capacity`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCapacity {
    slo: Vec<String>,
    start_rate: Option<f64>,
    max_rate: Option<f64>,
    precision: Option<String>,
    confirm_duration: Option<String>,
    fresh_warmup: Option<String>,
}

/// Run options a spec may not set in `[options]`, and what to do instead.
const RESERVED: &[(&str, &str)] = &[
    ("target", "list targets in `targets`"),
    (
        "workload",
        "set `workload` at the top level or list several under [axes]",
    ),
    ("duration", "set `duration` at the top level"),
    ("warmup", "set `warmup` at the top level"),
    ("out", "the sweep gives every point its own directory"),
    ("quiet", "the sweep shows its own progress"),
];

impl Spec {
    /// Reads and checks `file`; `quick` applies its `[quick]` table.
    pub fn load(file: &Path, quick: bool) -> Result<Spec, SpecError> {
        let text = std::fs::read_to_string(file).map_err(|source| SpecError::Read {
            file: file.display().to_string(),
            source,
        })?;
        Spec::parse(file, text, quick)
    }

    /// Checks a sweep spec held in memory; `file` names it in errors.
    pub fn parse(file: &Path, text: String, quick: bool) -> Result<Spec, SpecError> {
        let (spec, gate) = Spec::parse_gate(file, text, quick)?;
        if let Some(location) = &gate.first {
            return Err(spec.error_at(
                location,
                "only a gate spec has this; run the file with `coordbench gate`".into(),
            ));
        }
        Ok(spec)
    }

    /// Checks a gate spec held in memory: the sweep spec, and the gate's own tables.
    pub fn parse_gate(
        file: &Path,
        text: String,
        quick: bool,
    ) -> Result<(Spec, GateTables), SpecError> {
        let ctx = Ctx { file, text: &text };
        let mut raw: RawSpec = toml::from_str(&text).map_err(|e| ctx.toml_error(&e))?;
        let gate = gate_tables(&ctx, &mut raw)?;
        let spec = Spec::build(&ctx, raw, quick)?;
        Ok((spec, gate))
    }

    fn build(ctx: &Ctx, mut raw: RawSpec, quick: bool) -> Result<Spec, SpecError> {
        let names = if quick {
            apply_quick(ctx, &mut raw)?
        } else {
            FieldNames::default()
        };
        let RawSpec {
            name,
            description,
            targets,
            workload,
            repeats,
            interleave,
            warmup,
            duration,
            options,
            axes,
            capacity,
            quick_targets,
            ..
        } = raw;
        let (listed, tables) = target_names(ctx, targets, quick_targets, &names);
        let targets = checked_targets(ctx, listed, &axes)?;
        let target_settings = per_target_settings(ctx, tables, &axes)?;
        let workload = top_level_workload(ctx, workload, &axes, &names)?;
        let (repeats, repeats_location) = checked_repeats(ctx, repeats, &names)?;
        let settings = run_settings(
            ctx,
            [("warmup", warmup), ("duration", duration)],
            options,
            &axes,
            &names,
        )?;
        let axes = swept_axes(ctx, axes, &names)?;
        let capacity = capacity
            .map(|c| search_args(ctx, c, &names.field("capacity")))
            .transpose()?;

        let file = ctx.file;
        Ok(Spec {
            file: file.to_path_buf(),
            name: name.unwrap_or_else(|| {
                file.file_stem()
                    .map_or("sweep".into(), |s| s.to_string_lossy().into_owned())
            }),
            description,
            quick,
            targets,
            workload,
            repeats,
            repeats_location,
            interleave,
            settings,
            target_settings,
            axes,
            capacity,
            text: ctx.text.to_string(),
        })
    }

    /// Adds `KEY=VALUE` from the command line (`--baseline`, `--candidate`) to a side,
    /// replacing the side's own setting of the same option.
    pub fn command_line_setting(
        &self,
        flag: &str,
        option: &str,
        side: &mut SideTable,
    ) -> Result<(), SpecError> {
        let ctx = Ctx {
            file: &self.file,
            text: &self.text,
        };
        let Some((key, value)) = option.split_once('=') else {
            return Err(ctx.invalid(
                0,
                flag,
                format!(
                    "write KEY=VALUE, e.g. {flag} engine_bin=/path/to/coordbench (got {option:?})"
                ),
            ));
        };
        let location = Location {
            line: 0,
            field: format!("{flag} {key}"),
        };
        let value = toml::Value::String(value.to_string());
        side_entry(&ctx, side, key, &value, location)
    }

    /// The run options of `entry`'s points: `warmup`, `duration` and `[options]`, each
    /// replaced by the entry's `[targets.NAME]` setting of the same option, then the
    /// entry's others.
    pub fn settings_for(&self, entry: &str) -> Vec<&Setting> {
        let own: &[Setting] = self
            .target_settings
            .iter()
            .find(|(t, _)| t == entry)
            .map_or(&[], |(_, s)| s.as_slice());
        let mut settings: Vec<&Setting> = self
            .settings
            .iter()
            .filter(|s| !own.iter().any(|o| o.args.first() == s.args.first()))
            .collect();
        settings.extend(own);
        settings
    }

    /// The points of one target and one repeat: every combination of axis values.
    pub fn combinations(&self) -> Vec<Vec<(Axis, String)>> {
        let mut all: Vec<Vec<(Axis, String)>> = vec![Vec::new()];
        for axis in &self.axes {
            all = all
                .into_iter()
                .flat_map(|prefix| {
                    axis.values.iter().map(move |v| {
                        let mut next = prefix.clone();
                        next.push((axis.axis, v.clone()));
                        next
                    })
                })
                .collect();
        }
        all
    }

    /// The workloads the sweep runs: the top-level one, or the `workload` axis's values.
    pub fn workloads(&self) -> Vec<String> {
        match &self.workload {
            Some((workload, _)) => vec![workload.clone()],
            None => self
                .axes
                .iter()
                .find(|a| a.axis == Axis::Workload)
                .map(|a| a.values.clone())
                .unwrap_or_default(),
        }
    }

    /// The order to run `points` (as planned: point-major, repeats last) in: as planned, or
    /// with `interleave`, every point's first repeat, then every point's second, ...
    pub fn run_order(&self, points: &[crate::sweep::plan::Point]) -> Vec<usize> {
        let mut order: Vec<usize> = (0..points.len()).collect();
        if self.interleave {
            order.sort_by_key(|&i| (points[i].repeat, i));
        }
        order
    }

    /// The one-line error for a problem found at `location` after parsing.
    pub fn error_at(&self, location: &Location, message: String) -> SpecError {
        Ctx {
            file: &self.file,
            text: &self.text,
        }
        .at(location, message)
    }
}

/// The fields `[quick]` replaced, so that errors name where a value was written
/// (`quick.options.clients` rather than `options.clients`).
#[derive(Default)]
struct FieldNames {
    quick: std::collections::BTreeSet<String>,
}

impl FieldNames {
    /// The dotted path of `name` as written.
    fn field(&self, name: &str) -> String {
        if self.quick.contains(name) {
            format!("quick.{name}")
        } else {
            name.to_string()
        }
    }
}

/// Applies `[quick]` (`--quick`) to `raw`: its values replace the spec's, its options and
/// axes are added to them. Returns which fields it replaced.
fn apply_quick(ctx: &Ctx, raw: &mut RawSpec) -> Result<FieldNames, SpecError> {
    let Some(q) = raw.quick.take() else {
        return Err(ctx.invalid(
            1,
            "quick",
            "--quick needs a [quick] table in the spec".into(),
        ));
    };
    let q = q.into_inner();
    let mut names = FieldNames::default();
    let mut replaced = |field: &str| names.quick.insert(field.to_string());
    if let Some(t) = q.targets {
        raw.quick_targets = Some(t);
        replaced("targets");
    }
    for (field, over, value) in [
        ("warmup", q.warmup, &mut raw.warmup),
        ("duration", q.duration, &mut raw.duration),
    ] {
        if over.is_some() {
            *value = over;
            replaced(field);
        }
    }
    if q.repeats.is_some() {
        raw.repeats = q.repeats;
        replaced("repeats");
    }
    for (k, v) in q.options {
        replaced(&format!("options.{k}"));
        raw.options.insert(k, v);
    }
    for (k, v) in q.axes {
        replaced(&format!("axes.{k}"));
        raw.axes.insert(k, v);
    }
    if q.capacity.is_some() {
        raw.capacity = q.capacity;
        replaced("capacity");
    }
    Ok(names)
}

/// The targets as listed (where the list is, and each entry), and the `[targets.NAME]`
/// tables' options. `[quick] targets` replaces the list and keeps the tables of the
/// targets it names.
fn target_names(
    ctx: &Ctx,
    targets: Spanned<RawTargets>,
    quick_targets: Option<Values>,
    names: &FieldNames,
) -> (Listed, Vec<(String, Location, Options)>) {
    let field = names.field("targets");
    let whole = ctx.location(targets.span(), "targets".into());
    let (mut listed, tables) = match targets.into_inner() {
        RawTargets::List(list) => {
            let entries = list
                .into_iter()
                .map(|t| (ctx.location(t.span(), field.clone()), t.into_inner()))
                .collect();
            ((whole, entries), Vec::new())
        }
        RawTargets::Tables(tables) => {
            let mut entries = Vec::new();
            let mut options = Vec::new();
            for (name, table) in tables {
                let location = ctx.location(table.span(), format!("targets.{name}"));
                entries.push((location.clone(), name.clone()));
                options.push((name, location, table.into_inner()));
            }
            ((whole, entries), options)
        }
    };
    if let Some(list) = quick_targets {
        let whole = ctx.location(list.span(), field.clone());
        let entries = list
            .into_inner()
            .into_iter()
            .map(|t| (ctx.location(t.span(), field.clone()), t.into_inner()))
            .collect();
        listed = (whole, entries);
    }
    (listed, tables)
}

/// Where `targets` is written, and each entry with where it is.
type Listed = (Location, Vec<(Location, String)>);

/// The checked targets: at least one, each a target `coordbench run` knows, and a
/// `target:recipe` entry only beside a recipe axis.
fn checked_targets(
    ctx: &Ctx,
    (targets_location, listed): Listed,
    axes: &Axes,
) -> Result<Vec<(String, Location)>, SpecError> {
    if listed.is_empty() {
        return Err(ctx.at(&targets_location, "list at least one target".into()));
    }
    let targets: Vec<(String, Location)> = listed.into_iter().map(|(l, t)| (t, l)).collect();
    for (t, location) in &targets {
        let (name, recipe) = split_choice(t);
        let mut args = vec!["--target".to_string(), name.to_string()];
        if let Some(recipe) = recipe {
            if !axes.contains_key("recipe") {
                return Err(ctx.at(
                    location,
                    format!("`{t}` pins a recipe, which needs a recipe axis (e.g. recipe = [\"herd-free\"]) for the others"),
                ));
            }
            args.extend(["--recipe".to_string(), recipe.to_string()]);
        }
        ctx.check(location, &args)?;
    }
    Ok(targets)
}

/// The checked `[targets.NAME]` options: each a run option `[options]` may hold, and not
/// an axis (an axis sets the option for every target).
fn per_target_settings(
    ctx: &Ctx,
    tables: Vec<(String, Location, Options)>,
    axes: &Axes,
) -> Result<Vec<(String, Vec<Setting>)>, SpecError> {
    let mut all = Vec::new();
    for (target, _, options) in tables {
        let mut settings = Vec::new();
        for (key, value) in options {
            let location = ctx.location(value.span(), format!("targets.{target}.{key}"));
            if Axis::from_name(&key.replace('-', "_")).is_some_and(|a| axes.contains_key(a.name()))
            {
                return Err(ctx.at(
                    &location,
                    format!("{key} is also an axis; set it in one place"),
                ));
            }
            settings.push(ctx.setting(&key, value.get_ref(), location, "a target's table")?);
        }
        all.push((target, settings));
    }
    Ok(all)
}

/// The checked `repeats` (1 when not set, and then located at line 1) and where it was set.
fn checked_repeats(
    ctx: &Ctx,
    repeats: Option<Spanned<u32>>,
    names: &FieldNames,
) -> Result<(u32, Location), SpecError> {
    let location = repeats.as_ref().map_or(
        Location {
            line: 1,
            field: "repeats".into(),
        },
        |r| ctx.location(r.span(), names.field("repeats")),
    );
    match repeats {
        Some(r) if *r.get_ref() == 0 => Err(ctx.at(&location, "must be at least 1".into())),
        Some(r) => Ok((r.into_inner(), location)),
        None => Ok((1, location)),
    }
}

/// The settings every point shares: `warmup` and `duration` (`times`, by name), then
/// `[options]`, each checked; an option that is also an axis is refused.
fn run_settings(
    ctx: &Ctx,
    times: [(&str, Option<Spanned<String>>); 2],
    options: Options,
    axes: &Axes,
    names: &FieldNames,
) -> Result<Vec<Setting>, SpecError> {
    let mut settings = Vec::new();
    for (name, value) in times {
        if let Some(v) = value {
            let location = ctx.location(v.span(), names.field(name));
            let args = vec![format!("--{name}"), v.into_inner()];
            ctx.check(&location, &args)?;
            settings.push(Setting { location, args });
        }
    }
    for (key, value) in options {
        let location = ctx.location(value.span(), names.field(&format!("options.{key}")));
        if Axis::from_name(&key.replace('-', "_")).is_some_and(|a| axes.contains_key(a.name())) {
            return Err(ctx.at(
                &location,
                format!("{key} is also an axis; set it in one place"),
            ));
        }
        settings.push(ctx.setting(&key, value.get_ref(), location, "[options]")?);
    }
    Ok(settings)
}

/// The checked `[axes]`, in [`Axis::ALL`] order: known axes, each with at least one value
/// that `coordbench run` accepts.
fn swept_axes(ctx: &Ctx, axes: Axes, names: &FieldNames) -> Result<Vec<AxisSpec>, SpecError> {
    let mut swept = Vec::new();
    for (key, values) in axes {
        let location = ctx.location(values.span(), names.field(&format!("axes.{key}")));
        let Some(axis) = Axis::from_name(&key) else {
            let known: Vec<&str> = Axis::ALL.iter().map(|a| a.name()).collect();
            return Err(ctx.at(
                &location,
                format!("unknown axis; expected one of {}", known.join(", ")),
            ));
        };
        if values.get_ref().is_empty() {
            return Err(ctx.at(&location, "list at least one value".into()));
        }
        let mut texts = Vec::new();
        for value in values.into_inner() {
            let at = ctx.location(value.span(), location.field.clone());
            let text = scalar_text(value.get_ref()).map_err(|m| ctx.at(&at, m))?;
            // `herd-free` stands for each target's own herd-free recipe name.
            // `etcd@3.6.16`: a release of one target, checked as the release it names.
            let checked = match (axis, text.split_once('@')) {
                (Axis::ServerVersion, Some((_, release))) => release,
                _ => text.as_str(),
            };
            if !(axis == Axis::Recipe && text == HERD_FREE) {
                let args = axis.args(checked).map_err(|m| ctx.at(&at, m))?;
                ctx.check(&at, &args)?;
            }
            texts.push(text);
        }
        swept.push(AxisSpec {
            axis,
            values: texts,
            location,
        });
    }
    swept.sort_by_key(|a| a.axis);
    Ok(swept)
}

/// The checked top-level `workload`: required unless the workload is an axis (whose
/// values are checked with the other axes), refused if it is both.
fn top_level_workload(
    ctx: &Ctx,
    workload: Option<Spanned<String>>,
    axes: &Axes,
    names: &FieldNames,
) -> Result<Option<(String, Location)>, SpecError> {
    let axis = Axis::Workload.name();
    match (workload, axes.contains_key(axis)) {
        (Some(w), true) => {
            let location = ctx.location(w.span(), "workload".into());
            Err(ctx.at(
                &location,
                format!(
                    "also swept in {}; set the workload in one place",
                    names.field(&format!("axes.{axis}"))
                ),
            ))
        }
        (None, false) => Err(ctx.invalid(
            1,
            "workload",
            "missing: set `workload = \"NAME\"`, or list several under [axes] (`workload = [\"kv-put\", \"lock\"]`)"
                .into(),
        )),
        (None, true) => Ok(None),
        (Some(w), false) => {
            let location = ctx.location(w.span(), "workload".into());
            let workload = w.into_inner();
            ctx.check(&location, &["--workload".into(), workload.clone()])?;
            Ok(Some((workload, location)))
        }
    }
}

/// `[capacity]` checked by `coordbench capacity`'s own command line.
fn search_args(
    ctx: &Ctx,
    raw: Spanned<RawCapacity>,
    field: &str,
) -> Result<crate::capacity::SearchArgs, SpecError> {
    let location = ctx.location(raw.span(), field.to_string());
    let raw = raw.into_inner();
    if raw.slo.is_empty() {
        return Err(ctx.at(
            &location,
            "list at least one objective, e.g. slo = [\"p99<20ms\"]".into(),
        ));
    }
    let mut argv: Vec<String> = vec!["coordbench".into()];
    for slo in raw.slo {
        argv.extend(["--slo".into(), slo]);
    }
    let numbers = [
        ("--start-rate", raw.start_rate),
        ("--max-rate", raw.max_rate),
    ];
    for (flag, value) in numbers {
        if let Some(v) = value {
            argv.extend([flag.to_string(), v.to_string()]);
        }
    }
    for (flag, value) in [
        ("--precision", raw.precision),
        ("--confirm-duration", raw.confirm_duration),
        ("--fresh-warmup", raw.fresh_warmup),
    ] {
        if let Some(v) = value {
            argv.extend([flag.to_string(), v]);
        }
    }
    match parse_args::<CapacityArgs, _, _>(&argv) {
        Ok(c) => Ok(c.search),
        Err(e) => Err(ctx.at(&location, clap_message(&e))),
    }
}

/// A `targets` entry: a target name, or `target:recipe`, a target that runs that recipe
/// instead of the recipe axis's values (one entry per choice, e.g. `redis:redlock`).
pub fn split_choice(entry: &str) -> (&str, Option<&str>) {
    match entry.split_once(':') {
        Some((target, recipe)) => (target, Some(recipe)),
        None => (entry, None),
    }
}

/// Context for errors: the file's name and text.
struct Ctx<'a> {
    file: &'a Path,
    text: &'a str,
}

impl Ctx<'_> {
    fn line_of(&self, offset: usize) -> usize {
        line_of(self.text, offset)
    }

    fn location(&self, span: std::ops::Range<usize>, field: String) -> Location {
        Location {
            line: self.line_of(span.start),
            field,
        }
    }

    fn invalid(&self, line: usize, field: &str, message: String) -> SpecError {
        SpecError::Invalid {
            file: self.file.display().to_string(),
            line,
            field: field.to_string(),
            message: coordbench_results::outcome::one_line(&message),
        }
    }

    fn at(&self, location: &Location, message: String) -> SpecError {
        self.invalid(location.line, &location.field, message)
    }

    /// toml's own errors carry a span but no field: the field is the key written on that
    /// line, under the table header above it.
    fn toml_error(&self, e: &toml::de::Error) -> SpecError {
        let line = e.span().map_or(1, |s| self.line_of(s.start));
        let mut table = String::new();
        let mut key = String::new();
        for (n, text) in self.text.lines().enumerate().take(line) {
            let text = text.trim();
            if text.starts_with('[') {
                table = text
                    .trim_matches(|c| c == '[' || c == ']')
                    .trim()
                    .to_string();
                key.clear();
            } else if n + 1 == line {
                key = text
                    .split('=')
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_string();
            }
        }
        let field = match (table.is_empty(), key.is_empty()) {
            (true, true) => "(top level)".to_string(),
            (true, false) => key,
            (false, true) => table,
            (false, false) => format!("{table}.{key}"),
        };
        self.invalid(line, &field, e.message().to_string())
    }

    /// Whether `coordbench run` accepts these arguments.
    fn check(&self, location: &Location, args: &[String]) -> Result<(), SpecError> {
        check_run_args(args).map_err(|m| self.at(location, m))
    }
}

impl Ctx<'_> {
    /// One run option (`clients = 16`) as arguments, checked; `section` names where it was
    /// written, for the reserved-option error.
    fn setting(
        &self,
        key: &str,
        value: &toml::Value,
        location: Location,
        section: &str,
    ) -> Result<Setting, SpecError> {
        let option = key.replace('_', "-");
        if let Some((_, instead)) = RESERVED.iter().find(|(r, _)| *r == option) {
            return Err(self.at(&location, format!("not allowed in {section}: {instead}")));
        }
        let args = option_args(&format!("--{option}"), value).map_err(|m| self.at(&location, m))?;
        self.check(&location, &args)?;
        Ok(Setting { location, args })
    }
}

/// Takes the gate-only fields out of `raw`, checked.
fn gate_tables(ctx: &Ctx, raw: &mut RawSpec) -> Result<GateTables, SpecError> {
    let mut gate = GateTables::default();
    if let Some(f) = raw.false_alarm.take() {
        let location = ctx.location(f.span(), "false_alarm".into());
        gate.first.get_or_insert(location.clone());
        gate.false_alarm = Some((f.into_inner(), location));
    }
    for (name, table, side) in [
        ("baseline", raw.baseline.take(), &mut gate.baseline),
        ("candidate", raw.candidate.take(), &mut gate.candidate),
    ] {
        let Some(table) = table else { continue };
        gate.first
            .get_or_insert(ctx.location(table.span(), name.into()));
        for (key, value) in table.into_inner() {
            let location = ctx.location(value.span(), format!("{name}.{key}"));
            side_entry(ctx, side, &key, value.get_ref(), location)?;
        }
    }
    if let Some(t) = raw.thresholds.take() {
        gate.first
            .get_or_insert(ctx.location(t.span(), "thresholds".into()));
        gate.thresholds = Some(t.into_inner());
    }
    Ok(gate)
}

/// One `[baseline]`/`[candidate]` entry: `target`, or a run option replacing any earlier
/// setting of the same option on that side.
fn side_entry(
    ctx: &Ctx,
    side: &mut SideTable,
    key: &str,
    value: &toml::Value,
    location: Location,
) -> Result<(), SpecError> {
    if key == "target" {
        let target = scalar_text(value).map_err(|m| ctx.at(&location, m))?;
        ctx.check(&location, &["--target".into(), target.clone()])?;
        side.target = Some((target, location));
        return Ok(());
    }
    let setting = ctx.setting(key, value, location, "a side")?;
    side.settings
        .retain(|s| s.args.first() != setting.args.first());
    side.settings.push(setting);
    Ok(())
}

/// Parses `coordbench run ARGS` (the command line only; combinations are checked per point).
pub fn check_run_args(args: &[String]) -> Result<(), String> {
    let argv = std::iter::once("coordbench".to_string()).chain(args.iter().cloned());
    match parse_run_args(argv) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == clap::error::ErrorKind::UnknownArgument => Err(format!(
            "`coordbench run` has no {} option in this build",
            args.first().map_or("such", String::as_str)
        )),
        Err(e) => Err(clap_message(&e)),
    }
}

/// clap's error without its `error:` prefix and usage lines.
pub fn clap_message(e: &clap::Error) -> String {
    let rendered = e.render().to_string();
    let first = rendered.lines().next().unwrap_or("invalid arguments");
    first.trim_start_matches("error:").trim().to_string()
}

fn scalar_text(value: &toml::Value) -> Result<String, String> {
    match value {
        toml::Value::String(s) => Ok(s.clone()),
        toml::Value::Integer(i) => Ok(i.to_string()),
        toml::Value::Float(f) => Ok(f.to_string()),
        // A boolean axis (`secure = [false, true]`) passes `--flag true|false`.
        toml::Value::Boolean(b) => Ok(b.to_string()),
        _ => Err("expected a string, a number or a boolean".into()),
    }
}

fn option_args(flag: &str, value: &toml::Value) -> Result<Vec<String>, String> {
    match value {
        toml::Value::Boolean(true) => Ok(vec![flag.to_string()]),
        toml::Value::Boolean(false) => Ok(Vec::new()),
        toml::Value::Array(items) => {
            let texts = items
                .iter()
                .map(scalar_text)
                .collect::<Result<Vec<_>, _>>()?;
            Ok(vec![flag.to_string(), texts.join(",")])
        }
        other => Ok(vec![flag.to_string(), scalar_text(other)?]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, quick: bool) -> Result<Spec, SpecError> {
        Spec::parse(Path::new("t.toml"), text.to_string(), quick)
    }

    const VALID: &str = r#"
name = "cluster-size"
targets = ["etcd", "raft"]
workload = "kv-put"
duration = "10s"
[options]
clients = 16
[axes]
cluster_size = [1, 3, 5]
disk = ["tmpfs", "disk"]
[quick]
duration = "2s"
[quick.axes]
cluster_size = [1]
"#;

    #[test]
    fn a_valid_spec_gives_targets_settings_and_axes_in_order() {
        let spec = parse(VALID, false).unwrap();
        let targets: Vec<&str> = spec.targets.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(targets, ["etcd", "raft"]);
        assert_eq!(spec.workload.as_ref().unwrap().0, "kv-put");
        assert_eq!(spec.workloads(), ["kv-put"]);
        let args: Vec<Vec<String>> = spec.settings.iter().map(|s| s.args.clone()).collect();
        assert!(
            args.contains(&vec!["--clients".into(), "16".into()]),
            "{args:?}"
        );
        assert_eq!(spec.axes[0].axis, Axis::ClusterSize);
        assert_eq!(spec.axes[0].values, ["1", "3", "5"]);
        assert_eq!(spec.combinations().len(), 6);

        let quick = parse(VALID, true).unwrap();
        assert_eq!(quick.axes[0].values, ["1"]);
        assert_eq!(quick.combinations().len(), 2);
        assert!(quick
            .settings
            .iter()
            .any(|s| s.args == ["--duration", "2s"] && s.location.field == "quick.duration"));
    }

    #[test]
    fn the_workload_may_be_an_axis_instead_of_a_top_level_field() {
        let spec = parse(
            "targets = [\"raft\"]\n[axes]\nclients = [1, 4]\nworkload = [\"kv-put\", \"lock\"]\n",
            false,
        )
        .unwrap();
        assert!(spec.workload.is_none());
        assert_eq!(spec.workloads(), ["kv-put", "lock"]);
        assert_eq!(
            (spec.axes[0].axis, spec.axes[1].axis),
            (Axis::Workload, Axis::Clients)
        );
        assert_eq!(spec.combinations().len(), 4);

        let e =
            error("targets = [\"raft\"]\nworkload = \"lock\"\n[axes]\nworkload = [\"kv-put\"]\n");
        assert!(
            e.starts_with("t.toml:2: workload: also swept in axes.workload"),
            "{e}"
        );
        let e = parse(
            "targets = [\"raft\"]\nworkload = \"lock\"\n[quick.axes]\nworkload = [\"kv-put\"]\n",
            true,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("also swept in quick.axes.workload"), "{e}");
        let e = error("targets = [\"raft\"]\n[axes]\nclients = [1]\n");
        assert!(e.starts_with("t.toml:1: workload: missing"), "{e}");
        let e = error("targets = [\"raft\"]\n[axes]\nworkload = [\"kv-put\", \"mutex\"]\n");
        assert!(
            e.starts_with("t.toml:3: axes.workload: ") && e.contains("mutex"),
            "{e}"
        );
        let e =
            error("targets = [\"raft\"]\nworkload = \"lock\"\n[options]\nworkload = \"lock\"\n");
        assert!(
            e.starts_with("t.toml:4: options.workload: not allowed"),
            "{e}"
        );
        let e = error(
            "targets = [\"raft\"]\nworkload = \"lock\"\n[options]\nengine_bin = \"/a\"\n[axes]\nengine_bin = [\"/b\"]\n",
        );
        assert!(
            e.contains("options.engine_bin: engine_bin is also an axis"),
            "{e}"
        );
    }

    const ATTACHED: &str = r#"
workload = "kv-put"
[options]
clients = 4
[targets.etcd]
endpoints = "127.0.0.1:2379"
clients = 8
[targets.zookeeper]
endpoints = ["127.0.0.1:2181", "127.0.0.1:2182"]
[targets.raft]
[quick]
targets = ["zookeeper", "raft"]
"#;

    #[test]
    fn target_tables_give_targets_in_written_order_and_their_own_options() {
        let spec = parse(ATTACHED, false).unwrap();
        let targets: Vec<(&str, usize)> = spec
            .targets
            .iter()
            .map(|(t, l)| (t.as_str(), l.line))
            .collect();
        assert_eq!(targets, [("etcd", 5), ("zookeeper", 8), ("raft", 10)]);
        let args = |entry: &str| -> Vec<String> {
            spec.settings_for(entry)
                .into_iter()
                .flat_map(|s| s.args.clone())
                .collect()
        };
        // The target's own `clients` replaces [options]'s.
        assert_eq!(
            args("etcd"),
            ["--clients", "8", "--endpoints", "127.0.0.1:2379"]
        );
        assert_eq!(
            args("zookeeper"),
            [
                "--clients",
                "4",
                "--endpoints",
                "127.0.0.1:2181,127.0.0.1:2182"
            ]
        );
        assert_eq!(args("raft"), ["--clients", "4"]);
        let own = &spec.target_settings[0].1;
        assert_eq!(
            (own[0].location.line, own[0].location.field.as_str()),
            (7, "targets.etcd.clients")
        );

        // `[quick] targets` picks targets; their tables still apply.
        let quick = parse(ATTACHED, true).unwrap();
        let names: Vec<&str> = quick.targets.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(names, ["zookeeper", "raft"]);
        assert!(quick
            .settings_for("zookeeper")
            .iter()
            .any(|s| s.args[0] == "--endpoints"));
    }

    #[test]
    fn bad_target_tables_name_the_file_line_and_field() {
        let e = error("workload = \"kv-put\"\n[targets.etcd]\nclients = \"many\"\n");
        assert!(e.starts_with("t.toml:3: targets.etcd.clients: "), "{e}");
        let e = error("workload = \"kv-put\"\n[targets.mysql]\nclients = 1\n");
        assert!(
            e.starts_with("t.toml:2: targets.mysql: ") && e.contains("mysql"),
            "{e}"
        );
        let e = error("workload = \"kv-put\"\n[targets.etcd]\nworkload = \"lock\"\n");
        assert!(
            e.starts_with("t.toml:3: targets.etcd.workload: not allowed in a target's table"),
            "{e}"
        );
        let e =
            error("workload = \"kv-put\"\n[targets.etcd]\nclients = 2\n[axes]\nclients = [1, 2]\n");
        assert!(
            e.starts_with("t.toml:3: targets.etcd.clients: clients is also an axis"),
            "{e}"
        );
        let e = error("workload = \"kv-put\"\n[targets.etcd]\nno_such = 1\n");
        assert!(
            e.contains("targets.etcd.no_such: `coordbench run` has no --no-such option"),
            "{e}"
        );
        // A list and tables at once is a TOML error, located.
        let e = error("targets = [\"etcd\"]\nworkload = \"kv-put\"\n[targets.etcd]\nclients = 1\n");
        assert!(e.starts_with("t.toml:"), "{e}");
        let e = error("targets = \"etcd\"\nworkload = \"kv-put\"\n");
        assert!(
            e.starts_with("t.toml:1: targets: ") && e.contains("[targets.NAME]"),
            "{e}"
        );
    }

    fn error(text: &str) -> String {
        let e = parse(text, false).unwrap_err().to_string();
        assert!(!e.contains('\n'), "{e}");
        e
    }

    #[test]
    fn invalid_specs_name_the_file_line_and_field() {
        let e =
            error("targets = [\"etcd\"]\nworkload = \"kv-put\"\n[axes]\ncluster_size = [1, 30]\n");
        assert!(e.starts_with("t.toml:4: axes.cluster_size: "), "{e}");
        let e =
            error("targets = [\"etcd\"]\nworkload = \"kv-put\"\n[options]\nclients = \"many\"\n");
        assert!(e.starts_with("t.toml:4: options.clients: "), "{e}");
        let e = error("targets = [\"etcd\", \"mysql\"]\nworkload = \"kv-put\"\n");
        assert!(
            e.starts_with("t.toml:1: targets: ") && e.contains("mysql"),
            "{e}"
        );
        let e = error("targets = [\"etcd\"]\nworkload = \"kv-put\"\n[axes]\nsize = [1]\n");
        assert!(e.starts_with("t.toml:4: axes.size: unknown axis"), "{e}");
        let e = error("targets = [\"etcd\"]\nworkload = \"kv-put\"\nrepeat = 3\n");
        assert!(
            e.starts_with("t.toml:3: repeat: ") && e.contains("unknown field"),
            "{e}"
        );
        let e = error("targets = [\"etcd\"]\nworkload = \"kv-put\"\nrepeats = \"x\"\n");
        assert!(e.starts_with("t.toml:3: repeats: "), "{e}");
        let e = error("targets = [\"etcd\"]\nworkload = \"kv-put\"\n[options]\nout = \"/tmp\"\n");
        assert!(e.starts_with("t.toml:4: options.out: not allowed"), "{e}");
        let e =
            error("targets = [\"etcd\"]\nworkload = \"kv-put\"\n[options]\nno_such_option = 1\n");
        assert!(
            e.contains("options.no_such_option: `coordbench run` has no --no-such-option option"),
            "{e}"
        );
        let e = error("targets = [\"etcd\"\nworkload = 1\n");
        assert!(e.starts_with("t.toml:"), "{e}");
        let e = parse(
            "targets = [\"etcd\"]\nworkload = \"kv-put\"\n[quick]\nduration = \"0s\"\n",
            true,
        )
        .unwrap_err()
        .to_string();
        assert!(e.starts_with("t.toml:4: quick.duration: "), "{e}");
        let e = parse("targets = [\"etcd\"]\nworkload = \"kv-put\"\n", true)
            .unwrap_err()
            .to_string();
        assert!(e.contains("quick: --quick needs a [quick] table"), "{e}");
    }
}
