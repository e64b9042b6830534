//! A sweep's points: every target × every combination of axis values × every repeat, each
//! as the `coordbench run` command line that measures it and the directory it writes.
//!
//! Points are built by parsing a real `run` command line and validating it with
//! [`RunConfig::from_args`], so a point is exactly what `coordbench run` would do, and a
//! combination `run` refuses is refused before anything starts.

use std::path::{Path, PathBuf};

use clap::ValueEnum;

use crate::sweep::spec::{clap_message, split_choice, Location, Spec};
use coordbench_bench::args::parse_run_args;
use coordbench_bench::args::RunArgs;
use coordbench_bench::config::{family_of, RunConfig};
use coordbench_results::axis::HERD_FREE;
use coordbench_results::axis::{Axis, NOT_APPLICABLE};
use coordbench_results::kinds::TargetKind;
use coordbench_results::spec_error::SpecError;

/// One run of the sweep.
#[derive(Debug, Clone)]
pub struct Point {
    /// The directory name under the sweep directory, e.g. `etcd-cluster_size=3-r1`.
    pub name: String,
    pub target: String,
    /// 1-based.
    pub repeat: u32,
    /// Axis values as run (`herd-free` resolved to the target's recipe name).
    pub axes: Vec<(Axis, String)>,
    pub args: RunArgs,
    pub config: RunConfig,
    pub dir: PathBuf,
}

impl Point {
    /// `etcd cluster_size=3 r1`: how progress lines name the point.
    pub fn label(&self) -> String {
        let mut label = self.target.clone();
        for (axis, value) in &self.axes {
            label.push_str(&format!(" {}={value}", axis.name()));
        }
        format!("{label} r{}", self.repeat)
    }
}

/// Every point of `spec`, writing under `out`, in run order (target, then axes in
/// [`Axis::ALL`] order, then repeat).
pub fn points(spec: &Spec, out: &Path) -> Result<Vec<Point>, SpecError> {
    let mut points = Vec::new();
    for (entry, target_location) in &spec.targets {
        let (target, pinned) = split_choice(entry);
        let kind =
            TargetKind::from_str(target, false).map_err(|m| spec.error_at(target_location, m))?;
        let has_releases = matches!(kind, TargetKind::Etcd | TargetKind::Zookeeper);
        let mut planned: Vec<Vec<(Axis, String)>> = Vec::new();
        'combination: for combination in spec.combinations() {
            let mut axes: Vec<(Axis, String)> = Vec::new();
            for (axis, value) in combination {
                let value = match (axis, value.as_str()) {
                    (Axis::ServerVersion, _) => match Axis::server_version_for(&value, target, has_releases) {
                        Some(version) => version.to_string(),
                        // `zookeeper@3.9.5` is no point of etcd's.
                        None => continue 'combination,
                    },
                    (Axis::Recipe, _) if pinned.is_some() => pinned.unwrap_or_default().to_string(),
                    (Axis::Recipe, HERD_FREE) => family_of(kind)
                        .herd_free_name()
                        .ok_or_else(|| {
                            spec.error_at(
                                target_location,
                                format!("{target} has no herd-free recipe; name its recipes (recipes.{target} = [...])"),
                            )
                        })?
                        .to_string(),
                    _ => value,
                };
                axes.push((axis, value));
            }
            // A target without releases runs once beside all of the others' releases.
            if axes.iter().any(|(_, v)| v == NOT_APPLICABLE) {
                if planned.contains(&axes) {
                    continue;
                }
                planned.push(axes.clone());
            }
            let base = dir_name(target, &axes);
            for repeat in 1..=spec.repeats {
                let name = format!("{base}-r{repeat}");
                let dir = out.join(&name);
                let (args, config) = point_run(spec, entry, &axes, &dir)?;
                points.push(Point {
                    name,
                    target: target.to_string(),
                    repeat,
                    axes: axes.clone(),
                    args,
                    config,
                    dir,
                });
            }
        }
    }
    check_distinct_dirs(spec, &points)?;
    Ok(points)
}

/// Every point writes its own directory: values that differ only in characters
/// [`dir_name`] replaces (or are listed twice) are refused.
fn check_distinct_dirs(spec: &Spec, points: &[Point]) -> Result<(), SpecError> {
    let mut seen: std::collections::HashMap<&str, &Point> = std::collections::HashMap::new();
    for point in points {
        let Some(earlier) = seen.insert(&point.name, point) else {
            continue;
        };
        return Err(spec.error_at(
            &shared_dir_location(spec, earlier, point),
            format!(
                "points `{}` and `{}` would both write {}: list each value once, and make values differ in letters, digits or ._=-",
                earlier.label(),
                point.label(),
                point.name
            ),
        ));
    }
    Ok(())
}

