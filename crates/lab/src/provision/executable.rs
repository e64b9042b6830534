//! Finding the server executables launchers start (etcd, java): an explicit path, else a
//! name on PATH, else the Debian package's location.

use std::path::{Path, PathBuf};

/// Resolves an executable: an explicit path must be an executable file (a bare name is
/// looked up on PATH); with none, `name` on PATH, else `fallback`. On failure returns the
/// path (or bare name) that was tried, for the caller's error message.
pub fn find_executable(
    explicit: Option<&Path>,
    name: &str,
    fallback: &str,
) -> Result<PathBuf, PathBuf> {
    let candidate = match explicit {
        Some(p) if p.components().count() > 1 => Some(p.to_path_buf()),
        Some(bare) => find_on_path(bare),
        None => find_on_path(Path::new(name)).or_else(|| Some(PathBuf::from(fallback))),
    };
    match candidate {
        Some(p) if is_executable(&p) => Ok(p),
        Some(p) => Err(p),
        None => Err(explicit.unwrap_or(Path::new(name)).to_path_buf()),
    }
}

fn find_on_path(name: &Path) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}
