//! A PostgreSQL primary and a streaming standby on loopback, for failover
//! tests and drills ([`Pair`]): made from the machine's server binaries
//! (Debian's `/usr/lib/postgresql/<version>/bin`, the `postgresql` package
//! that `scripts/services.sh` installs) in a directory of their own under
//! the temporary directory, on free ports, removed when the pair is dropped.
//!
//! The primary is made by `initdb`, the standby by `pg_basebackup -R` from
//! it (streaming replication, `standby.signal`, `primary_conninfo`), and the
//! primary names the standby in `synchronous_standby_names` with
//! `synchronous_commit = on` ([`Replication::Synchronous`]): a commit is
//! acknowledged once the standby has flushed it. The settings are
//! docs/deploy.md's files (`deploy/postgresql/replication-*.conf`, read
//! here as they are), on one machine. What a failover does
//! to them: [`Pair::crash_primary`] (every process of the primary killed at
//! once, as when its machine dies), [`Pair::fall_behind`] (the network
//! between them, a [`FaultLink`], holds what the primary sends: the standby
//! falls behind), [`Pair::promote`].
//!
//! PostgreSQL refuses to run as root: run as root, every server binary runs
//! as the `postgres` user (`runuser`), which owns the directory.
//!
//! Only for tests; nothing in a server uses it.

use crate::fault_link::{Fault, FaultLink};
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The primary's replication settings as docs/deploy.md has an operator
/// write them (and scripts/guide.sh checks they are shown there as they are).
const PRIMARY_CONF: &str = include_str!("../../../deploy/postgresql/replication-primary.conf");
/// The standby's.
const STANDBY_CONF: &str = include_str!("../../../deploy/postgresql/replication-standby.conf");

/// Whether the primary waits for the standby before acknowledging a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    /// `synchronous_standby_names = 'standby'`: a commit is acknowledged once
    /// the standby flushed it.
    Synchronous,
    /// `synchronous_standby_names = ''`: acknowledged once flushed on the
    /// primary; the standby follows when it can.
    Asynchronous,
}

/// One server of the pair.
#[derive(Debug, Clone)]
pub struct Server {
    /// Its data directory.
    pub data: PathBuf,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Its log (`pg_ctl -l`).
    log: PathBuf,
}

impl Server {
    /// `127.0.0.1:<port>`.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// The URL of `database` on it, as the superuser (trusted on loopback).
    pub fn url(&self, database: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{database}", self.port)
    }
}

/// A primary and its standby; both stopped (immediately) and their
/// directory removed when dropped.
pub struct Pair {
    bin: Bin,
    dir: PathBuf,
    pub primary: Server,
    pub standby: Server,
    /// The network between them: the standby streams through it.
    network: FaultLink,
}

/// The server binaries and how they are run.
#[derive(Debug, Clone)]
struct Bin {
    dir: PathBuf,
    /// Run as root: they run as `postgres`.
    as_postgres: bool,
}

impl Bin {
    /// Runs a server binary; its output, or an error with it.
    fn run(&self, binary: &str, args: &[&str]) -> io::Result<Output> {
        let exe = self.dir.join(binary);
        let mut cmd = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        };
        let out = cmd.args(args).output()?;
        if out.status.success() { Ok(out) } else { Err(failed(&format!("{binary} {}", args.join(" ")), &out)) }
    }

    /// `pg_ctl -D <data> -w <action>`, its server's log in the error.
    fn pg_ctl(&self, server: &Server, action: &str) -> io::Result<()> {
        let (data, log) = (path(&server.data), path(&server.log));
        self.run("pg_ctl", &["-D", data, "-l", log, "-w", "-t", "30", action])
            .map(drop)
            .map_err(|e| io::Error::other(format!("{e}\n{}", tail(&server.log))))
    }

    /// The answer of `sql` on the server on `port` (`psql -At`: a line a
    /// row, columns split by `|`), trimmed. (A client: run as anyone.)
    fn psql(&self, port: u16, database: &str, sql: &str) -> io::Result<String> {
        let out = Command::new(self.dir.join("psql"))
            .args(["-X", "-q", "-A", "-t", "-h", "127.0.0.1", "-U", "postgres", "-p", &port.to_string()])
            .args(["-d", database, "-v", "ON_ERROR_STOP=1", "-c", sql])
            .output()?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
        } else {
            Err(failed(&format!("psql -p {port} -c {sql:?}"), &out))
        }
    }
}

