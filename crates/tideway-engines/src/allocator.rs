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

use std::ffi::c_long;

/// `mi_option_purge_delay`'s place in mimalloc 3's `mi_option_t`
/// (libmimalloc-sys does not name it; `purge_delay_is_the_option_tuned`
/// checks the place by its default).
const PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// How long memory freed by the process stays with it before mimalloc
/// returns it to the OS, in milliseconds.
pub const PURGE_DELAY_MS: c_long = 10_000;

/// The environment variables by which an operator sets the delay
/// themselves (mimalloc reads them at load; [`tune`] then leaves it).
const PURGE_DELAY_ENV: [&str; 2] = ["MIMALLOC_PURGE_DELAY", "MIMALLOC_RESET_DELAY"];

/// Sets mimalloc's purge delay to [`PURGE_DELAY_MS`], unless the
/// environment sets it. Call it first in `main`, before any other thread
/// runs (mimalloc's options are not synchronized); it is read at every
/// purge, so it applies from then on.
pub fn tune() {
    if PURGE_DELAY_ENV.iter().any(|v| std::env::var_os(v).is_some()) {
        return;
    }
    #[allow(unsafe_code)]
    // SAFETY: `mi_option_set` writes one entry of mimalloc's option table
    // (a valid index, checked by the test below). It has no other
    // precondition than not racing another write of the table, and the
    // binaries call this first in `main`, before they start any thread.
    unsafe {
        libmimalloc_sys::mi_option_set(PURGE_DELAY, PURGE_DELAY_MS);
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
}
