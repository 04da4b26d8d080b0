#!/usr/bin/env python3
"""Where the CPU of a load run goes: runs a command (wrk) and prints the CPU
time each party used during it, per request, as a line

    cpu µs/request: server 412  postgres 655  redis 38  wrk 71  (sum 1176)

Parties: the server (the pid given, threads included), the engines (every
process named postgres, mariadbd or redis-server, summed by name: PostgreSQL's
backends are processes of their own), and the command itself (its rusage).
CPU times come from /proc/<pid>/stat (utime + stime, in clock ticks), read
before and after; a backend that exits during the run is not counted.

usage: cpu.py SERVER_PID COMMAND...   (the command's output is passed through;
the line above goes to stderr, after it, with the requests counted from wrk's
"Requests/sec" line times its duration)
"""
import os
import re
import resource
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")
ENGINES = {"postgres": "postgres", "mariadbd": "mariadb", "mysqld": "mariadb", "redis-server": "redis"}


def ticks(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            s = f.read()
    except OSError:
        return None, 0
    comm = s[s.index("(") + 1 : s.rindex(")")]
    fields = s[s.rindex(")") + 2 :].split()
    return comm, int(fields[11]) + int(fields[12])


def snapshot(server):
    out = {"server": ticks(server)[1]}
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != server:
            comm, t = ticks(pid)
            if comm in ENGINES:
                key = (ENGINES[comm], pid)
                out[key] = t
    return out


def main():
    server = int(sys.argv[1])
    before = snapshot(server)
    start = time.monotonic()
    run = subprocess.run(sys.argv[2:], capture_output=True, text=True)
    elapsed = time.monotonic() - start
    after = snapshot(server)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    rps = re.search(r"Requests/sec:\s+([\d.]+)", run.stdout)
    requests = float(rps.group(1)) * elapsed if rps else 0
    if requests <= 0:
        return run.returncode
    used = {"server": (after["server"] - before["server"]) / TICK}
    for key, t in after.items():
        if key != "server":
            used[key[0]] = used.get(key[0], 0) + (t - before.get(key, 0)) / TICK
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    used["wrk"] = child.ru_utime + child.ru_stime
    per = {k: v * 1e6 / requests for k, v in used.items() if v > 0}
    parts = "  ".join(f"{k} {v:.0f}" for k, v in per.items())
    print(f"cpu µs/request: {parts}  (sum {sum(per.values()):.0f})", file=sys.stderr)
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
