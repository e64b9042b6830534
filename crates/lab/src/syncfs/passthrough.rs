//! The passthrough: every FUSE request served on the backing directory with plain file
//! system calls, except syncs, which go to the [`Flusher`]. Inode numbers are handed out
//! per backing path (the root is FUSE's root inode) and follow renames.

use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    FileAttr, FileType, Filesystem, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyEmpty,
    ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, TimeOrNow, FUSE_ROOT_ID,
};
use libc::c_int;

use super::flusher::Flusher;

/// How long the kernel may cache attributes and names: every change goes through this
/// filesystem, so the cache cannot go stale behind its back.
const TTL: Duration = Duration::from_secs(1);

pub struct Passthrough {
    paths: HashMap<u64, PathBuf>,
    inos: HashMap<PathBuf, u64>,
    next_ino: u64,
    files: HashMap<u64, Arc<File>>,
    next_fh: u64,
    flusher: Flusher,
    root: PathBuf,
}

fn errno(e: io::Error) -> c_int {
    e.raw_os_error().unwrap_or(libc::EIO)
}

fn cstr(path: &Path) -> Result<CString, c_int> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)
}

fn time(secs: i64, nsecs: i64) -> SystemTime {
    if secs < 0 {
        return UNIX_EPOCH;
    }
    UNIX_EPOCH + Duration::new(secs as u64, nsecs.clamp(0, 999_999_999) as u32)
}

fn attr_of(ino: u64, m: &fs::Metadata) -> FileAttr {
    let t = m.file_type();
    let kind = if t.is_dir() {
        FileType::Directory
    } else if t.is_symlink() {
        FileType::Symlink
    } else {
        FileType::RegularFile
    };
    FileAttr {
        ino,
        size: m.size(),
        blocks: m.blocks(),
        atime: time(m.atime(), m.atime_nsec()),
        mtime: time(m.mtime(), m.mtime_nsec()),
        ctime: time(m.ctime(), m.ctime_nsec()),
        crtime: UNIX_EPOCH,
        kind,
        perm: (m.mode() & 0o7777) as u16,
        nlink: m.nlink() as u32,
        uid: m.uid(),
        gid: m.gid(),
        rdev: m.rdev() as u32,
        blksize: m.blksize() as u32,
        flags: 0,
    }
}

/// Opens a backing file for a FUSE open/create with `flags`. Sync flags are dropped (the
/// kernel turns O_SYNC/O_DSYNC writes into sync requests, which get the delay) and so is
/// O_APPEND (the kernel sends appends with their offset).
fn open_backing(path: &Path, flags: c_int, create_mode: Option<u32>) -> io::Result<File> {
    let access = flags & libc::O_ACCMODE;
    let writes = access == libc::O_WRONLY || access == libc::O_RDWR;
    let mut o = OpenOptions::new();
    o.read(access == libc::O_RDONLY || access == libc::O_RDWR)
        .write(writes)
        .custom_flags(
            flags
                & !(libc::O_ACCMODE
                    | libc::O_CREAT
                    | libc::O_EXCL
                    | libc::O_TRUNC
                    | libc::O_APPEND
                    | libc::O_SYNC
                    | libc::O_DSYNC
                    | libc::O_DIRECT
                    | libc::O_NOCTTY),
        );
    if writes && flags & libc::O_TRUNC != 0 {
        o.truncate(true);
    }
    if let Some(mode) = create_mode {
        if flags & libc::O_EXCL != 0 {
            o.create_new(true);
        } else {
            o.create(true);
        }
        o.mode(mode);
    }
    o.open(path)
}

impl Passthrough {
    pub fn new(root: PathBuf, flusher: Flusher) -> Passthrough {
        let mut fs = Passthrough {
            paths: HashMap::new(),
            inos: HashMap::new(),
            next_ino: FUSE_ROOT_ID + 1,
            files: HashMap::new(),
            next_fh: 1,
            flusher,
            root: root.clone(),
        };
        fs.paths.insert(FUSE_ROOT_ID, root.clone());
        fs.inos.insert(root, FUSE_ROOT_ID);
        fs
    }

    fn path(&self, ino: u64) -> Result<PathBuf, c_int> {
        self.paths.get(&ino).cloned().ok_or(libc::ENOENT)
    }

    fn child(&self, parent: u64, name: &OsStr) -> Result<PathBuf, c_int> {
        if name.as_bytes().contains(&b'/') {
            return Err(libc::EINVAL);
        }
        Ok(self.path(parent)?.join(name))
    }

