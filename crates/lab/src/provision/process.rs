//! Server processes started by coordbench: spawning with a log file, signalling, reaping.
//!
//! Every member runs in its own process group, so a Ctrl-C in the terminal reaches only
//! coordbench (which then stops the members in order), and with `PR_SET_PDEATHSIG(SIGKILL)`,
//! so a member dies even if coordbench itself is SIGKILLed and cannot clean up.
//!
//! Caveat: the parent-death signal fires when the *thread* that forked the child exits, not
//! the process. Spawn members from a long-lived thread (the main thread or a tokio worker),
//! never from `spawn_blocking`, whose threads are retired after a short idle period.

use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// How often a waiting `terminate` polls the child; short, as etcd exits within milliseconds.
const POLL: Duration = Duration::from_millis(10);

/// How a member process is started: kept with the member so that a member brought down
/// on purpose can be started again the same way (same program, arguments, environment).
#[derive(Debug, Clone)]
pub struct Launch {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Environment variables the child must not inherit, see [`ManagedProcess::spawn`].
    pub env_remove: Vec<String>,
    /// Run as this user instead of coordbench's (postgres refuses to run as root).
    pub run_as: Option<RunAs>,
}

/// A user (and its primary group) a child process runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunAs {
    pub uid: u32,
    pub gid: u32,
}

impl RunAs {
    /// The system user `name`, if it exists.
    pub fn user(name: &str) -> Option<RunAs> {
        let c = std::ffi::CString::new(name).ok()?;
        // SAFETY: `c` is a valid NUL-terminated string; getpwnam returns NULL or a pointer
        // to a static record, which is read at once (no other thread of this process calls
        // getpwnam while a cluster starts).
        unsafe {
            let pw = libc::getpwnam(c.as_ptr());
            (!pw.is_null()).then(|| RunAs {
                uid: (*pw).pw_uid,
                gid: (*pw).pw_gid,
            })
        }
    }

    /// Sets `cmd` to run as this user (supplementary groups dropped).
    pub fn apply(self, cmd: &mut Command) {
        cmd.uid(self.uid).gid(self.gid);
    }
}

impl Launch {
    /// Starts the process with its output appended to `log_file`.
    pub fn spawn(&self, log_file: &Path) -> io::Result<ManagedProcess> {
        ManagedProcess::spawn_as(
            &self.program,
            &self.args,
            log_file,
            &self.env_remove,
            self.run_as,
        )
    }
}

/// A child server process owned by coordbench. Dropping it kills and reaps the process.
#[derive(Debug)]
pub struct ManagedProcess {
    child: Child,
    log_file: PathBuf,
    /// Set once the child has been reaped, so the pid is never signalled after it could
    /// have been reused.
    status: Option<ExitStatus>,
}

