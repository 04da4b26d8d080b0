#!/usr/bin/env python3
"""How long this disk takes to make a small write durable, four ways.

The embedded store's sync log (crates/tideway-store-fjall/src/synclog.rs)
writes each round of group commit with O_DSYNC into a file whose blocks were
written when it was made; fjall's own journal appends and calls fdatasync.
This prints p50 and p90 of each way for 4 KiB writes, one after the other, in
a file beside the given path (default: the current directory); then the sync
log's way from one, two and four writers at once, each in its own blocks, and
the writes per second they made together (what frames written side by side
could gain).

    python3 scripts/bench/disk-sync.py [DIR] [--writes N]
"""
import argparse
import mmap
import os
import threading
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


def side_by_side(path, writers, n):
    """`writers` threads, each writing `n` 4 KiB blocks of its own with
    O_DIRECT | O_DSYNC; prints their writes/s together and p50 of each."""
    if os.path.exists(path):
        os.remove(path)
    with open(path, "wb") as f:
        f.write(b"\0" * (4096 * writers * n))
        f.flush()
        os.fsync(f.fileno())
    lat = [[] for _ in range(writers)]

    def write(w):
        fd = os.open(path, os.O_RDWR | os.O_DIRECT | os.O_DSYNC)
        buf = mmap.mmap(-1, 4096)
        buf.write(b"x" * 4096)
        try:
            for i in range(n):
                t = time.perf_counter()
                os.pwrite(fd, buf, (i * writers + w) * 4096)
                lat[w].append((time.perf_counter() - t) * 1e6)
        finally:
            os.close(fd)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    took = time.perf_counter() - t
    os.remove(path)
    every = sorted(x for l in lat for x in l)
    name = f"O_DIRECT | O_DSYNC, {writers} writer{'s' if writers > 1 else ''} at once"
    print(f"{name:44s} p50 {every[len(every) // 2]:7.1f} µs   {writers * n / took:7.0f} writes/s together")


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
    for writers in (1, 2, 4):
        side_by_side(path, writers, a.writes // writers)


if __name__ == "__main__":
    main()
