//! Private servers of a test's own: PostgreSQL, MariaDB, Redis and Redis
//! Clusters on free ports, each killed when dropped (the engine-fault,
//! failover and link tests start them).

use crate::crash::free_port;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A server process of the test's own, killed (SIGKILL) when dropped.
pub(crate) struct Daemon(pub(crate) Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Stops (SIGSTOP) or continues (SIGCONT) a server and its children: it
/// keeps its connections open and answers nothing, as a hung database does.
pub(crate) fn pause(d: &Daemon, stopped: bool) {
    let sig = if stopped { "-STOP" } else { "-CONT" };
    let pid = d.0.id().to_string();
    let _ = Command::new("pkill").args([sig, "-P", &pid]).status();
    let ok = Command::new("kill").args([sig, &pid]).status();
    assert!(ok.is_ok_and(|s| s.success()), "kill {sig} {pid}");
}

/// Waits for a private server; on a busy machine (a cold build beside it)
/// one can take long to start, so the wait is generous, and a server that
/// never comes up fails the test with its own log.
pub(crate) fn wait_until(what: &str, log: &Path, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(120);
    while !ok() {
        if Instant::now() >= deadline {
            let log = std::fs::read_to_string(log).unwrap_or_else(|e| format!("(no log: {e})"));
            panic!("{what} did not come up within 120 s; its log:\n{log}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A file for a private server's output.
pub(crate) fn log_file(path: &Path) -> Stdio {
    std::fs::OpenOptions::new().create(true).append(true).open(path).map_or_else(|_| Stdio::null(), Stdio::from)
}

pub(crate) fn mariadb(dir: &Path, port: u16) -> Daemon {
    let child = Command::new("mariadbd")
        .args(["--no-defaults", "--user=root", "--bind-address=127.0.0.1", "--skip-log-bin"])
        .arg(format!("--datadir={}", dir.join("data").display()))
        .arg(format!("--port={port}"))
        .arg(format!("--socket={}", dir.join("sock").display()))
        .arg(format!("--log-error={}", dir.join("err.log").display()))
        .stdout(Stdio::null())
        .stderr(log_file(&dir.join("err.log")))
        .spawn()
        .expect("start mariadbd (scripts/services.sh installs it)");
    wait_until("mariadbd", &dir.join("err.log"), || {
        Command::new("mysql")
            .args(["-h", "127.0.0.1", "-P", &port.to_string(), "-u", "root", "-e", "select 1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    Daemon(child)
}

/// The newest installed PostgreSQL's programs.
pub(crate) fn pg_bin(program: &str) -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL is installed (scripts/services.sh installs it)")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    versions.sort_by_key(|p| p.file_name().and_then(|n| n.to_str()).and_then(|n| n.parse::<u32>().ok()));
    versions.last().expect("a PostgreSQL version").join("bin").join(program)
}

/// A command run as the `postgres` user (PostgreSQL refuses root), without
/// an intermediate process: killing the child kills the server.
pub(crate) fn as_postgres(program: &Path) -> Command {
    let mut c = Command::new("setpriv");
    c.args(["--reuid=postgres", "--regid=postgres", "--init-groups"]).arg(program);
    c
}

pub(crate) fn postgres(dir: &Path, port: u16) -> Daemon {
    let child = as_postgres(&pg_bin("postgres"))
        .arg("-D")
        .arg(dir.join("data"))
        .args(["-p", &port.to_string(), "-c", "listen_addresses=127.0.0.1", "-k"])
        .arg(dir)
        .stdout(log_file(&dir.join("postgres.log")))
        .stderr(log_file(&dir.join("postgres.log")))
        .spawn()
        .expect("start postgres");
    wait_until("postgres", &dir.join("postgres.log"), || {
        Command::new("pg_isready")
            .args(["-q", "-h", "127.0.0.1", "-p", &port.to_string()])
            .status()
            .is_ok_and(|s| s.success())
    });
    Daemon(child)
}

pub(crate) fn redis(port: u16) -> Daemon {
    redis_with(port, &std::env::temp_dir().join(format!("tideway-faults-redis-{port}.log")), &[])
}

/// A private `redis-server` on `port` with more arguments, logging to `log`.
pub(crate) fn redis_with(port: u16, log: &Path, more: &[&std::ffi::OsStr]) -> Daemon {
    let child = Command::new("redis-server")
        .args(["--bind", "127.0.0.1", "--port", &port.to_string(), "--save", "", "--appendonly", "no"])
        .args(more)
        .stdout(log_file(log))
        .stderr(log_file(log))
        .spawn()
        .expect("start redis-server");
    wait_until("redis-server", log, || {
        Command::new("redis-cli")
            .args(["-p", &port.to_string(), "ping"])
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("PONG"))
    });
    Daemon(child)
}

/// A private Redis Cluster of three primaries (no replicas), each node a
/// [`Daemon`] with its own directory and log.
pub(crate) fn redis_cluster(dir: &Path) -> Vec<(u16, Daemon)> {
    redis_cluster_of(dir, 0)
}

/// The same with `replicas` replicas per primary (`3 * (1 + replicas)`
/// nodes, the primaries first as `redis-cli --cluster create` assigns them).
pub(crate) fn redis_cluster_of(dir: &Path, replicas: usize) -> Vec<(u16, Daemon)> {
    redis_cluster_announcing(dir, replicas, &[])
}

/// The same, node `i` on `announce[i].0` telling clients to reach it on
/// `announce[i].1` (a proxy before it: `CLUSTER SLOTS` and redirections name
/// the proxy) and the other nodes to reach its bus on its own port + 10000;
/// free ports when `announce` is empty.
pub(crate) fn redis_cluster_announcing(dir: &Path, replicas: usize, announce: &[(u16, u16)]) -> Vec<(u16, Daemon)> {
    let mut nodes = Vec::new();
    for i in 0..3 * (1 + replicas) {
        let (port, told) = announce.get(i).map_or_else(|| (free_port(), None), |&(p, a)| (p, Some(a)));
        let d = dir.join(format!("r{i}"));
        std::fs::create_dir_all(&d).expect("dir");
        let conf = d.join("nodes.conf");
        // (replicas sync at once: the default waits 5 s for more replicas;
        // a primary's slots fail alone, as docs/deploy.md configures)
        let more = [
            "--cluster-enabled",
            "yes",
            "--cluster-require-full-coverage",
            "no",
            "--cluster-node-timeout",
            "2000",
            "--repl-diskless-sync-delay",
            "0",
            "--cluster-config-file",
        ];
        let mut args: Vec<std::ffi::OsString> = more.iter().map(std::ffi::OsString::from).collect();
        args.extend([conf.clone().into_os_string(), "--dir".into(), d.clone().into_os_string()]);
        if let Some(told) = told {
            for a in ["--cluster-announce-ip", "127.0.0.1", "--cluster-announce-port", &told.to_string()] {
                args.push(a.into());
            }
            args.extend(["--cluster-announce-bus-port".into(), (u32::from(port) + 10_000).to_string().into()]);
        }
        let args: Vec<&std::ffi::OsStr> = args.iter().map(std::ffi::OsString::as_os_str).collect();
        nodes.push((port, redis_with(port, &d.join("redis.log"), &args)));
    }
    let addrs: Vec<String> = nodes.iter().map(|(p, _)| format!("127.0.0.1:{p}")).collect();
    let created = Command::new("redis-cli")
        .args(["--cluster", "create"])
        .args(&addrs)
        .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
        .output();
    assert!(created.as_ref().is_ok_and(|o| o.status.success()), "redis-cli --cluster create: {created:?}");
    for (port, _) in &nodes {
        wait_until("the Redis Cluster", &dir.join("r0").join("redis.log"), || {
            Command::new("redis-cli")
                .args(["-p", &port.to_string(), "cluster", "info"])
                .output()
                .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("cluster_state:ok"))
        });
    }
    // Every replica holds its primary's data: one that never finished its
    // first sync is never promoted (Redis refuses a replica whose data is
    // too old), so a primary killed before its replica synced left its slots
    // failed for good, and the failover test timed out now and then.
    for (i, (port, _)) in nodes.iter().enumerate() {
        wait_until("a replica's first sync", &dir.join(format!("r{i}")).join("redis.log"), || {
            let info = rcli(*port, &["info", "replication"]);
            info.contains("role:master") || info.contains("master_link_status:up")
        });
    }
    nodes
}

/// `redis-cli -p port args…`'s output.
pub(crate) fn rcli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli").arg("-p").arg(port.to_string()).args(args).output().expect("redis-cli");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What the nodes of a cluster say of it (`cluster nodes` of those still
/// running) and the end of every node's log, the killed ones' too: for a
/// failure's message.
pub(crate) fn cluster_report(dir: &Path, running: &[(u16, Daemon)]) -> String {
    let mut out = String::new();
    for (port, _) in running {
        out += &format!("-- cluster nodes, asked of {port}:\n{}", rcli(*port, &["cluster", "nodes"]));
    }
    for i in 0.. {
        let Ok(log) = std::fs::read_to_string(dir.join(format!("r{i}")).join("redis.log")) else { break };
        let lines: Vec<&str> = log.lines().collect();
        out += &format!("-- r{i}/redis.log (end):\n{}\n", lines[lines.len().saturating_sub(25)..].join("\n"));
    }
    out
}

/// Whether the node on `port` is a primary.
pub(crate) fn is_primary(port: u16) -> bool {
    rcli(port, &["info", "replication"]).contains("role:master")
}