    fn ino_for(&mut self, path: &Path) -> u64 {
        if let Some(&ino) = self.inos.get(path) {
            return ino;
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        self.paths.insert(ino, path.to_path_buf());
        self.inos.insert(path.to_path_buf(), ino);
        ino
    }

    fn forget_path(&mut self, path: &Path) {
        if let Some(ino) = self.inos.remove(path) {
            self.paths.remove(&ino);
        }
    }

    fn attr(&mut self, path: &Path) -> Result<FileAttr, c_int> {
        let m = fs::symlink_metadata(path).map_err(errno)?;
        Ok(attr_of(self.ino_for(path), &m))
    }

    fn add_file(&mut self, file: File) -> u64 {
        let fh = self.next_fh;
        self.next_fh += 1;
        self.files.insert(fh, Arc::new(file));
        fh
    }

    fn file(&self, fh: u64) -> Result<Arc<File>, c_int> {
        self.files.get(&fh).cloned().ok_or(libc::EBADF)
    }

    fn set_attrs(
        &mut self,
        ino: u64,
        mode: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        fh: Option<u64>,
    ) -> Result<FileAttr, c_int> {
        let path = self.path(ino)?;
        if let Some(size) = size {
            match fh.and_then(|fh| self.files.get(&fh)) {
                Some(f) => f.set_len(size),
                None => OpenOptions::new()
                    .write(true)
                    .open(&path)
                    .and_then(|f| f.set_len(size)),
            }
            .map_err(errno)?;
        }
        if let Some(mode) = mode {
            fs::set_permissions(&path, fs::Permissions::from_mode(mode & 0o7777)).map_err(errno)?;
        }
        if atime.is_some() || mtime.is_some() {
            let spec = |t: Option<TimeOrNow>| match t {
                None => libc::timespec {
                    tv_sec: 0,
                    tv_nsec: libc::UTIME_OMIT,
                },
                Some(TimeOrNow::Now) => libc::timespec {
                    tv_sec: 0,
                    tv_nsec: libc::UTIME_NOW,
                },
                Some(TimeOrNow::SpecificTime(t)) => {
                    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
                    libc::timespec {
                        tv_sec: d.as_secs() as libc::time_t,
                        tv_nsec: d.subsec_nanos() as libc::c_long,
                    }
                }
            };
            let times = [spec(atime), spec(mtime)];
            let c = cstr(&path)?;
            // SAFETY: valid path and a two-element timespec array, as utimensat requires.
            if unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), 0) } != 0 {
                return Err(errno(io::Error::last_os_error()));
            }
        }
        self.attr(&path)
    }

    fn rename_paths(&mut self, from: &Path, to: &Path) {
        self.forget_path(to);
        let moved: Vec<(u64, PathBuf)> = self
            .paths
            .iter()
            .filter_map(|(&ino, p)| {
                // join("") would append a slash, which a file's path must not have.
                p.strip_prefix(from).ok().map(|rest| {
                    let new = if rest.as_os_str().is_empty() {
                        to.to_path_buf()
                    } else {
                        to.join(rest)
                    };
                    (ino, new)
                })
            })
            .collect();
        for (ino, new) in moved {
            if let Some(old) = self.paths.insert(ino, new.clone()) {
                self.inos.remove(&old);
            }
            self.inos.insert(new, ino);
        }
    }
}

macro_rules! tri {
    ($reply:expr, $e:expr) => {
        match $e {
            Ok(v) => v,
            Err(code) => return $reply.error(code),
        }
    };
}

