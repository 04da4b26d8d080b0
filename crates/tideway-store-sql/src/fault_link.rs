//! A TCP proxy that puts faults on the link between a node and an engine,
//! for tests: every connection through it goes to the engine and back, and
//! what it does to the bytes is set while it runs ([`Fault`]), plus one
//! targeted fault: the engine's answer to a chosen request is lost after
//! the engine received (and acted on) it ([`FaultLink::lose_answers_to`]).
//! It is also the stable address of a failover test: the operator moves it
//! from a primary to its promoted standby ([`FaultLink::retarget`]), as a
//! virtual IP, a DNS name or a proxy in front of PostgreSQL is moved.
//!
//! Only for tests and fault drills on loopback; nothing in a server uses it.

use parking_lot::Mutex;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What the link does to the bytes crossing it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Bytes pass as they come.
    Pass,
    /// Bytes are held, both ways, until the fault changes (a dead link:
    /// nothing is refused, nothing arrives); new connections hang too.
    Blackhole,
    /// Each chunk waits this long before it goes on, both ways.
    Delay(Duration),
    /// Every connection open is reset, and new ones are refused (closed at
    /// once) while the fault holds.
    Reset,
}

/// A request whose answer is to be lost: a client chunk holding `pattern`
/// arms its connection; the engine's answers on it are then swallowed, and
/// the connection is closed once the engine has fallen quiet.
struct Loss {
    /// Any of these in a request arms it.
    patterns: Vec<Vec<u8>>,
    /// How many more requests lose their answer.
    left: usize,
}

struct Shared {
    fault: watch::Sender<Fault>,
    /// Where new connections go.
    target: Mutex<SocketAddr>,
    /// Moved on by a retarget that ends the connections open: each
    /// connection ends when it changes.
    ends: watch::Sender<u64>,
    loss: Mutex<Option<Loss>>,
    /// Answers lost so far.
    lost: Mutex<usize>,
}

/// The proxy; stops (and closes its connections) when dropped.
pub struct FaultLink {
    addr: SocketAddr,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FaultLink {
    fn drop(&mut self) {
        self.task.abort();
        // Connections end with the fault's sender (their `changed` fails).
        let _ = self.shared.fault.send(Fault::Reset);
    }
}

impl FaultLink {
    /// A proxy on a free loopback port to `target`.
    pub async fn start(target: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (fault, _) = watch::channel(Fault::Pass);
        let (ends, _) = watch::channel(0);
        let target = Mutex::new(target);
        let shared = Arc::new(Shared { fault, target, ends, loss: Mutex::new(None), lost: Mutex::new(0) });
        let s = Arc::clone(&shared);
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let s = Arc::clone(&s);
                tokio::spawn(async move {
                    let _ = carry(client, s).await;
                });
            }
        });
        Ok(Self { addr, shared, task })
    }

    /// The proxy's address (`127.0.0.1:port`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `url` with its host and port replaced by the proxy's.
    pub fn url_through(&self, url: &str) -> String {
        through(url, self.addr)
    }

    /// The engine's `host:port` of `url` (for [`FaultLink::start`]).
    pub fn target_of(url: &str) -> Option<SocketAddr> {
        use std::net::ToSocketAddrs;
        let rest = url.split_once("://")?.1;
        let auth = rest.split(['/', '?']).next()?;
        let host = auth.rsplit_once('@').map_or(auth, |(_, h)| h);
        host.to_socket_addrs().ok()?.next()
    }

    /// Sets what the link does from now on.
    pub fn set(&self, fault: Fault) {
        // (`send` would keep the old fault while no connection is open to
        // hear it: after a reset, the link stayed reset for good)
        self.shared.fault.send_replace(fault);
    }

    /// Sends new connections to `target` from now on: the address moved to
    /// another server (a promoted standby). `end_open` ends the connections
    /// open now, as a moved virtual IP does (the machine that holds it now
    /// knows nothing of them and resets them) or HAProxy's `on-marked-down
    /// shutdown-sessions`; without it they stay on the old server, as after
    /// a DNS name was changed.
    pub fn retarget(&self, target: SocketAddr, end_open: bool) {
        *self.shared.target.lock() = target;
        if end_open {
            self.shared.ends.send_modify(|n| *n += 1);
        }
    }

    /// The next `times` requests that carry any of `patterns` reach the
    /// engine and lose its answer: the node sees its connection break after
    /// the engine acted (a commit whose answer never came back).
    pub fn lose_answers_to(&self, patterns: &[&[u8]], times: usize) {
        let patterns = patterns.iter().map(|p| p.to_vec()).collect();
        *self.shared.loss.lock() = Some(Loss { patterns, left: times });
    }

    /// Answers lost so far by [`FaultLink::lose_answers_to`].
    pub fn answers_lost(&self) -> usize {
        *self.shared.lost.lock()
    }
}

