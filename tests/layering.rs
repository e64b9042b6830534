//! The workspace's layers, checked: every crate depends only on crates of lower layers,
//! and inside the crates people change most, every module uses only modules of lower
//! layers (or of its own). The layers are listed here, bottom first, and ARCHITECTURE.md
//! draws them; a new crate or module must be placed in one before this test passes.
//!
//! Cargo already refuses cycles between crates and the compiler a `use` of a crate that is
//! not a dependency; this test refuses the dependency itself when it reaches up, and the
//! module-level edges the compiler cannot see.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Crates, bottom layer first. A crate may depend on crates of lower layers only.
const CRATE_LAYERS: &[&[&str]] = &[
    // Foundations: no coordbench dependency.
    &[
        "coordbench-splitmix",
        "coordbench-tls",
        "coordbench-results",
        "coordbench-kv",
        "coordbench-tree",
    ],
    // ZooKeeper's wire codec (over the tree's records), shared by the Zab engine and the driver.
    &["coordbench-zk-proto"],
    // Sans-IO consensus cores and the simulation support, drivers of the real APIs.
    &[
        "coordbench-raft",
        "coordbench-zab",
        "coordbench-sim",
        "coordbench-drivers",
    ],
    // The engines' node runtime; workloads over the drivers.
    &["coordbench-node", "coordbench-workloads"],
    // The engines' client APIs; the cluster lab.
    &["coordbench-etcd-api", "coordbench-zk-api", "coordbench-lab"],
    // One run; one engine member; reading results.
    &[
        "coordbench-bench",
        "coordbench-serve",
        "coordbench-analysis",
    ],
    // The binary: the CLI and the commands that compose the rest.
    &["coordbench"],
];

/// Modules of one crate, bottom layer first: a module may use modules of its own layer and
/// lower ones. Modules that share a layer may use each other.
struct ModuleLayers {
    src: &'static str,
    layers: &'static [&'static [&'static str]],
}

const MODULE_LAYERS: &[ModuleLayers] = &[
    ModuleLayers {
        src: "crates/results/src",
        layers: &[
            &[
                "files",
                "format",
                "kinds",
                "noise",
                "outcome",
                "parse",
                "schema",
                "spec_error",
                "tails",
                "time",
                "timeout_range",
                "version",
            ],
            &["axis", "record"],
        ],
    },
    ModuleLayers {
        src: "crates/lab/src",
        layers: &[
            &[
                "affinity",
                "cumulative",
                "election_timing",
                "environment",
                "netdelay",
                "secret",
                "signals",
            ],
            &["resources"],
            &["install", "provision", "syncfs"],
        ],
    },
    ModuleLayers {
        src: "crates/bench/src",
        layers: &[
            &["engine_cost", "generator", "runner", "shard"],
            &[
                "args",
                "config",
                "etcd_access",
                "fault",
                "preload",
                "server_stats",
                "targets",
                "tls_access",
                "zk_access",
            ],
            &["console", "outputs"],
            &["run"],
        ],
    },
    ModuleLayers {
        src: "crates/analysis/src",
        layers: &[&["slo"], &["report", "simulate"], &["compare"]],
    },
    ModuleLayers {
        src: "src",
        layers: &[
            &["allocator", "capacity", "merge"],
            &["sweep"],
            &["gate"],
            &["cli"],
        ],
    },
];

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn layer_of<'a>(layers: &'a [&'a [&'a str]], name: &str) -> Option<usize> {
    layers.iter().position(|layer| layer.contains(&name))
}

/// Every workspace member's manifest, by package name.
fn manifests() -> BTreeMap<String, toml::Table> {
    let root = workspace_root();
    let workspace: toml::Table = read_toml(&root.join("Cargo.toml"));
    let members = workspace["workspace"]["members"]
        .as_array()
        .expect("workspace.members");
    members
        .iter()
        .map(|m| {
            let manifest = read_toml(&root.join(m.as_str().expect("a path")).join("Cargo.toml"));
            let name = manifest["package"]["name"]
                .as_str()
                .expect("package.name")
                .to_string();
            (name, manifest)
        })
        .collect()
}