/// Where to blame two points that share a directory: the axis whose values differ
/// between them, else one that lists a value twice, else the first axis, else the target.
fn shared_dir_location(spec: &Spec, a: &Point, b: &Point) -> Location {
    let differing = a
        .axes
        .iter()
        .zip(&b.axes)
        .find(|((_, x), (_, y))| x != y)
        .map(|((axis, _), _)| *axis);
    let repeated = || {
        spec.axes
            .iter()
            .find(|s| (1..s.values.len()).any(|i| s.values[..i].contains(&s.values[i])))
            .map(|s| s.axis)
    };
    let axis = differing
        .or_else(repeated)
        .or(spec.axes.first().map(|s| s.axis));
    axis.and_then(|axis| spec.axes.iter().find(|s| s.axis == axis))
        .map(|s| s.location.clone())
        .or_else(|| {
            let target = spec.targets.iter().find(|(t, _)| *t == a.target);
            target.map(|(_, location)| location.clone())
        })
        .unwrap_or(Location {
            line: 1,
            field: "targets".into(),
        })
}

/// Parses and validates the point's `coordbench run` command line; an error is located at
/// the spec field whose option it names first.
fn point_run(
    spec: &Spec,
    entry: &str,
    axes: &[(Axis, String)],
    dir: &Path,
) -> Result<(RunArgs, RunConfig), SpecError> {
    let target = split_choice(entry).0;
    // (option, its value, where the spec sets it): what an error message can name.
    let mut flags: Vec<(String, String, Location)> = Vec::new();
    // `run`'s options after the program name, as its own parser takes them.
    let mut argv: Vec<String> = vec!["coordbench".into()];
    let target_location = spec
        .targets
        .iter()
        .find(|(t, _)| t == entry)
        .map(|(_, l)| l.clone())
        .unwrap_or(Location {
            line: 1,
            field: "targets".into(),
        });
    argv.extend(["--target".into(), target.to_string()]);
    flags.push(("--target".into(), target.into(), target_location.clone()));
    // A swept workload comes with the other axes below: `--workload` is given once.
    if let Some((workload, location)) = &spec.workload {
        argv.extend(["--workload".into(), workload.clone()]);
        flags.push(("--workload".into(), workload.clone(), location.clone()));
    }
    for setting in spec.settings_for(entry) {
        argv.extend(setting.args.iter().cloned());
        if let Some(flag) = setting.args.first() {
            let value = setting.args.get(1).cloned().unwrap_or_default();
            flags.push((flag.clone(), value, setting.location.clone()));
        }
    }
    for (axis, value) in axes {
        let args = axis.args(value).unwrap_or_default();
        argv.extend(args.iter().cloned());
        if let Some(a) = spec.axes.iter().find(|a| a.axis == *axis) {
            let flag = args.first().cloned().unwrap_or_else(|| axis.flag());
            flags.push((flag, value.clone(), a.location.clone()));
        }
    }
    argv.extend(["--quiet".into(), "--out".into(), dir.display().to_string()]);

    let point = |message: String| {
        let location = blamed(&message, &flags).unwrap_or(&target_location);
        let mut label = target.to_string();
        for (axis, value) in axes {
            label.push_str(&format!(" {}={value}", axis.name()));
        }
        spec.error_at(location, format!("point {label}: {message}"))
    };
    let args = match parse_run_args(&argv) {
        Ok(args) => args,
        Err(e) => return Err(point(clap_message(&e))),
    };
    let config = RunConfig::from_args(&args).map_err(|e| point(e.to_string()))?;
    if spec.capacity.is_some() {
        crate::capacity::check(&args).map_err(|e| point(e.0))?;
    }
    Ok((args, config))
}

/// The spec field whose option the message mentions first, else the one whose quoted
/// value it mentions (`unknown lock recipe 'etcd-mutex'`).
fn blamed<'a>(message: &str, flags: &'a [(String, String, Location)]) -> Option<&'a Location> {
    let first = |needle: &dyn Fn(&(String, String, Location)) -> String| {
        flags
            .iter()
            .filter_map(|f| {
                let needle = needle(f);
                message.match_indices(needle.as_str()).find_map(|(at, _)| {
                    let next = message[at + needle.len()..].chars().next();
                    let whole = !next.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-');
                    whole.then_some((at, &f.2))
                })
            })
            .min_by_key(|(at, _)| *at)
            .map(|(_, location)| location)
    };
    first(&|(flag, _, _)| flag.clone()).or_else(|| first(&|(_, value, _)| format!("'{value}'")))
}