/// `url` with its host and port replaced by `addr`.
fn through(url: &str, addr: SocketAddr) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
    let (auth, after) = match rest.find(['/', '?']) {
        Some(i) => rest.split_at(i),
        None => (rest, ""),
    };
    let user = auth.rsplit_once('@').map(|(u, _)| format!("{u}@")).unwrap_or_default();
    format!("{scheme}://{user}{addr}{after}")
}

/// Waits while the link is a blackhole; `false` when it resets (or the
/// proxy is gone).
async fn passable(rx: &mut watch::Receiver<Fault>) -> bool {
    loop {
        let now = *rx.borrow_and_update();
        match now {
            Fault::Pass | Fault::Delay(_) => return true,
            Fault::Reset => return false,
            Fault::Blackhole => {
                if rx.changed().await.is_err() {
                    return false;
                }
            }
        }
    }
}

/// One connection: both directions, under the faults, until either side
/// closes, the link resets, or a retarget ends it.
async fn carry(client: TcpStream, s: Arc<Shared>) -> std::io::Result<()> {
    let mut ends = s.ends.subscribe();
    let mut rx = s.fault.subscribe();
    if !passable(&mut rx).await {
        return Ok(());
    }
    let target = *s.target.lock();
    let server = TcpStream::connect(target).await?;
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (cr, cw) = client.into_split();
    let (sr, sw) = server.into_split();
    // Set when a request of this connection armed a loss: the engine's
    // answers are swallowed from then on.
    let armed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let up = pump(cr, sw, s.fault.subscribe(), Some((Arc::clone(&s), Arc::clone(&armed))));
    let down = swallowing(sr, cw, s.fault.subscribe(), Arc::clone(&armed), Arc::clone(&s));
    // Either direction ending ends the connection (both halves dropped).
    tokio::select! {
        _ = up => {}
        _ = down => {}
        _ = ends.changed() => {}
    }
    Ok(())
}

/// Copies `from` to `to` chunk by chunk under the faults; on the request
/// side it also arms a loss when a chunk holds the pattern.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut rx: watch::Receiver<Fault>,
    arm: Option<(Arc<Shared>, Arc<std::sync::atomic::AtomicBool>)>,
) -> std::io::Result<()> {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = tokio::select! {
            n = from.read(&mut buf) => n?,
            changed = rx.changed() => {
                if changed.is_err() || *rx.borrow() == Fault::Reset {
                    return Ok(());
                }
                continue;
            }
        };
        if n == 0 {
            return Ok(());
        }
        if let Some((s, armed)) = &arm {
            let mut loss = s.loss.lock();
            if let Some(l) = loss.as_mut()
                && l.left > 0
                && l.patterns.iter().any(|p| !p.is_empty() && buf[..n].windows(p.len()).any(|w| w == p.as_slice()))
            {
                l.left -= 1;
                armed.store(true, std::sync::atomic::Ordering::SeqCst);
            }
        }
        if !forward(&mut to, &buf[..n], &mut rx).await? {
            return Ok(());
        }
    }
}

/// Sends a chunk once the fault lets it: after the delay, or when a
/// blackhole lifts; `false` when the link resets.
async fn forward(
    to: &mut tokio::net::tcp::OwnedWriteHalf,
    chunk: &[u8],
    rx: &mut watch::Receiver<Fault>,
) -> std::io::Result<bool> {
    if !passable(rx).await {
        return Ok(false);
    }
    let delay = match *rx.borrow() {
        Fault::Delay(d) => Some(d),
        _ => None,
    };
    if let Some(d) = delay {
        tokio::time::sleep(d).await;
    }
    to.write_all(chunk).await?;
    Ok(true)
}

