//! How long this process has existed: from its start (the fork/exec that a launcher does
//! back to back) to now, for the start-up lines of a member's log (`since_exec_ms`).
//!
//! The kernel records a process's start in /proc/self/stat, field 22 (`starttime`, in clock
//! ticks since boot, `sysconf(_SC_CLK_TCK)` per second); CLOCK_BOOTTIME counts from the same
//! boot, in nanoseconds. Their difference is therefore only as precise as one tick: 10 ms
//! at the usual 100 ticks per second. Where either cannot be read (not Linux, no /proc),
//! the answer is `None`, and callers leave the figure out.

use std::time::Duration;

/// Time since this process started, to one clock tick; `None` if it cannot be read.
pub fn elapsed() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let start = parse_start_ticks(&stat)?;
    after_start(start, ticks_per_second()?, boot_clock()?)
}

/// [`elapsed`] in whole milliseconds.
pub fn millis() -> Option<u64> {
    elapsed().map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// Field 22 (`starttime`) of a /proc/PID/stat line. Field 2, the command name in
/// parentheses, may itself hold spaces and parentheses, so fields are counted after the
/// last `)`: the first one there is field 3.
pub fn parse_start_ticks(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_ascii_whitespace().nth(22 - 3)?.parse().ok()
}

/// The time from a start `start_ticks` ticks after boot to `now` (since boot); `None` for
/// no ticks per second or a start after `now`.
pub fn after_start(start_ticks: u64, ticks_per_second: u64, now: Duration) -> Option<Duration> {
    if ticks_per_second == 0 {
        return None;
    }
    let whole = Duration::from_secs(start_ticks / ticks_per_second);
    // In u128: the remainder times 10^9 overflows u64 for absurd tick rates.
    let nanos =
        u128::from(start_ticks % ticks_per_second) * 1_000_000_000 / u128::from(ticks_per_second);
    let part = Duration::from_nanos(u64::try_from(nanos).ok()?);
    now.checked_sub(whole + part)
}

#[cfg(target_os = "linux")]
fn ticks_per_second() -> Option<u64> {
    // SAFETY: sysconf only reads a configuration value.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(t).ok().filter(|&t| t > 0)
}

#[cfg(target_os = "linux")]
fn boot_clock() -> Option<Duration> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, properly sized out-parameter.
    if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } != 0 {
        return None;
    }
    Some(Duration::new(
        u64::try_from(ts.tv_sec).ok()?,
        u32::try_from(ts.tv_nsec).ok()?,
    ))
}

#[cfg(not(target_os = "linux"))]
fn ticks_per_second() -> Option<u64> {
    None
}

#[cfg(not(target_os = "linux"))]
fn boot_clock() -> Option<Duration> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    // A real line's shape (pid, (comm), state, ...); field 22, starttime, is 4242.
    const STAT: &str = "1234 (coordbench) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 \
                        6 0 4242 123456789 1000 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1";

    #[test]
    fn start_ticks_are_field_22_whatever_the_command_name_holds() {
        assert_eq!(parse_start_ticks(STAT), Some(4242));
        let odd = STAT.replace("(coordbench)", "(a b) (c) d)");
        assert_eq!(parse_start_ticks(&odd), Some(4242));
    }

    #[test]
    fn lines_cut_short_or_garbled_give_nothing() {
        assert_eq!(parse_start_ticks(""), None);
        assert_eq!(parse_start_ticks("1234 (coordbench"), None);
        assert_eq!(parse_start_ticks("1234 (x) S 1 2 3"), None);
        let garbled = STAT.replace(" 4242 ", " 42x2 ");
        assert_eq!(parse_start_ticks(&garbled), None);
    }

    #[test]
    fn elapsed_is_now_less_the_start_in_ticks() {
        let now = Duration::from_millis(50_000);
        assert_eq!(
            after_start(4_975, 100, now),
            Some(Duration::from_millis(250))
        );
        assert_eq!(after_start(5_000, 100, now), Some(Duration::ZERO));
        assert_eq!(after_start(5_001, 100, now), None, "a start after now");
        assert_eq!(after_start(1, 0, now), None, "no ticks per second");
        // An absurd tick rate must not overflow: just under one second after boot.
        assert_eq!(
            after_start(u64::MAX - 1, u64::MAX, now).map(|d| d.as_secs()),
            Some(49)
        );
    }

    #[test]
    fn this_process_has_existed_for_a_while_if_proc_is_there() {
        if std::path::Path::new("/proc/self/stat").exists() {
            let d = elapsed().expect("readable on Linux");
            assert!(d < Duration::from_secs(24 * 3600), "{d:?}");
        }
    }
}