/// `etcd-cluster_size=3-disk=tmpfs`; characters file systems and shells dislike become `_`.
fn dir_name(target: &str, axes: &[(Axis, String)]) -> String {
    let mut name = target.to_string();
    for (axis, value) in axes.iter().filter(|(_, v)| v != NOT_APPLICABLE) {
        name.push_str(&format!("-{}={value}", axis.name()));
    }
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._=-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use coordbench_results::kinds::value_name;

    fn spec(text: &str) -> Spec {
        Spec::parse(Path::new("t.toml"), text.to_string(), false).unwrap()
    }

    #[test]
    fn points_cover_targets_axes_and_repeats_with_their_own_directories() {
        let s = spec(
            "targets = [\"raft\", \"zab\"]\nworkload = \"lock\"\nrepeats = 2\n[axes]\nclients = [2, 4]\nrecipe = [\"herd-free\", \"naive\"]\n",
        );
        let points = points(&s, Path::new("/tmp/sw")).unwrap();
        assert_eq!(points.len(), 2 * 2 * 2 * 2);
        let first = &points[0];
        assert_eq!(first.name, "raft-clients=2-recipe=etcd-mutex-r1");
        assert_eq!(
            first.dir,
            Path::new("/tmp/sw/raft-clients=2-recipe=etcd-mutex-r1")
        );
        assert_eq!(
            (
                first.config.plan.clients,
                first.config.record().recipe.as_str()
            ),
            (2, "etcd-mutex")
        );
        assert!(first.args.generator.quiet);
        assert!(points
            .iter()
            .any(|p| p.name == "zab-clients=4-recipe=zk-recipe-r2"));
        let names: std::collections::BTreeSet<&str> =
            points.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names.len(), points.len());
    }

    #[test]
    fn an_interleaved_spec_runs_repeat_by_repeat() {
        let text = "targets = [\"raft\", \"zab\"]\nworkload = \"lock\"\nrepeats = 2\n";
        let names = |s: &Spec| {
            let p = points(s, Path::new("/tmp/sw")).unwrap();
            s.run_order(&p)
                .into_iter()
                .map(|i| p[i].name.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(&spec(text)),
            ["raft-r1", "raft-r2", "zab-r1", "zab-r2"]
        );
        let interleaved = spec(&format!("interleave = true\n{text}"));
        assert_eq!(
            names(&interleaved),
            ["raft-r1", "zab-r1", "raft-r2", "zab-r2"]
        );
    }

    #[test]
    fn a_release_not_installed_is_refused_at_its_line_and_other_targets_releases_are_skipped() {
        let s = spec(
            "targets = [\"etcd\"]\nworkload = \"kv-put\"\n[axes]\nserver_version = [\"9.9.9\"]\n",
        );
        let e = points(&s, Path::new("/tmp/sw")).unwrap_err().to_string();
        assert!(e.starts_with("t.toml:4: axes.server_version:"), "{e}");
        assert!(
            e.contains("run `coordbench install etcd 9.9.9`") && !e.contains('\n'),
            "{e}"
        );
        // Only ZooKeeper's releases: etcd has no point at all.
        let s = spec(
            "targets = [\"etcd\"]\nworkload = \"kv-put\"\n[axes]\nserver_version = [\"zookeeper@9.9.9\"]\n",
        );
        assert!(points(&s, Path::new("/tmp/sw")).unwrap().is_empty());
    }

    #[test]
    fn state_values_set_one_preload_each_and_capacity_specs_search_every_point() {
        let s = spec(
            "targets = [\"raft\"]\nworkload = \"kv-get\"\n[axes]\nstate = [\"keys=500\", \"watchers=200\", \"sessions=10\"]\n[capacity]\nslo = [\"p99<20ms\"]\nconfirm_duration = \"3s\"\n",
        );
        let capacity = s.capacity.as_ref().expect("[capacity]");
        assert_eq!(capacity.slos[0].to_string(), "p99<20ms");
        assert_eq!(capacity.confirm_duration, std::time::Duration::from_secs(3));
        let points = points(&s, Path::new("/tmp/sw")).unwrap();
        let preloads: Vec<_> = points.iter().map(|p| p.config.preload).collect();
        assert_eq!(preloads[0].keys, Some(500));
        assert_eq!((preloads[1].keys, preloads[1].watchers), (None, Some(200)));
        assert_eq!(preloads[2].sessions, Some(10));
        assert_eq!(points[0].name, "raft-state=keys=500-r1");
        let bad = Spec::parse(
            Path::new("t.toml"),
            "targets = [\"raft\"]\nworkload = \"kv-get\"\n[axes]\nstate = [\"leases=5\"]\n".into(),
            false,
        )
        .unwrap_err();
        assert!(
            bad.to_string()
                .starts_with("t.toml:4: axes.state: state value 'leases=5'"),
            "{bad}"
        );
        let lock_election = Spec::parse(
            Path::new("t.toml"),
            "targets = [\"raft\"]\nworkload = \"election\"\n[capacity]\nslo = [\"p99<20ms\"]\n"
                .into(),
            false,
        )
        .unwrap();
        let refused = points_err(&lock_election);
        assert!(
            refused.contains("capacity needs a workload with a rate"),
            "{refused}"
        );
    }

    fn points_err(s: &Spec) -> String {
        points(s, Path::new("/tmp/sw")).unwrap_err().to_string()
    }

    #[test]
    fn target_recipe_entries_pin_a_recipe_and_need_a_recipe_axis() {
        let s = spec(
            "targets = [\"raft\", \"redis:set-nx\", \"redis:redlock\", \"postgres:lease-row\"]\nworkload = \"lock\"\n[axes]\nclients = [1, 16]\nrecipe = [\"herd-free\"]\n",
        );
        let points = points(&s, Path::new("/tmp/sw")).unwrap();
        let names: Vec<&str> = points.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(points.len(), 8, "{names:?}");
        for name in [
            "raft-clients=1-recipe=etcd-mutex-r1",
            "redis-clients=16-recipe=redlock-r1",
            "postgres-clients=1-recipe=lease-row-r1",
        ] {
            assert!(names.contains(&name), "{name} in {names:?}");
        }
        let redlock = points
            .iter()
            .find(|p| p.name.starts_with("redis-clients=1-recipe=redlock"))
            .unwrap();
        assert_eq!(
            (
                redlock.target.as_str(),
                redlock.config.record().recipe.as_str()
            ),
            ("redis", "redlock")
        );
        let e = Spec::parse(
            Path::new("t.toml"),
            "targets = [\"redis:redlock\"]\nworkload = \"lock\"\n".into(),
            false,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("needs a recipe axis"), "{e}");
        // redis has no herd-free recipe to stand for.
        let s =
            spec("targets = [\"redis\"]\nworkload = \"lock\"\n[axes]\nrecipe = [\"herd-free\"]\n");
        let e = super::points(&s, Path::new("/tmp/sw"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no herd-free recipe") && !e.contains('\n'),
            "{e}"
        );
    }

    #[test]
    fn a_workload_axis_gives_each_target_one_point_per_workload() {
        let s = spec(
            "targets = [\"raft\", \"zab\"]\n[axes]\nworkload = [\"kv-put\", \"lock\"]\nclients = [1, 4]\n",
        );
        let points = points(&s, Path::new("/tmp/sw")).unwrap();
        assert_eq!(points.len(), 2 * 2 * 2);
        assert_eq!(points[0].name, "raft-workload=kv-put-clients=1-r1");
        for p in &points {
            // Parsed from one `--workload` (clap refuses it twice) set by the axis.
            let axis = &p.axes[0];
            assert_eq!(
                (axis.0, value_name(p.config.workload).as_str()),
                (Axis::Workload, axis.1.as_str())
            );
        }
        assert!(points
            .iter()
            .any(|p| p.name == "zab-workload=lock-clients=4-r1"));
    }

    /// An executable file at `dir/name`.
    fn executable(dir: &Path, name: &str) -> String {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.display().to_string()
    }

    #[test]
    fn binaries_that_differ_only_in_a_parent_directory_get_distinct_points() {
        let tmp = tempfile::TempDir::new().unwrap();
        let old = executable(&tmp.path().join("v1"), "coordbench");
        let new = executable(&tmp.path().join("v2"), "coordbench");
        let etcd = executable(&tmp.path().join("v1"), "etcd");
        let etcd_new = executable(&tmp.path().join("v2"), "etcd");
        let classpaths = ["/opt/zk-3.8/lib/*".to_string(), "/opt/zk-3.9/lib/*".into()];
        for (targets, axis, values) in [
            ("\"raft\", \"zab\"", "engine_bin", [&old, &new]),
            ("\"etcd\"", "etcd_bin", [&etcd, &etcd_new]),
            (
                "\"zookeeper\"",
                "zk_classpath",
                [&classpaths[0], &classpaths[1]],
            ),
        ] {
            let s = spec(&format!(
                "targets = [{targets}]\nworkload = \"kv-put\"\n[axes]\n{axis} = [\"{}\", \"{}\"]\n",
                values[0], values[1]
            ));
            let points = points(&s, Path::new("/tmp/sw")).unwrap();
            let names: std::collections::BTreeSet<&str> =
                points.iter().map(|p| p.name.as_str()).collect();
            assert_eq!(names.len(), points.len(), "{names:?}");
            let first = &points[0].name;
            assert!(first.contains(&format!("-{axis}=_")), "{first}");
            assert!(!first.contains(['/', '*']), "{first}");
        }
        let s = spec(&format!(
            "targets = [\"raft\"]\nworkload = \"kv-put\"\n[axes]\nengine_bin = [\"{old}\"]\n"
        ));
        let p = &points(&s, Path::new("/tmp/sw")).unwrap()[0];
        assert_eq!(p.config.engine_bin.as_deref(), Some(Path::new(&old)));
    }

    #[test]
    fn values_that_would_share_a_directory_are_refused_at_their_axis() {
        let s = spec(
            "targets = [\"zookeeper\"]\nworkload = \"kv-put\"\n[axes]\nzk_classpath = [\"/a/b_c\", \"/a_b/c\"]\n",
        );
        let e = points(&s, Path::new("/tmp/sw")).unwrap_err().to_string();
        assert!(e.starts_with("t.toml:4: axes.zk_classpath: points "), "{e}");
        assert!(e.contains("zookeeper-zk_classpath=_a_b_c-r1"), "{e}");
        let s = spec(
            "targets = [\"raft\"]\nworkload = \"kv-put\"\n[axes]\nclients = [2]\ndisk = [\"tmpfs\", \"tmpfs\"]\n",
        );
        let e = points(&s, Path::new("/tmp/sw")).unwrap_err().to_string();
        assert!(e.starts_with("t.toml:5: axes.disk: points "), "{e}");
        let s = spec("targets = [\"raft\", \"raft\"]\nworkload = \"kv-put\"\n");
        let e = points(&s, Path::new("/tmp/sw")).unwrap_err().to_string();
        assert!(e.starts_with("t.toml:1: targets: points "), "{e}");
    }

    #[test]
    fn the_secure_axis_secures_every_target() {
        let s = spec(
            "targets = [\"etcd\", \"raft\", \"zab\"]\nworkload = \"kv-put\"\n[axes]\nsecure = [false, true]\n",
        );
        let points = points(&s, Path::new("/tmp/sw")).unwrap();
        assert_eq!(points.len(), 6);
        for p in &points {
            let secure = p.name.contains("secure=true");
            assert_eq!(p.config.secure, secure, "{}", p.name);
            if p.config.target != TargetKind::Zab {
                assert_eq!(p.config.etcd_access_record.etcd_tls, secure, "{}", p.name);
            }
        }
    }

    #[test]
    fn the_ready_made_specs_expand_in_full_and_quick() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads");
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|e| e != "toml") || path.ends_with("Cargo.toml") {
                continue;
            }
            for quick in [false, true] {
                let text = std::fs::read_to_string(&path).unwrap();
                let (_, gate) =
                    Spec::parse_gate(&path, text, quick).unwrap_or_else(|e| panic!("{e}"));
                // A gate spec is two sweeps, one per side.
                let specs = if gate.is_gate() {
                    let g = crate::gate::spec::GateSpec::load(&path, quick, &Default::default())
                        .unwrap_or_else(|e| panic!("{e}"));
                    vec![g.baseline, g.candidate]
                } else {
                    vec![Spec::load(&path, quick).unwrap_or_else(|e| panic!("{e}"))]
                };
                for spec in specs {
                    match points(&spec, Path::new("/tmp/sw")) {
                        Ok(points) => assert!(!points.is_empty(), "{}", path.display()),
                        // A spec of releases needs them installed; that is the machine's
                        // state, not the spec's (its releases are checked where installed).
                        Err(e)
                            if e.to_string()
                                .contains("is not installed; run `coordbench install") => {}
                        Err(e) => panic!("{e}"),
                    }
                }
            }
            checked += 1;
        }
        assert!(checked >= 5, "{checked} specs found in {}", dir.display());
    }

    #[test]
    fn a_combination_run_refuses_is_located_at_the_field_it_names() {
        let s = spec(
            "targets = [\"raft\", \"zookeeper\"]\nworkload = \"lock\"\n[axes]\nrecipe = [\"etcd-mutex\"]\n",
        );
        let e = points(&s, Path::new("/tmp/sw")).unwrap_err().to_string();
        assert!(
            e.starts_with("t.toml:4: axes.recipe: point zookeeper"),
            "{e}"
        );
    }
}