/// The directory of the newest installed server binaries, or `None` when
/// none are installed (a test then says so and skips).
pub fn binaries() -> Option<PathBuf> {
    let mut found: Vec<(Vec<u32>, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let bin = e.path().join("bin");
            let version = e.file_name().to_str()?.split('.').map(|p| p.parse().ok()).collect::<Option<Vec<u32>>>()?;
            ["initdb", "pg_ctl", "pg_basebackup", "postgres", "psql"]
                .iter()
                .all(|b| bin.join(b).is_file())
                .then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin)
}

fn free_port() -> io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// The last lines of a log, for an error.
fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

fn failed(what: &str, out: &Output) -> io::Error {
    io::Error::other(format!(
        "{what}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ))
}

/// Sends `signal` (`STOP`, `KILL`) to the processes `pids`.
fn signal(signal: &str, pids: &[u32]) -> io::Result<()> {
    if pids.is_empty() {
        return Ok(());
    }
    let out = Command::new("kill").arg(format!("-{signal}")).args(pids.iter().map(u32::to_string)).output()?;
    if out.status.success() { Ok(()) } else { Err(failed(&format!("kill -{signal} {pids:?}"), &out)) }
}

/// The parent of process `pid`, and whether it is gone (a zombie, or no
/// longer listed).
fn parent_of(pid: u32) -> Option<(u32, bool)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split(' ');
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    Some((ppid, state == "Z" || state == "X"))
}

fn alive(pid: u32) -> bool {
    parent_of(pid).is_some_and(|(_, gone)| !gone)
}

/// The processes whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else { return vec![] };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| parent_of(p).is_some_and(|(ppid, gone)| ppid == pid && !gone))
        .collect()
}

impl Pair {
    /// Makes and starts a primary and a streaming standby, and waits until
    /// the standby streams (and, [`Replication::Synchronous`], is the
    /// primary's synchronous standby). The standby reaches the primary
    /// through a [`FaultLink`] of the pair's own (the network between them).
    pub async fn start(bin: PathBuf, replication: Replication) -> io::Result<Self> {
        let as_postgres = running_as_root();
        let dir = std::env::temp_dir().join(format!("tideway-pg-{}-{:08x}", std::process::id(), rand_u32()));
        std::fs::create_dir(&dir)?;
        let primary = Server { data: dir.join("primary"), port: free_port()?, log: dir.join("primary.log") };
        let standby = Server { data: dir.join("standby"), port: free_port()?, log: dir.join("standby.log") };
        let network = FaultLink::start(primary.addr()).await?;
        let pair = Pair { bin: Bin { dir: bin, as_postgres }, primary, standby, dir, network };
        if as_postgres {
            let out = Command::new("chown").arg("postgres:postgres").arg(&pair.dir).output()?;
            if !out.status.success() {
                return Err(failed("chown postgres (is there a postgres user? the postgresql package makes it)", &out));
            }
        }
        let (bin, dir, p, s) = (pair.bin.clone(), pair.dir.clone(), pair.primary.clone(), pair.standby.clone());
        let through = pair.network.addr().port();
        tokio::task::spawn_blocking(move || make(&bin, &dir, &p, &s, through, replication))
            .await
            .map_err(io::Error::other)??;
        Ok(pair)
    }

    /// The answer of `sql` on the standby's (`standby`) or the primary's
    /// `database` (`psql -At`: a line a row, columns split by `|`), trimmed.
    pub async fn sql(&self, standby: bool, database: &str, sql: &str) -> io::Result<String> {
        let (bin, port) = (self.bin.clone(), if standby { self.standby.port } else { self.primary.port });
        let (database, sql) = (database.to_owned(), sql.to_owned());
        tokio::task::spawn_blocking(move || bin.psql(port, &database, &sql)).await.map_err(io::Error::other)?
    }

    /// The standby falls behind: the network between it and the primary
    /// holds what the primary sends from now on (WAL, and the standby's
    /// confirmations never come: with synchronous replication every commit
    /// waits meanwhile).
    pub fn fall_behind(&self) {
        self.network.set(Fault::Blackhole);
    }

