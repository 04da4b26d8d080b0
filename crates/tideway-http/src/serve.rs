//! The connection loop: what `axum::serve` does, plus what a service facing
//! hostile clients needs and `axum::serve` does not offer.
//!
//! * **A header-read timeout.** hyper starts it whenever it waits for a
//!   request head (a new connection, or an idle keep-alive one), so a silent
//!   or slowloris connection is closed after `header_read_timeout`.
//! * **A connection cap.** `max_connections` connections are served
//!   normally. A few more ("overflow") are served one request each, with a
//!   short header timeout and `Connection: close`, so a health probe still
//!   gets through while silent connections hold every regular slot. Beyond
//!   that a connection gets a `503` JSON answer and is closed at once.
//! * **A bounded shutdown.** On shutdown the listener closes, idle
//!   connections close, requests in flight may finish, and after
//!   `shutdown_grace` whatever is left (a half-sent header, a slow client)
//!   is dropped.
//! * **Clients that stop reading are dropped.** A write that cannot go on
//!   for [`WRITE_STALL`] (the client's window stayed shut: it stopped
//!   reading a home stream, or a page) fails and the connection closes, so
//!   a stalled stream holds nothing past that; its client resumes or
//!   resets when it comes back.
//! * **JSON for hyper's own errors.** hyper answers a request it cannot
//!   parse (headers too large, URI too long, a malformed request line) by
//!   itself, with an empty body. [`JsonErrors`] wraps the socket and
//!   rewrites exactly those answers into the API's JSON error body.

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tower::ServiceExt;

/// How the server treats connections.
#[derive(Debug, Clone, Copy)]
pub struct ServeOptions {
    /// Longest wait for a request's complete head, counted from the start of
    /// the connection or the end of the previous response (so it is also the
    /// keep-alive idle timeout).
    pub header_read_timeout: Duration,
    /// Connections served normally at once.
    pub max_connections: usize,
    /// How long shutdown waits for requests in flight.
    pub shutdown_grace: Duration,
}

/// Header timeout of an overflow connection (one request, then closed).
const OVERFLOW_HEADER_TIMEOUT: Duration = Duration::from_secs(2);

/// Overflow slots beside `max_connections` regular ones.
pub fn overflow_slots(max_connections: usize) -> usize {
    (max_connections / 16).clamp(4, 256)
}

/// The answer to a connection over both caps.
static BUSY: std::sync::LazyLock<Vec<u8>> = std::sync::LazyLock::new(|| {
    let body = r#"{"error":{"code":"unavailable","message":"the server is at its connection limit; retry later"}}"#;
    format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n\
         retry-after: 1\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
});

