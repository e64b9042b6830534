//! CPU pinning: keeps the load generator and the servers it measures on separate cores.
//!
//! On a small machine the generator and the members compete for the same cores, so a
//! cheaper server also leaves more CPU to the generator and the comparison measures both.
//! `--pin-client 0 --pin-servers 1` gives each side its own cores. Pinning is applied to
//! every thread of a process (Linux affinity is per thread); threads created later inherit
//! the affinity of the thread that creates them, which is by then pinned too.
//! `run --realtime` also gives the generator's threads a real-time priority, so that what
//! else runs on its cores cannot delay its open-loop starts.

use std::fmt;
use std::str::FromStr;

/// A set of CPU numbers, written like `taskset -c`: `0`, `0-1`, `0,2-3`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(Vec<usize>);

/// Why a CPU list was refused or could not be applied.
#[derive(Debug, thiserror::Error)]
pub enum AffinityError {
    #[error("invalid CPU list '{0}': write CPU numbers like 0, 0-1 or 0,2-3")]
    Syntax(String),
    #[error("CPU {cpu} is not available to coordbench (available: {available})")]
    Unavailable { cpu: usize, available: CpuList },
    #[error("cannot pin process {pid} to CPUs {cpus}: {source}")]
    Apply {
        pid: u32,
        cpus: CpuList,
        #[source]
        source: std::io::Error,
    },
}

impl CpuList {
    pub fn cpus(&self) -> &[usize] {
        &self.0
    }

    /// The CPUs this process may run on.
    pub fn available() -> CpuList {
        // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it for this thread.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        let ok = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
        if ok != 0 {
            return CpuList(Vec::new());
        }
        CpuList(
            (0..libc::CPU_SETSIZE as usize)
                .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
                .collect(),
        )
    }

    /// Refuses CPUs this process cannot use, so a typo fails before anything starts.
    pub fn check_available(&self) -> Result<(), AffinityError> {
        let available = CpuList::available();
        match self.0.iter().find(|c| !available.0.contains(c)) {
            Some(&cpu) => Err(AffinityError::Unavailable { cpu, available }),
            None => Ok(()),
        }
    }

    fn to_cpu_set(&self) -> libc::cpu_set_t {
        // SAFETY: zeroed is a valid empty cpu_set_t; CPU_SET stays within CPU_SETSIZE
        // because parsing refuses larger numbers.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in &self.0 {
            unsafe { libc::CPU_SET(c, &mut set) };
        }
        set
    }

    /// Pins every thread of process `pid` (listed in /proc/PID/task) to these CPUs.
    pub fn pin_process(&self, pid: u32) -> Result<(), AffinityError> {
        let apply_err = |source| AffinityError::Apply {
            pid,
            cpus: self.clone(),
            source,
        };
        let set = self.to_cpu_set();
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).map_err(apply_err)?;
        for task in tasks {
            let tid: libc::pid_t = match task.map_err(apply_err)?.file_name().to_str() {
                Some(name) => match name.parse() {
                    Ok(tid) => tid,
                    Err(_) => continue,
                },
                None => continue,
            };
            // SAFETY: set is a valid cpu_set_t of the size passed.
            let rc = unsafe { libc::sched_setaffinity(tid, std::mem::size_of_val(&set), &set) };
            // A thread that exited since the listing is no error.
            if rc != 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() != Some(libc::ESRCH) {
                    return Err(apply_err(e));
                }
            }
        }
        Ok(())
    }
}

impl FromStr for CpuList {
    type Err = AffinityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || AffinityError::Syntax(s.to_string());
        let parse = |n: &str| -> Result<usize, AffinityError> {
            let n: usize = n.trim().parse().map_err(|_| bad())?;
            if n >= libc::CPU_SETSIZE as usize {
                return Err(bad());
            }
            Ok(n)
        };
        let mut cpus = Vec::new();
        for part in s.split(',') {
            match part.split_once('-') {
                Some((lo, hi)) => {
                    let (lo, hi) = (parse(lo)?, parse(hi)?);
                    if lo > hi {
                        return Err(bad());
                    }
                    cpus.extend(lo..=hi);
                }
                None => cpus.push(parse(part)?),
            }
        }
        cpus.sort_unstable();
        cpus.dedup();
        Ok(CpuList(cpus))
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|c| c.to_string()).collect();
        f.write_str(&parts.join(","))
    }
}

impl serde::Serialize for CpuList {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// The real-time priority (SCHED_FIFO) of the generator's threads under `run --realtime`:
/// above every normal task, low among real-time ones, so the kernel's own real-time
/// threads still preempt it.
pub const REALTIME_PRIORITY: i32 = 10;

/// Whether this process's threads took [`REALTIME_PRIORITY`].
static REALTIME: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Moves the calling thread to SCHED_FIFO at [`REALTIME_PRIORITY`], so that a busy machine
/// cannot keep it off its CPU (the kernel's real-time throttling still leaves other tasks
/// 5% of each second). Fails where the process may not (no root, CAP_SYS_NICE or rtprio
/// limit).
pub fn make_current_thread_realtime() -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: REALTIME_PRIORITY,
    };
    // SAFETY: pid 0 is the calling thread; param is a valid sched_param.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    REALTIME.store(true, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// Whether any thread of this process took the real-time priority.
pub fn realtime() -> bool {
    REALTIME.load(std::sync::atomic::Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_ranges_and_duplicates_parse_like_taskset() {
        let l: CpuList = "3,0-1,1".parse().unwrap();
        assert_eq!(l.cpus(), &[0, 1, 3]);
        assert_eq!(l.to_string(), "0,1,3");
    }

    #[test]
    fn malformed_lists_are_refused() {
        for bad in ["", "a", "1-", "2-1", "0,,1", "100000"] {
            assert!(bad.parse::<CpuList>().is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn an_unavailable_cpu_is_named() {
        let last = *CpuList::available().cpus().last().unwrap();
        let err = CpuList(vec![last + 1]).check_available().unwrap_err();
        assert!(
            err.to_string().contains(&format!("CPU {}", last + 1)),
            "{err}"
        );
    }

    #[test]
    fn pinning_a_process_moves_all_its_threads() {
        // A child `sleep` with its own thread list; pin it to the first available CPU.
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let first = CpuList(vec![CpuList::available().cpus()[0]]);
        first.pin_process(child.id()).unwrap();
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
        let allowed = status
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list:"))
            .unwrap()
            .split_whitespace()
            .nth(1)
            .unwrap()
            .to_string();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(allowed, first.to_string());
    }
}
