//! The process's allocator (mimalloc, the binaries' global allocator),
//! tuned once at start by [`tune`].
//!
//! mimalloc returns memory its pages no longer use to the OS after
//! `purge_delay` (1 s by default in mimalloc 3). On Linux a purge of part of
//! a transparent huge page splits it, and the memory, reused soon after,
//! comes back 4 KiB fault by fault, each page zeroed by the kernel. Inboxes
//! growing under fan-out free and reallocate their buffers all the time, so
//! with the default the warm fan-out spent a quarter of its time in the
//! kernel's `clear_page` (52,000 faults a `bench-embedded` run against 2,200
//! with a 10 s delay; docs/benchmarks.md, "The allocator's purge delay").
//! Memory unused for [`PURGE_DELAY_MS`] still goes back to the OS.
//!
//! [`tune`] also turns transparent huge pages off for the process. mimalloc
//! asks for them (`madvise(MADV_HUGEPAGE)` on its arenas), and where the
//! kernel's `defrag` setting is `madvise` (Debian's and Ubuntu's default) a
//! fault on such memory compacts memory first when no huge page is free:
//! milliseconds on the faulting thread. In `bench-embedded` at 300,000
//! items that put the cold first page's p99 at ~5 ms against ~0.75 ms
//! without, and the warm fan-out ran ×0.7 of its rate without them
//! (docs/benchmarks.md, "Transparent huge pages off").

use std::ffi::c_long;

/// `mi_option_purge_delay`'s place in mimalloc 3's `mi_option_t`
/// (libmimalloc-sys does not name it; `purge_delay_is_the_option_tuned`
/// checks the place by its default).
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long memory freed by the process stays with it before mimalloc
/// returns it to the OS, in milliseconds.
pub const PURGE_DELAY_MS: c_long = 10_000;

/// `mi_option_allow_thp`'s place in mimalloc 3's `mi_option_t`
/// (`thp_is_off_once_tuned` checks it by its default and its effect).
const ALLOW_THP: libmimalloc_sys::mi_option_t = 43;

/// The environment variable by which an operator chooses huge pages
/// themselves (`MIMALLOC_ALLOW_THP=1` keeps them; [`tune`] then leaves them).
const ALLOW_THP_ENV: &str = "MIMALLOC_ALLOW_THP";

/// The environment variables by which an operator sets the delay
/// themselves (mimalloc reads them at load; [`tune`] then leaves it).
const PURGE_DELAY_ENV: [&str; 2] = ["MIMALLOC_PURGE_DELAY", "MIMALLOC_RESET_DELAY"];

/// Sets mimalloc's purge delay to [`PURGE_DELAY_MS`] and turns transparent
/// huge pages off for the process, each unless the environment chooses it.
/// Call it first in `main`, before any other thread runs (mimalloc's options
/// are not synchronized); the delay is read at every purge, and huge pages
/// are refused from then on, also in memory mimalloc asked them for before.
pub fn tune() {
    if !PURGE_DELAY_ENV.iter().any(|v| std::env::var_os(v).is_some()) {
        #[allow(unsafe_code)]
        // SAFETY: `mi_option_set` writes one entry of mimalloc's option
        // table (a valid index, checked by the tests below). It has no other
        // precondition than not racing another write of the table, and the
        // binaries call this first in `main`, before they start any thread.
        unsafe {
            libmimalloc_sys::mi_option_set(PURGE_DELAY, PURGE_DELAY_MS);
        }
    }
    if std::env::var_os(ALLOW_THP_ENV).is_none() {
        #[allow(unsafe_code)]
        // SAFETY: as above, for the entry of `allow_thp` (no more
        // `MADV_HUGEPAGE` on new memory); `prctl(PR_SET_THP_DISABLE)` only
        // sets a flag of this process (and its children), and it is
        // checked at every fault, so it covers memory advised before.
        unsafe {
            libmimalloc_sys::mi_option_set(ALLOW_THP, 0);
            #[cfg(target_os = "linux")]
            libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
        }
    }
}

/// Whether transparent huge pages are off for this process (`prctl`).
#[cfg(target_os = "linux")]
pub fn thp_disabled() -> bool {
    #[allow(unsafe_code)]
    // SAFETY: reads a flag of this process.
    unsafe {
        libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0) == 1
    }
}

/// The purge delay in force, in milliseconds (`-1`: never purged).
pub fn purge_delay_ms() -> c_long {
    #[allow(unsafe_code)]
    // SAFETY: reads one entry of mimalloc's option table (a valid index);
    // its first read initializes the entry from the environment.
    unsafe {
        libmimalloc_sys::mi_option_get(PURGE_DELAY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purge_delay_is_the_option_tuned() {
        if PURGE_DELAY_ENV.iter().any(|v| std::env::var_os(v).is_some()) {
            return;
        }
        // mimalloc 3's default purge delay: no other option of the table
        // defaults to 1000, so this is the place of `purge_delay`.
        assert_eq!(purge_delay_ms(), 1000, "index {PURGE_DELAY} is not mimalloc's purge_delay");
        tune();
        assert_eq!(purge_delay_ms(), PURGE_DELAY_MS);
    }

    #[test]
    fn thp_is_off_once_tuned() {
        if std::env::var_os(ALLOW_THP_ENV).is_some() {
            return;
        }
        #[allow(unsafe_code)]
        // SAFETY: reads entries of mimalloc's option table (valid indexes).
        let (thp, next) =
            unsafe { (libmimalloc_sys::mi_option_get(ALLOW_THP), libmimalloc_sys::mi_option_get(ALLOW_THP + 1)) };
        // Before any test tunes it, `allow_thp` is on (=1) and the option
        // after it, `minimal_purge_size`, is 0; after, it is off, and the
        // kernel refuses the process huge pages.
        assert!(thp == 1 || thp == 0, "index {ALLOW_THP}: {thp}");
        assert_eq!(next, 0, "index {} is not mimalloc's minimal_purge_size", ALLOW_THP + 1);
        tune();
        #[allow(unsafe_code)]
        // SAFETY: as above.
        let thp = unsafe { libmimalloc_sys::mi_option_get(ALLOW_THP) };
        assert_eq!(thp, 0);
        #[cfg(target_os = "linux")]
        {
            assert!(thp_disabled());
            let status = std::fs::read_to_string("/proc/self/status").expect("status");
            assert!(status.lines().any(|l| l.replace(' ', "") == "THP_enabled:\t0"), "the kernel says THP is off");
        }
    }
}