/// Serves `app` on `listener` until `shutdown` resolves, then drains within
/// the grace period.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    opts: ServeOptions,
    shutdown: impl Future<Output = ()> + Send,
) -> io::Result<()> {
    let regular = Arc::new(Semaphore::new(opts.max_connections.max(1)));
    let overflow = Arc::new(Semaphore::new(overflow_slots(opts.max_connections)));
    // HTTP/1.1 (what load balancers speak to a backend). Not hyper-util's
    // automatic builder: its HTTP/2 sniffing reads the first bytes with no
    // timeout, so a silent connection would never end.
    let mut normal = http1::Builder::new();
    normal.timer(TokioTimer::new()).header_read_timeout(opts.header_read_timeout);
    let mut brief = http1::Builder::new();
    brief.timer(TokioTimer::new()).header_read_timeout(OVERFLOW_HEADER_TIMEOUT).keep_alive(false);
    let graceful = GracefulShutdown::new();
    // Every connection is a task of this set, so that shutdown can end the
    // ones still open after the grace period.
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (stream, remote) = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    accept_error(&e).await;
                    continue;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        // Small JSON answers must not wait for Nagle's algorithm.
        let _ = stream.set_nodelay(true);
        let (permit, builder) = if let Ok(p) = regular.clone().try_acquire_owned() {
            (p, normal.clone())
        } else if let Ok(p) = overflow.clone().try_acquire_owned() {
            metrics::counter!("tideway_http_connections_overflow_total").increment(1);
            (p, brief.clone())
        } else {
            metrics::counter!("tideway_http_connections_refused_total").increment(1);
            // Best effort: one non-blocking write of the 503, then close.
            let _ = stream.try_write(&BUSY);
            continue;
        };
        let svc = app.clone().map_request(move |mut req: axum::http::Request<Incoming>| {
            req.extensions_mut().insert(ConnectInfo(remote));
            req
        });
        let io = TokioIo::new(JsonErrors::new(WriteStall::new(stream, WRITE_STALL)));
        let conn = builder.serve_connection(io, TowerToHyperService::new(svc));
        let conn = graceful.watch(conn);
        conns.spawn(async move {
            metrics::gauge!("tideway_http_connections").increment(1.0);
            if let Err(e) = conn.await {
                tracing::debug!(%remote, error = %e, "connection ended with an error");
            }
            metrics::gauge!("tideway_http_connections").decrement(1.0);
            drop(permit);
        });
    }
    drop(listener);
    tracing::info!(connections = conns.len(), "stopped accepting; draining connections");
    // Idle connections close now, busy ones after their response; what is
    // still open when the grace period ends is dropped.
    if tokio::time::timeout(opts.shutdown_grace, graceful.shutdown()).await.is_err() {
        tracing::warn!(left = conns.len(), "shutdown grace period over: closing the remaining connections");
    }
    conns.abort_all();
    while conns.join_next().await.is_some() {}
    Ok(())
}

/// Per-connection errors (the peer went away) are nothing to wait for; others
/// (out of file descriptors) are retried after a pause instead of spinning.
async fn accept_error(e: &io::Error) {
    use io::ErrorKind::*;
    if matches!(e.kind(), ConnectionRefused | ConnectionAborted | ConnectionReset) {
        return;
    }
    tracing::error!(error = %e, "accept failed; retrying in 100 ms");
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// How long a write may wait for a client that does not read.
pub const WRITE_STALL: Duration = Duration::from_secs(30);

/// A socket whose writes fail once one has waited `limit` for the peer to
/// take bytes (its receive window shut): a client that stopped reading.
pub struct WriteStall<S> {
    inner: S,
    limit: Duration,
    /// Running while a write is held back.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WriteStall<S> {
    pub fn new(inner: S, limit: Duration) -> Self {
        Self { inner, limit, stalled: None }
    }

    /// What a write that returned `polled` means: a pending one starts (or
    /// goes on with) the clock, and fails when it ran out.
    fn watch<T>(&mut self, cx: &mut Context<'_>, polled: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.stalled = None;
            return polled;
        }
        let limit = self.limit;
        let sleep = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                self.stalled = None;
                Poll::Ready(Err(io::Error::new(io::ErrorKind::TimedOut, "the client stopped reading")))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteStall<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteStall<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, polled)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, polled)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// A socket that turns hyper's own bodiless error answers into JSON.
///
/// hyper writes `HTTP/1.1 400|414|431 …` with `content-length: 0` when it
/// cannot parse a request, before any handler runs; every answer of the API
/// itself has a JSON body, so such a head can only come from hyper. It is
/// recognised in the first buffer of a write (hyper writes a head in one
/// buffer) and replaced; the connection is closed after it, as hyper does.
pub struct JsonErrors<S> {
    inner: S,
    /// A rewritten answer still to be written, and how much of it was.
    pending: Vec<u8>,
    written: usize,
}

impl<S> JsonErrors<S> {
    pub fn new(inner: S) -> Self {
        Self { inner, pending: Vec::new(), written: 0 }
    }
}

