//! Election timeout ranges as the Raft paper writes them (`150-300`: drawn uniformly from
//! 150 ms to 300 ms, both included; `150ms-300ms` and `1s-2s` are the same form with units)
//! and their mapping to a core's ticks. `simulate election --timeouts` and `run
//! --election-timeout` both take them.

use std::fmt;

/// MIN-MAX in milliseconds, MIN ≤ MAX.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeoutRange {
    pub min_ms: u32,
    pub max_ms: u32,
}

/// Longest timeout accepted: beyond it a trial's simulated time is dominated by waiting.
const MAX_TIMEOUT_MS: u32 = 60_000;

impl TimeoutRange {
    /// Parses `MIN-MAX` (whole milliseconds, 1 ≤ MIN ≤ MAX ≤ 60000), each bound a plain
    /// number of ms or a duration with its unit (`150ms`, `1s`).
    pub fn parse(s: &str) -> Result<Self, String> {
        let (min, max) = s
            .split_once('-')
            .ok_or_else(|| format!("timeout range {s:?} is not MIN-MAX in ms, e.g. 150-300"))?;
        let number = |v: &str| {
            let v = v.trim();
            v.parse::<u32>()
                .ok()
                .or_else(|| whole_ms(humantime::parse_duration(v).ok()?))
                .ok_or_else(|| {
                    format!("timeout range {s:?}: {v:?} is not a whole number of ms (150 or 150ms)")
                })
        };
        let range = Self {
            min_ms: number(min)?,
            max_ms: number(max)?,
        };
        if range.min_ms == 0 || range.max_ms > MAX_TIMEOUT_MS {
            return Err(format!(
                "timeout range {s:?}: bounds must be within 1..={MAX_TIMEOUT_MS} ms"
            ));
        }
        if range.min_ms > range.max_ms {
            return Err(format!("timeout range {s:?}: MIN is above MAX"));
        }
        Ok(range)
    }

    /// The core's `[min, max)` election ticks for this inclusive range at `tick_us` per tick:
    /// `150-150` is exactly 150 ms, `150-151` every tick from 150 ms to 151 ms.
    pub fn ticks(&self, tick_us: u64) -> (u32, u32) {
        let ticks = |ms: u32| (u64::from(ms) * 1000 / tick_us) as u32;
        (ticks(self.min_ms), ticks(self.max_ms) + 1)
    }

    /// A number that tells ranges apart, for seeding.
    pub fn key(&self) -> u64 {
        (u64::from(self.min_ms) << 32) | u64::from(self.max_ms)
    }
}

/// `d` in whole milliseconds, if it is a whole number of them.
pub fn whole_ms(d: std::time::Duration) -> Option<u32> {
    (d.subsec_nanos() % 1_000_000 == 0)
        .then(|| u32::try_from(d.as_millis()).ok())
        .flatten()
}

impl fmt::Display for TimeoutRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.min_ms, self.max_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_maps_to_ticks() {
        let r = TimeoutRange::parse("150-155").unwrap();
        assert_eq!((r.min_ms, r.max_ms), (150, 155));
        assert_eq!(r.to_string(), "150-155");
        assert_eq!(r.ticks(100), (1500, 1551));
        assert_eq!(
            TimeoutRange::parse("150-150").unwrap().ticks(1000),
            (150, 151)
        );
        for same in ["150ms-300ms", "150 - 300", "150ms-300", "150-300ms"] {
            assert_eq!(
                TimeoutRange::parse(same),
                TimeoutRange::parse("150-300"),
                "{same}"
            );
        }
        let r = TimeoutRange::parse("1s-2s").unwrap();
        assert_eq!((r.min_ms, r.max_ms), (1000, 2000));
    }

    #[test]
    fn refuses_bad_ranges() {
        for bad in [
            "200-150",
            "150",
            "a-b",
            "0-10",
            "10-70000",
            "-5",
            "0ms-10ms",
            "1.5ms-3ms",
            "",
        ] {
            assert!(TimeoutRange::parse(bad).is_err(), "{bad}");
        }
    }
}
