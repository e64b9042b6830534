//! The reference programs scripts/build-interop.sh builds into a cache outside the
//! checkout (etcd's Go client checks, Curator's recipe checks, Go's benchstat): where a
//! test finds them. scripts/test.sh exports their paths (`COORDBENCH_INTEROP_*`); without
//! those variables the script is asked where the build of these sources would be.

use std::path::{Path, PathBuf};

/// The program `var` names: the variable's value, else what `scripts/build-interop.sh
/// --print` says; `None` (skipped, or a panic under CI) when it is not built.
pub fn program(var: &str) -> Option<PathBuf> {
    let path = match std::env::var_os(var).filter(|v| !v.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => built_path(var),
    };
    let shown = path.display().to_string();
    coordbench_sim::tools::installed_by(&shown, "scripts/build-interop.sh builds it")
        .then_some(path)
}

/// Where scripts/build-interop.sh puts (or would put) the build of these sources.
fn built_path(var: &str) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::process::Command::new("bash")
        .arg(root.join("scripts/build-interop.sh"))
        .arg("--print")
        .output()
        .expect("run scripts/build-interop.sh --print");
    assert!(
        out.status.success(),
        "scripts/build-interop.sh --print: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let prefix = format!("export {var}=");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix(&prefix).map(PathBuf::from))
        .unwrap_or_else(|| panic!("scripts/build-interop.sh --print names no {var}"))
}
