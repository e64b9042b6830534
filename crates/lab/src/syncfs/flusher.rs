//! The flusher: serves the syncs of one mount one at a time, as one device would: the real
//! `fsync`/`fdatasync` (unless the policy disables syncing), then the policy's delay, then
//! the reply. It runs on its own thread so that reads and writes of other files keep being
//! served by the FUSE thread while a sync waits.

use std::fs::File;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;

use fuser::ReplyEmpty;

use super::SyncPolicy;

/// One sync to serve: the file (or directory) to sync, whether data only, and the reply to
/// send once it is done.
struct Job {
    file: Arc<File>,
    datasync: bool,
    reply: ReplyEmpty,
}

/// The sending end; the thread ends when this is dropped (the mount went away).
pub struct Flusher {
    /// `None` under nofsync without delay: syncs are acknowledged at once.
    jobs: Option<mpsc::Sender<Job>>,
}

impl Flusher {
    pub fn start(policy: SyncPolicy) -> std::io::Result<Flusher> {
        if !policy.fsync && policy.delay.is_zero() {
            // nofsync: every sync is acknowledged at once, no thread needed.
            return Ok(Flusher { jobs: None });
        }
        let (tx, rx) = mpsc::channel::<Job>();
        thread::Builder::new()
            .name("syncfs-flusher".into())
            .spawn(move || {
                // Linux rounds sleeps up by the thread's timer slack (50 µs by default); with
                // 1 ns a 75 µs profile sleeps about 75 µs, as in the engines' Disk.
                // SAFETY: plain prctl on the calling thread.
                unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
                for job in rx {
                    let synced = if policy.fsync {
                        if job.datasync {
                            job.file.sync_data()
                        } else {
                            job.file.sync_all()
                        }
                    } else {
                        Ok(())
                    };
                    if !policy.delay.is_zero() {
                        thread::sleep(policy.delay);
                    }
                    match synced {
                        Ok(()) => job.reply.ok(),
                        Err(e) => job.reply.error(e.raw_os_error().unwrap_or(libc::EIO)),
                    }
                }
            })?;
        Ok(Flusher { jobs: Some(tx) })
    }

    /// Serves one sync: queued behind earlier ones, or acknowledged at once under nofsync.
    pub fn sync(&self, file: Arc<File>, datasync: bool, reply: ReplyEmpty) {
        match &self.jobs {
            Some(jobs) => {
                if let Err(mpsc::SendError(job)) = jobs.send(Job {
                    file,
                    datasync,
                    reply,
                }) {
                    job.reply.error(libc::EIO);
                }
            }
            None => reply.ok(),
        }
    }
}
