//! Server release numbers (`3.6.16`) as `coordbench install` and `--server-version` take
//! them: parsed once, ordered numerically (3.10 after 3.9), printed without a leading `v`.

use std::fmt;
use std::str::FromStr;

/// A release `MAJOR.MINOR.PATCH` with an optional pre-release suffix (`3.7.0-rc.0`), which
/// orders before the release it precedes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Version {
    numbers: [u32; 3],
    pre: Option<String>,
}

impl Version {
    /// The release's `MAJOR.MINOR` line, e.g. `3.6`.
    pub fn minor_line(&self) -> (u32, u32) {
        (self.numbers[0], self.numbers[1])
    }
}

impl FromStr for Version {
    type Err = String;

    /// Takes `3.6.16`, `v3.6.16` and `3.7.0-rc.0`; anything else is refused in one line.
    fn from_str(text: &str) -> Result<Self, String> {
        let bad =
            || format!("'{text}' is not a release number: write MAJOR.MINOR.PATCH, e.g. 3.6.16");
        let trimmed = text.trim().trim_start_matches('v');
        let (release, pre) = match trimmed.split_once('-') {
            Some((r, p)) if !p.is_empty() => (r, Some(p.to_string())),
            Some(_) => return Err(bad()),
            None => (trimmed, None),
        };
        let parts: Vec<&str> = release.split('.').collect();
        if parts.len() != 3 {
            return Err(bad());
        }
        let mut numbers = [0u32; 3];
        for (slot, part) in numbers.iter_mut().zip(&parts) {
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            *slot = part.parse().map_err(|_| bad())?;
        }
        Ok(Version { numbers, pre })
    }
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        // A pre-release precedes its release: None sorts after Some here.
        self.numbers
            .cmp(&other.numbers)
            .then_with(|| match (&self.pre, &other.pre) {
                (None, None) => std::cmp::Ordering::Equal,
                (None, Some(_)) => std::cmp::Ordering::Greater,
                (Some(_), None) => std::cmp::Ordering::Less,
                (Some(a), Some(b)) => a.cmp(b),
            })
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c] = self.numbers;
        write!(f, "{a}.{b}.{c}")?;
        if let Some(pre) = &self.pre {
            write!(f, "-{pre}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Version {
        s.parse().unwrap()
    }

    #[test]
    fn parses_prints_and_orders_numerically() {
        assert_eq!(v("v3.6.16").to_string(), "3.6.16");
        assert!(v("3.10.0") > v("3.9.5"));
        assert!(v("3.6.16") > v("3.6.9"));
        assert!(v("3.7.0-rc.0") < v("3.7.0"));
        assert_eq!(v("3.9.5").minor_line(), (3, 9));
    }

    #[test]
    fn refuses_what_is_not_a_release_in_one_line() {
        for bad in ["", "3.6", "3.6.x", "latest", "3.6.16.1", "3.6.16-"] {
            let e = bad.parse::<Version>().unwrap_err();
            assert!(e.contains("MAJOR.MINOR.PATCH") && !e.contains('\n'), "{e}");
        }
    }
}