fn read_toml(path: &Path) -> toml::Table {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.parse()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The workspace crates `manifest` depends on (normal and build dependencies; tests may
/// reach anywhere).
fn workspace_dependencies(manifest: &toml::Table) -> Vec<String> {
    ["dependencies", "build-dependencies"]
        .iter()
        .filter_map(|table| manifest.get(*table).and_then(|t| t.as_table()))
        .flat_map(|deps| deps.iter())
        .filter(|(_, spec)| spec.get("path").is_some())
        .map(|(name, spec)| {
            spec.get("package")
                .and_then(|p| p.as_str())
                .unwrap_or(name)
                .to_string()
        })
        .collect()
}

/// Crate edges that do not go strictly down, as `from -> to` lines.
fn upward_crate_edges(manifests: &BTreeMap<String, toml::Table>) -> Vec<String> {
    let mut wrong = Vec::new();
    for (name, manifest) in manifests {
        let Some(from) = layer_of(CRATE_LAYERS, name) else {
            wrong.push(format!("{name} is in no layer: add it to CRATE_LAYERS"));
            continue;
        };
        for dep in workspace_dependencies(manifest) {
            match layer_of(CRATE_LAYERS, &dep) {
                Some(to) if to < from => {}
                Some(_) => wrong.push(format!("{name} -> {dep}: not a lower layer")),
                None => wrong.push(format!("{dep} is in no layer: add it to CRATE_LAYERS")),
            }
        }
    }
    wrong
}

/// The top-level module a source file belongs to (`runner` for `runner/mod.rs`), `None`
/// for the crate root.
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_string())
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The file without its test modules: everything from the first `#[cfg(test)]` on (test
/// modules come last in this codebase's files).
fn without_tests(text: &str) -> &str {
    text.find("#[cfg(test)]").map_or(text, |at| &text[..at])
}

/// The modules a source text names as `crate::module` (in paths and in `use crate::{..}`
/// groups).
fn crate_modules_used(text: &str) -> Vec<String> {
    let mut used = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        rest = &rest[at + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // another crate's name ending in `crate`
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != "self" {
                    used.push(name);
                }
            }
        } else {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            used.push(name);
        }
    }
    used
}

/// Module edges of one crate that reach a higher layer, and modules in no layer.
fn upward_module_edges(crate_layers: &ModuleLayers, src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut wrong = Vec::new();
    for file in files {
        let Some(module) = module_of(src, &file) else {
            continue;
        };
        let Some(from) = layer_of(crate_layers.layers, &module) else {
            wrong.push(format!(
                "{}: module {module} is in no layer",
                crate_layers.src
            ));
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("a source file");
        for used in crate_modules_used(without_tests(&text)) {
            match layer_of(crate_layers.layers, &used) {
                Some(to) if to <= from => {}
                Some(_) => wrong.push(format!(
                    "{}: {module} uses {used}, a higher layer",
                    file.strip_prefix(workspace_root())
                        .unwrap_or(&file)
                        .display()
                )),
                None => {} // an item of the crate root, not a module
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    wrong
}

#[test]
fn every_crate_depends_only_on_lower_layers() {
    let wrong = upward_crate_edges(&manifests());
    assert!(
        wrong.is_empty(),
        "crate layering broken:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn every_module_uses_only_its_own_or_lower_layers() {
    let root = workspace_root();
    let wrong: Vec<String> = MODULE_LAYERS
        .iter()
        .flat_map(|layers| upward_module_edges(layers, &root.join(layers.src)))
        .collect();
    assert!(
        wrong.is_empty(),
        "module layering broken:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn the_check_sees_an_upward_use() {
    // A lab module reaching up into the bench crate's layer, or a runner using the run.
    let bench = &MODULE_LAYERS[2];
    let from = layer_of(bench.layers, "runner").expect("runner has a layer");
    let used = crate_modules_used("use crate::run::measure;\nlet x = crate::{config, outputs};");
    assert_eq!(used, ["run", "config", "outputs"]);
    assert!(used
        .iter()
        .all(|m| layer_of(bench.layers, m).expect("a layer") > from));
    let mut manifests = BTreeMap::new();
    let lab: toml::Table =
        "[package]\nname = \"coordbench-lab\"\n[dependencies]\ncoordbench-bench = { path = \"../bench\" }"
            .parse()
            .expect("a manifest");
    manifests.insert("coordbench-lab".to_string(), lab);
    assert_eq!(
        upward_crate_edges(&manifests),
        ["coordbench-lab -> coordbench-bench: not a lower layer"]
    );
}