/// The answer side: as [`pump`], except that once the connection is armed
/// the engine's bytes are dropped, and the connection is closed after the
/// engine has sent nothing for a while (it has finished acting).
async fn swallowing(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut rx: watch::Receiver<Fault>,
    armed: Arc<std::sync::atomic::AtomicBool>,
    s: Arc<Shared>,
) -> std::io::Result<()> {
    const QUIET: Duration = Duration::from_millis(300);
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let lost = armed.load(std::sync::atomic::Ordering::SeqCst);
        let read = async {
            if lost {
                match tokio::time::timeout(QUIET, from.read(&mut buf)).await {
                    Ok(r) => r.map(Some),
                    Err(_) => Ok(None),
                }
            } else {
                from.read(&mut buf).await.map(Some)
            }
        };
        let n = tokio::select! {
            n = read => n?,
            changed = rx.changed() => {
                if changed.is_err() || *rx.borrow() == Fault::Reset {
                    return Ok(());
                }
                continue;
            }
        };
        let Some(n) = n else {
            // The engine has fallen quiet: the answer is lost, the link breaks.
            *s.lost.lock() += 1;
            return Ok(());
        };
        if n == 0 {
            return Ok(());
        }
        if armed.load(std::sync::atomic::Ordering::SeqCst) {
            continue;
        }
        if !forward(&mut to, &buf[..n], &mut rx).await? {
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_go_through_the_proxy() {
        let addr: SocketAddr = "127.0.0.1:9".parse().expect("addr");
        let through = |url: &str| through(url, addr);
        assert_eq!(through("postgres://u@127.0.0.1:5432/test"), "postgres://u@127.0.0.1:9/test");
        assert_eq!(through("mysql://root@localhost:3306/db?x=1"), "mysql://root@127.0.0.1:9/db?x=1");
        assert_eq!(
            FaultLink::target_of("postgres://u:p@127.0.0.1:5432/test"),
            Some("127.0.0.1:5432".parse().expect("addr"))
        );
    }

    /// A server that greets every connection with its name, then echoes.
    async fn greeter(name: &'static [u8]) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            while let Ok((mut c, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let _ = c.write_all(name).await;
                    let mut buf = [0u8; 64];
                    while let Ok(n @ 1..) = c.read(&mut buf).await {
                        let _ = c.write_all(&buf[..n]).await;
                    }
                });
            }
        });
        addr
    }

    async fn greeting(c: &mut TcpStream) -> Vec<u8> {
        let mut buf = [0u8; 1];
        c.read_exact(&mut buf).await.expect("a greeting");
        buf.to_vec()
    }

    /// Whether a connection still carries bytes both ways.
    async fn open(c: &mut TcpStream) -> bool {
        let mut buf = [0u8; 1];
        c.write_all(b"?").await.is_ok()
            && matches!(tokio::time::timeout(Duration::from_secs(2), c.read(&mut buf)).await, Ok(Ok(1)))
    }

    #[tokio::test]
    async fn a_retarget_moves_new_connections_and_ends_open_ones_when_asked() {
        let (a, b) = (greeter(b"a").await, greeter(b"b").await);
        let link = FaultLink::start(a).await.expect("proxy");
        let mut first = TcpStream::connect(link.addr()).await.expect("connect");
        assert_eq!(greeting(&mut first).await, b"a");
        // As a DNS name changed: new connections go to b, open ones stay on a.
        link.retarget(b, false);
        let mut second = TcpStream::connect(link.addr()).await.expect("connect");
        assert_eq!(greeting(&mut second).await, b"b");
        assert!(open(&mut first).await, "the connection to a is kept");
        // As a moved virtual IP: the open connections end.
        link.retarget(a, true);
        assert!(!open(&mut first).await && !open(&mut second).await, "the open connections ended");
        let mut third = TcpStream::connect(link.addr()).await.expect("connect");
        assert_eq!(greeting(&mut third).await, b"a");
        assert!(open(&mut third).await);
    }
}
