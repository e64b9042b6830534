//! The process's allocator (mimalloc) and the one setting members change in it.
//!
//! A member frees a whole-index snapshot buffer (tens of MB at a million revisions) every
//! few hundred milliseconds under a write load. mimalloc keeps freed memory committed for
//! its purge delay (1 s by default in the bundled v3) before handing it back to the OS, so
//! a member's RSS carried one or two dead snapshot buffers: at 900,000 revisions, 75 MB with
//! the default against 65 MB at 100 ms (RESULTS.md, Raft engine memory). `serve` sets the
//! delay to [`MEMBER_PURGE_DELAY_MS`]; the load generator keeps the default.
//!
//! mimalloc is built without its transparent-huge-page advice (libmimalloc-sys's `no_thp`):
//! on a kernel whose THP mode is `madvise` (this machine's) it had asked for 2 MiB pages
//! for its arenas, so a partly used region held a whole huge page. A generator holding
//! 10,000 lock contenders on raft peaked at 186–189 MB with it and 157–160 MB without, its
//! members at 113–126 against 79–82 MB, for 0.6% of throughput (RESULTS.md, "ZooKeeper
//! sessions at 10,000"). Go's and the JVM's heaps, which etcd and ZooKeeper run on, do not ask for huge
//! pages by default either.

use std::os::raw::{c_int, c_long};

/// Both the load generator and the engine members allocate per request (gRPC frames,
/// protobuf messages); glibc's allocator showed up as the top cost in profiles of a member.
/// The `system-allocator` feature leaves glibc's in place, for heap profilers.
#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay`: 15 in the `mi_option_t` enum of both v2 and v3
/// (between `mi_option_eager_commit_delay`, 14, and `mi_option_use_numa_nodes`, 16, which
/// libmimalloc-sys names); libmimalloc-sys has no constant for it.
const MI_OPTION_PURGE_DELAY: c_int = 15;

/// How long a member's freed memory stays committed before it is returned to the OS.
pub const MEMBER_PURGE_DELAY_MS: c_long = 100;

/// Makes freed memory go back to the OS within [`MEMBER_PURGE_DELAY_MS`] (for `serve`).
pub fn return_freed_memory_promptly() {
    // SAFETY: mi_option_set only stores the option's value; any value is valid for it.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, MEMBER_PURGE_DELAY_MS) }
}

/// The purge delay in force, in ms.
#[cfg(test)]
fn purge_delay_ms() -> c_long {
    // SAFETY: reads an option's value.
    unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_option_is_the_one_set() {
        // The default of the bundled mimalloc (v3: 1000 ms; v2: 10 ms), read through the
        // same option number: a wrong number would read some other option's value.
        assert!(
            matches!(purge_delay_ms(), 10 | 1000),
            "{}",
            purge_delay_ms()
        );
        return_freed_memory_promptly();
        assert_eq!(purge_delay_ms(), MEMBER_PURGE_DELAY_MS);
    }
}