    /// Kills every process of the primary at once, as when its machine
    /// dies: each is stopped first (`SIGSTOP`, the postmaster before its
    /// children, so none is started after the list is read and none acts on
    /// the others' deaths), then all are killed (`SIGKILL`). Returns once the
    /// postmaster is gone.
    pub async fn crash_primary(&self) -> io::Result<()> {
        let pidfile = std::fs::read_to_string(self.primary.data.join("postmaster.pid"))?;
        let postmaster: u32 = pidfile
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or_else(|| io::Error::other("postmaster.pid names no process"))?;
        signal("STOP", &[postmaster])?;
        let mut all = children(postmaster);
        signal("STOP", &all)?;
        all.push(postmaster);
        signal("KILL", &all)?;
        // What the network held for the standby is lost with the primary.
        self.network.set(Fault::Reset);
        let deadline = Instant::now() + Duration::from_secs(10);
        while all.iter().any(|&p| alive(p)) {
            if Instant::now() > deadline {
                return Err(io::Error::other("the primary's processes did not die within 10 s of SIGKILL"));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(())
    }

    /// Promotes the standby (`pg_ctl promote`, waiting until it takes
    /// writes).
    pub async fn promote(&self) -> io::Result<()> {
        let bin = self.bin.clone();
        let (data, log) = (self.standby.data.clone(), self.standby.log.clone());
        tokio::task::spawn_blocking(move || {
            bin.run("pg_ctl", &["-D", path(&data), "-w", "-t", "30", "promote"])
                .map(drop)
                .map_err(|e| io::Error::other(format!("{e}\n{}", tail(&log))))
        })
        .await
        .map_err(io::Error::other)?
    }

    /// The servers' logs, for a failed test.
    pub fn logs(&self) -> String {
        format!("-- primary:\n{}\n-- standby:\n{}", tail(&self.primary.log), tail(&self.standby.log))
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for server in [&self.standby, &self.primary] {
            if server.data.join("postmaster.pid").exists() {
                let _ = self.bin.run("pg_ctl", &["-D", path(&server.data), "-m", "immediate", "-w", "stop"]);
            }
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap_or_default()
}

fn append(file: &Path, text: &str) -> io::Result<()> {
    use std::io::Write;
    std::fs::OpenOptions::new().append(true).open(file)?.write_all(text.as_bytes())
}

fn rand_u32() -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    h.finish() as u32
}

/// Makes the pair's servers: the primary, then the standby from it through
/// the network on port `through`.
fn make(bin: &Bin, dir: &Path, p: &Server, s: &Server, through: u16, replication: Replication) -> io::Result<()> {
    // No fsync of the new cluster's files: the test kills processes, and
    // what they wrote stays in the machine's page cache.
    bin.run("initdb", &["-D", path(&p.data), "-U", "postgres", "--auth=trust", "--no-sync", "--no-instructions"])?;
    // The primary's settings: the guide's file, then this machine's
    // addresses (and, asynchronous, no synchronous standby).
    let unsync = match replication {
        Replication::Synchronous => "",
        Replication::Asynchronous => "synchronous_standby_names = ''\n",
    };
    append(
        &p.data.join("postgresql.conf"),
        &format!(
            "\n# tideway failover test: the primary\nlisten_addresses = '127.0.0.1'\nport = {}\n\
             unix_socket_directories = '{}'\n{PRIMARY_CONF}{unsync}",
            p.port,
            dir.display()
        ),
    )?;
    bin.pg_ctl(p, "start")?;
    bin.run(
        "pg_basebackup",
        &[
            "-h",
            "127.0.0.1",
            "-p",
            &through.to_string(),
            "-U",
            "postgres",
            "-D",
            path(&s.data),
            "-R",
            "-X",
            "stream",
            "-c",
            "fast",
            "--no-sync",
        ],
    )?;
    // The standby's: the guide's file (its name), its port, and none of the
    // primary's synchronous_standby_names (copied with the data directory
    // here, where the configuration lives in it: promoted, it would wait for
    // a standby of its own that is not there).
    append(
        &s.data.join("postgresql.conf"),
        &format!(
            "\n# tideway failover test: the standby\nport = {}\n{STANDBY_CONF}synchronous_standby_names = ''\n",
            s.port
        ),
    )?;
    bin.pg_ctl(s, "start")?;
    let want = match replication {
        Replication::Synchronous => "sync",
        Replication::Asynchronous => "async",
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let state = bin.psql(
            p.port,
            "postgres",
            "SELECT sync_state FROM pg_stat_replication WHERE application_name = 'standby' AND state = 'streaming'",
        )?;
        if state == want {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(io::Error::other(format!(
                "the standby did not stream as {want} within 20 s (state {state:?}):\n{}",
                tail(&s.log)
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