impl ManagedProcess {
    /// Starts `program args...` with stdout and stderr appended to `log_file` (created with
    /// its parent directories), stdin closed, in a new process group, dying with this thread.
    ///
    /// `envs_remove` names environment variables the child must not inherit (e.g. `ETCD_*`
    /// settings in the user's shell that would silently change the server's configuration).
    pub fn spawn<I, S>(
        program: &Path,
        args: I,
        log_file: &Path,
        envs_remove: &[String],
    ) -> io::Result<ManagedProcess>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Self::spawn_as(program, args, log_file, envs_remove, None)
    }

    /// [`spawn`](Self::spawn) as another user (`run_as`), when given.
    pub fn spawn_as<I, S>(
        program: &Path,
        args: I,
        log_file: &Path,
        envs_remove: &[String],
        run_as: Option<RunAs>,
    ) -> io::Result<ManagedProcess>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        if let Some(parent) = log_file.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let out = OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_file)?;
        let err = out.try_clone()?;

        let mut cmd = Command::new(program);
        cmd.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .process_group(0);
        for key in envs_remove {
            cmd.env_remove(key);
        }
        if let Some(user) = run_as {
            user.apply(&mut cmd);
        }
        let parent_pid = std::process::id() as libc::pid_t;
        // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
        // system calls (prctl, getppid, kill); it allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0,
                    0,
                    0,
                ) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                // If coordbench died between fork and prctl, the signal was never armed.
                if libc::getppid() != parent_pid {
                    libc::kill(libc::getpid(), libc::SIGKILL);
                }
                Ok(())
            });
        }
        let child = cmd.spawn()?;
        Ok(ManagedProcess {
            child,
            log_file: log_file.to_path_buf(),
            status: None,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn log_file(&self) -> &Path {
        &self.log_file
    }

    /// The exit status if the process has exited (reaping it), `None` while it runs.
    pub fn try_exited(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            // try_wait only fails if the child cannot be waited for (e.g. reaped by someone
            // else); report it as still running rather than invent a status.
            if let Ok(Some(status)) = self.child.try_wait() {
                self.status = Some(status);
            }
        }
        self.status
    }

    /// The last `lines` lines of the log file (lossy UTF-8; empty if it cannot be read).
    pub fn log_tail(&self, lines: usize) -> String {
        read_tail(&self.log_file, lines).unwrap_or_default()
    }

    /// Sends `signal` unless the process has already been reaped.
    pub fn signal(&mut self, signal: libc::c_int) -> io::Result<()> {
        if self.try_exited().is_some() {
            return Ok(());
        }
        // SAFETY: plain syscall; the pid belongs to our unreaped child, so it cannot have
        // been recycled for another process.
        if unsafe { libc::kill(self.child.id() as libc::pid_t, signal) } != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::ESRCH) {
                return Err(e);
            }
        }
        Ok(())
    }

    /// Waits until the process exits or `deadline` passes; returns the status if it exited.
    pub fn wait_until(&mut self, deadline: Instant) -> Option<ExitStatus> {
        loop {
            if let Some(status) = self.try_exited() {
                return Some(status);
            }
            let now = Instant::now();
            if now >= deadline {
                return None;
            }
            std::thread::sleep(POLL.min(deadline - now));
        }
    }

    /// SIGTERM, wait up to `grace`, then SIGKILL; always reaps. A stopped (paused) process
    /// is continued first so it can act on the SIGTERM.
    pub fn terminate(&mut self, grace: Duration) -> Option<ExitStatus> {
        let _ = self.signal(libc::SIGTERM);
        let _ = self.signal(libc::SIGCONT);
        if let Some(status) = self.wait_until(Instant::now() + grace) {
            return Some(status);
        }
        self.kill()
    }

    /// SIGKILL and reap. Returns the exit status, or `None` if reaping failed.
    pub fn kill(&mut self) -> Option<ExitStatus> {
        if self.try_exited().is_none() {
            let _ = self.signal(libc::SIGKILL);
            if let Ok(status) = self.child.wait() {
                self.status = Some(status);
            }
        }
        self.status
    }

    /// Freezes the process (SIGSTOP), e.g. to simulate a stalled member.
    pub fn pause(&mut self) -> io::Result<()> {
        self.signal(libc::SIGSTOP)
    }

    /// Continues a process frozen by [`pause`](Self::pause).
    pub fn resume(&mut self) -> io::Result<()> {
        self.signal(libc::SIGCONT)
    }
}

impl Drop for ManagedProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// True if a process with this pid exists (also one of another user's).
pub fn process_alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks for existence.
    pid > 0
        && (unsafe { libc::kill(pid, 0) } == 0
            || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM))
}

/// The last `lines` lines of a file, reading at most its last 64 KiB.
pub fn read_tail(path: &Path, lines: usize) -> io::Result<String> {
    const MAX: u64 = 64 * 1024;
    let mut f = File::open(path)?;
    let len = f.metadata()?.len();
    let start = len.saturating_sub(MAX);
    f.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    let all: Vec<&str> = text.lines().collect();
    // A read that began mid-file starts with a partial line; drop it.
    let all = if start > 0 && all.len() > 1 {
        &all[1..]
    } else {
        &all[..]
    };
    let from = all.len().saturating_sub(lines);
    Ok(all[from..].join("\n"))
}
