//! External tools some tests drive (Debian's etcdctl, ZooKeeper's zkCli.sh, the reference
//! client programs scripts/build-interop.sh builds): a test whose tool is missing is
//! skipped with a note on a developer's machine, but fails under CI (the `CI` environment
//! variable set, as CI runners do), so CI can never pass without running it.

use std::path::Path;

/// Whether the tool at `path` is installed. Missing: prints "skipped" and returns false,
/// or panics when `CI` is set.
pub fn installed(path: &str) -> bool {
    installed_by(path, "scripts/install-deps.sh installs it")
}

/// [`installed`] with what provides the tool (`hint`, in the note or the panic).
pub fn installed_by(path: &str, hint: &str) -> bool {
    if Path::new(path).exists() {
        return true;
    }
    let why = format!("{path} not installed ({hint})");
    if in_ci() {
        panic!("{why}; CI is set, so this test may not be skipped");
    }
    eprintln!("skipped: {why}");
    false
}

/// `CI` set to anything but empty, `0` or `false`.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn present_tools_run_and_missing_ones_skip_or_fail_under_ci() {
        assert!(installed("/"));
        let missing = "/nonexistent/coordbench-tool";
        if in_ci() {
            assert!(std::panic::catch_unwind(|| installed(missing)).is_err());
        } else {
            assert!(!installed(missing));
        }
    }
}