/// The JSON replacement of a bodiless error head written by hyper.
pub fn rewrite_bare_error(head: &[u8]) -> Option<Vec<u8>> {
    let (code, message) = match head.get(..13)? {
        b"HTTP/1.1 400 " | b"HTTP/1.0 400 " => {
            ("invalid_argument", "malformed HTTP request (request line, path or a header)")
        }
        b"HTTP/1.1 414 " | b"HTTP/1.0 414 " => ("uri_too_long", "the request URI is over 64 KiB"),
        b"HTTP/1.1 431 " | b"HTTP/1.0 431 " => {
            ("headers_too_large", "the request headers are too large (at most 100 headers, ~400 KiB in all)")
        }
        _ => return None,
    };
    let end = head.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head_text = std::str::from_utf8(&head[..end]).ok()?;
    let bodiless = head_text.lines().any(|l| l.eq_ignore_ascii_case("content-length: 0"));
    if !bodiless || end + 4 != head.len() {
        return None;
    }
    let status_line = head_text.lines().next()?;
    let body = format!(r#"{{"error":{{"code":"{code}","message":"{message}"}}}}"#);
    Some(
        format!(
            "{status_line}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

impl<S: AsyncWrite + Unpin> JsonErrors<S> {
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.written < self.pending.len() {
            let n = ready!(Pin::new(&mut self.inner).poll_write(cx, &self.pending[self.written..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.written += n;
        }
        self.pending.clear();
        self.written = 0;
        Poll::Ready(Ok(()))
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for JsonErrors<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for JsonErrors<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        ready!(self.poll_drain(cx))?;
        if let Some(answer) = rewrite_bare_error(buf) {
            self.pending = answer;
            return Poll::Ready(Ok(buf.len()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_drain(cx))?;
        if let [only] = bufs
            && let Some(answer) = rewrite_bare_error(only)
        {
            self.pending = answer;
            return Poll::Ready(Ok(only.len()));
        }
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_drain(cx))?;
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {

    #[tokio::test]
    async fn a_write_the_peer_does_not_take_fails_after_the_stall_limit() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (a, mut b) = tokio::io::duplex(64);
        let mut w = WriteStall::new(a, Duration::from_millis(100));
        w.write_all(&[1; 64]).await.expect("fits the buffer");
        let started = std::time::Instant::now();
        let e = w.write_all(&[2; 64]).await.expect_err("the peer reads nothing");
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() >= Duration::from_millis(100));
        drop(w);
        let mut rest = Vec::new();
        b.read_to_end(&mut rest).await.expect("the first peer's bytes");
        assert_eq!(rest.len(), 64);
        // A peer that reads in time keeps the connection.
        let (a, mut b2) = tokio::io::duplex(64);
        let mut w = WriteStall::new(a, Duration::from_millis(200));
        let reader = tokio::spawn(async move {
            let mut buf = vec![0; 256];
            let mut got = 0;
            while got < 256 {
                tokio::time::sleep(Duration::from_millis(20)).await;
                got += b2.read(&mut buf).await.expect("read");
            }
            got
        });
        w.write_all(&[3; 256]).await.expect("a slow but reading peer");
        assert_eq!(reader.await.expect("reader"), 256);
    }

    use super::*;

    #[test]
    fn hyper_error_heads_become_json() {
        let head = b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\ndate: x\r\n\r\n";
        let out = String::from_utf8(rewrite_bare_error(head).expect("rewritten")).expect("utf8");
        assert!(out.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"), "{out}");
        let (_, body) = out.split_once("\r\n\r\n").expect("head and body");
        let v: serde_json::Value = serde_json::from_str(body).expect("JSON body");
        assert_eq!(v["error"]["code"], "headers_too_large");
        assert!(out.contains(&format!("content-length: {}\r\n", body.len())));
    }

    #[test]
    fn answers_with_a_body_are_left_alone() {
        for head in [
            &b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 80\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n{}",
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-length: 0\r\n",
        ] {
            assert!(rewrite_bare_error(head).is_none(), "{:?}", String::from_utf8_lossy(head));
        }
    }

    #[test]
    fn the_busy_answer_is_exact() {
        let text = std::str::from_utf8(&BUSY).expect("utf8");
        let (head, body) = text.split_once("\r\n\r\n").expect("head and body");
        assert!(head.contains(&format!("content-length: {}", body.len())), "{head}");
        let v: serde_json::Value = serde_json::from_str(body).expect("JSON");
        assert_eq!(v["error"]["code"], "unavailable");
    }
}
