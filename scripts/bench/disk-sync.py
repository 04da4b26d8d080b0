#!/usr/bin/env python3
"""How long this disk takes to make a small write durable, four ways.

The embedded store's sync log (crates/tideway-store-fjall/src/synclog.rs)
writes each round of group commit with O_DSYNC into a file whose blocks were
written when it was made; fjall's own journal appends and calls fdatasync.
This prints p50 and p90 of each way for 4 KiB writes, one after the other, in
a file beside the given path (default: the current directory).

    python3 scripts/bench/disk-sync.py [DIR] [--writes N]
"""
import argparse
import mmap
import os
import time


def run(path, name, flags, prealloc, fdatasync, n):
    if os.path.exists(path):
        os.remove(path)
    if prealloc:
        with open(path, "wb") as f:
            f.write(b"\0" * (4096 * (n + 8)))
            f.flush()
            os.fsync(f.fileno())
    fd = os.open(path, os.O_RDWR | os.O_CREAT | flags, 0o644)
    buf = mmap.mmap(-1, 4096)  # page-aligned, as O_DIRECT needs
    buf.write(b"x" * 4096)
    lat = []
    try:
        for i in range(n):
            t = time.perf_counter()
            os.pwrite(fd, buf, i * 4096)
            if fdatasync:
                os.fdatasync(fd)
            lat.append((time.perf_counter() - t) * 1e6)
    finally:
        os.close(fd)
        os.remove(path)
    lat.sort()
    print(f"{name:44s} p50 {lat[n // 2]:7.1f} µs   p90 {lat[int(n * 0.9)]:7.1f} µs")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?", default=".")
    ap.add_argument("--writes", type=int, default=2000)
    a = ap.parse_args()
    path = os.path.join(a.dir, "tideway-disk-sync.bin")
    run(path, "append + fdatasync (fjall's journal)", 0, False, True, a.writes)
    run(path, "written before + fdatasync", 0, True, True, a.writes)
    run(path, "written before, O_DSYNC (the sync log)", os.O_DSYNC, True, False, a.writes)
    run(path, "written before, O_DIRECT | O_DSYNC", os.O_DIRECT | os.O_DSYNC, True, False, a.writes)


if __name__ == "__main__":
    main()