impl Filesystem for Passthrough {
    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        let path = tri!(reply, self.child(parent, name));
        let attr = tri!(reply, self.attr(&path));
        reply.entry(&TTL, &attr, 0);
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, fh: Option<u64>, reply: ReplyAttr) {
        // An open file answers even after it was unlinked.
        if let Some(file) = fh.and_then(|fh| self.files.get(&fh)) {
            let m = tri!(reply, file.metadata().map_err(errno));
            return reply.attr(&TTL, &attr_of(ino, &m));
        }
        let path = tri!(reply, self.path(ino));
        let attr = tri!(reply, self.attr(&path));
        reply.attr(&TTL, &attr);
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        _uid: Option<u32>,
        _gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        let attr = tri!(reply, self.set_attrs(ino, mode, size, atime, mtime, fh));
        reply.attr(&TTL, &attr);
    }

    fn mkdir(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        reply: ReplyEntry,
    ) {
        let path = tri!(reply, self.child(parent, name));
        tri!(
            reply,
            fs::DirBuilder::new()
                .mode(mode & !umask & 0o7777)
                .create(&path)
                .map_err(errno)
        );
        let attr = tri!(reply, self.attr(&path));
        reply.entry(&TTL, &attr, 0);
    }

    fn unlink(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let path = tri!(reply, self.child(parent, name));
        tri!(reply, fs::remove_file(&path).map_err(errno));
        self.forget_path(&path);
        reply.ok();
    }

    fn rmdir(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEmpty) {
        let path = tri!(reply, self.child(parent, name));
        tri!(reply, fs::remove_dir(&path).map_err(errno));
        self.forget_path(&path);
        reply.ok();
    }

    fn rename(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        newparent: u64,
        newname: &OsStr,
        flags: u32,
        reply: ReplyEmpty,
    ) {
        let from = tri!(reply, self.child(parent, name));
        let to = tri!(reply, self.child(newparent, newname));
        let (f, t) = (tri!(reply, cstr(&from)), tri!(reply, cstr(&to)));
        // SAFETY: valid NUL-terminated paths; renameat2 passes the caller's flags through.
        let rc = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                f.as_ptr(),
                libc::AT_FDCWD,
                t.as_ptr(),
                flags,
            )
        };
        if rc != 0 {
            return reply.error(errno(io::Error::last_os_error()));
        }
        self.rename_paths(&from, &to);
        reply.ok();
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        let path = tri!(reply, self.path(ino));
        let file = tri!(reply, open_backing(&path, flags, None).map_err(errno));
        reply.opened(self.add_file(file), 0);
    }

    fn create(
        &mut self,
        _req: &Request<'_>,
        parent: u64,
        name: &OsStr,
        mode: u32,
        umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        let path = tri!(reply, self.child(parent, name));
        let file = tri!(
            reply,
            open_backing(&path, flags, Some(mode & !umask & 0o7777)).map_err(errno)
        );
        let m = tri!(reply, file.metadata().map_err(errno));
        let attr = attr_of(self.ino_for(&path), &m);
        reply.created(&TTL, &attr, 0, self.add_file(file), 0);
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        let file = tri!(reply, self.file(fh));
        let mut buf = vec![0u8; size as usize];
        let mut filled = 0;
        while filled < buf.len() {
            match file.read_at(&mut buf[filled..], offset as u64 + filled as u64) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return reply.error(errno(e)),
            }
        }
        reply.data(&buf[..filled]);
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        let file = tri!(reply, self.file(fh));
        tri!(reply, file.write_all_at(data, offset as u64).map_err(errno));
        reply.written(data.len() as u32);
    }

    fn flush(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _owner: u64, reply: ReplyEmpty) {
        reply.ok();
    }

    fn release(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        _flags: i32,
        _lock_owner: Option<u64>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.files.remove(&fh);
        reply.ok();
    }

    fn fsync(&mut self, _req: &Request<'_>, _ino: u64, fh: u64, datasync: bool, reply: ReplyEmpty) {
        let file = tri!(reply, self.file(fh));
        self.flusher.sync(file, datasync, reply);
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        let path = tri!(reply, self.path(ino));
        let read = tri!(reply, fs::read_dir(&path).map_err(errno));
        let mut entries: Vec<(PathBuf, FileType)> = read
            .filter_map(Result::ok)
            .map(|e| {
                let kind = match e.file_type() {
                    Ok(t) if t.is_dir() => FileType::Directory,
                    Ok(t) if t.is_symlink() => FileType::Symlink,
                    _ => FileType::RegularFile,
                };
                (e.path(), kind)
            })
            .collect();
        // A stable order, so that offsets mean the same across calls.
        entries.sort_by(|a, b| a.0.cmp(&b.0));
        let dots = [".", ".."].map(|d| (ino, FileType::Directory, OsStr::new(d).to_os_string()));
        let listed = dots.into_iter().chain(entries.into_iter().map(|(p, kind)| {
            let name = p.file_name().map(|n| n.to_os_string()).unwrap_or_default();
            (self.ino_for(&p), kind, name)
        }));
        for (i, (entry_ino, kind, name)) in listed.enumerate().skip(offset.max(0) as usize) {
            if reply.add(entry_ino, (i + 1) as i64, kind, &name) {
                break;
            }
        }
        reply.ok();
    }

    fn fsyncdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        let path = tri!(reply, self.path(ino));
        let dir = tri!(reply, File::open(&path).map_err(errno));
        self.flusher.sync(Arc::new(dir), datasync, reply);
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        let c = tri!(reply, cstr(&self.root));
        // SAFETY: valid path and a properly sized out-parameter.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
            return reply.error(errno(io::Error::last_os_error()));
        }
        reply.statfs(
            st.f_blocks,
            st.f_bfree,
            st.f_bavail,
            st.f_files,
            st.f_ffree,
            st.f_bsize as u32,
            st.f_namemax as u32,
            st.f_frsize as u32,
        );
    }

    fn access(&mut self, _req: &Request<'_>, _ino: u64, _mask: i32, reply: ReplyEmpty) {
        // The members run as the user that mounted; the backing directory decides.
        reply.ok();
    }

    fn fallocate(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        fh: u64,
        offset: i64,
        length: i64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        let file = tri!(reply, self.file(fh));
        // SAFETY: plain syscall on an open descriptor.
        if unsafe { libc::fallocate(file.as_raw_fd(), mode, offset, length) } != 0 {
            return reply.error(errno(io::Error::last_os_error()));
        }
        reply.ok();
    }
}
