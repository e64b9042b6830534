//! Znode paths: ZooKeeper's validity rules (`PathUtils.validatePath`) and the parent /
//! name / ancestor arithmetic the tree and the watch manager need.
//!
//! A valid path is absolute, has no empty, `.` or `..` segments, no trailing slash (except
//! the root `/`), and none of the characters ZooKeeper refuses: NUL, C0 and C1 controls,
//! surrogates and the private-use area (Java's `\ud800`–`\uf8ff`, so every character
//! outside the Basic Multilingual Plane, which Java encodes as surrogates), and
//! `\ufff0`–`\uffff`.

use crate::error::TreeError;

/// The root znode.
pub const ROOT: &str = "/";

/// Checks `path` against ZooKeeper's rules; the error says why it is refused.
pub fn validate(path: &str) -> Result<(), TreeError> {
    let bad = |why: &str| {
        Err(TreeError::BadArguments(format!(
            "invalid path {path:?}: {why}"
        )))
    };
    if !path.starts_with('/') {
        return bad("must start with /");
    }
    if path.len() == 1 {
        return Ok(());
    }
    if path.ends_with('/') {
        return bad("must not end with /");
    }
    for segment in path[1..].split('/') {
        match segment {
            "" => return bad("empty node name"),
            "." | ".." => return bad("relative paths not allowed"),
            _ => {}
        }
    }
    if let Some(c) = path.chars().find(|&c| refused_char(c)) {
        return bad(&format!("invalid character U+{:04X}", u32::from(c)));
    }
    Ok(())
}

/// Checks the prefix of a sequential node: ZooKeeper validates `prefix + "1"`, so a prefix
/// may end with `/` (the node is then named by its counter alone).
pub fn validate_sequential(prefix: &str) -> Result<(), TreeError> {
    validate(&format!("{prefix}1"))
}

fn refused_char(c: char) -> bool {
    let c = u32::from(c);
    c == 0
        || (0x01..=0x1f).contains(&c)
        || (0x7f..=0x9f).contains(&c)
        || (0xd800..=0xf8ff).contains(&c)
        || (0xfff0..=0xffff).contains(&c)
        || c > 0xffff
}

/// The parent of a valid path; `None` for the root.
pub fn parent(path: &str) -> Option<&str> {
    if path == ROOT {
        return None;
    }
    match path.rfind('/') {
        Some(0) => Some(ROOT),
        Some(i) => Some(&path[..i]),
        None => None,
    }
}

/// The last segment of a valid path ("" for the root).
pub fn name(path: &str) -> &str {
    path.rfind('/').map_or(path, |i| &path[i + 1..])
}

/// `parent` + `/` + `name`.
pub fn join(parent: &str, name: &str) -> String {
    if parent == ROOT {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// The path itself, then each ancestor up to and including the root.
pub fn self_and_ancestors(path: &str) -> impl Iterator<Item = &str> {
    std::iter::successors(Some(path), |p| parent(p))
}

/// Whether `path` is `base` or lies under it.
pub fn is_within(path: &str, base: &str) -> bool {
    base == ROOT
        || path == base
        || (path.len() > base.len()
            && path.starts_with(base)
            && path.as_bytes()[base.len()] == b'/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validity_follows_zookeeper() {
        for ok in [
            "/",
            "/a",
            "/a/b",
            "/a.b",
            "/...",
            "/a/.b",
            "/é",
            "/a b",
            "/a-0000000001",
        ] {
            assert!(validate(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "a",
            "/a/",
            "//",
            "/a//b",
            "/.",
            "/a/..",
            "/a/./b",
            "/a\0",
            "/a\u{1}",
            "/\u{7f}",
            "/\u{9f}",
            "/\u{e000}",
            "/\u{fff0}",
            "/\u{1f600}",
        ] {
            assert!(
                matches!(validate(bad), Err(TreeError::BadArguments(_))),
                "{bad:?}"
            );
        }
        assert!(validate_sequential("/a/").is_ok());
        assert!(validate_sequential("/a//").is_err());
    }

    #[test]
    fn arithmetic() {
        assert_eq!(parent("/"), None);
        assert_eq!(parent("/a"), Some("/"));
        assert_eq!(parent("/a/b/c"), Some("/a/b"));
        assert_eq!(name("/a/b"), "b");
        assert_eq!(name("/"), "");
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/a", "b"), "/a/b");
        let all: Vec<&str> = self_and_ancestors("/a/b").collect();
        assert_eq!(all, ["/a/b", "/a", "/"]);
        assert!(is_within("/a/b", "/a"));
        assert!(is_within("/a", "/a"));
        assert!(is_within("/x", "/"));
        assert!(!is_within("/ab", "/a"));
        assert!(!is_within("/a", "/a/b"));
    }
}
