//! The gRPC port's accept loop, fed to tonic instead of its own: each
//! accepted socket is admitted by the [`Gate`] or closed at once, accept
//! errors (EMFILE when file descriptors run out) back off instead of
//! spinning, and every admitted connection is a [`Conn`] that closes itself
//! once idle for `server.idle_timeout`.

use super::gate::{Admitted, Gate};
use super::Throttled;
use futures::Stream;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::{Instant, Sleep};
use tonic::transport::server::{Connected, TcpConnectInfo};

/// First pause after a failed accept; doubled on each further failure.
const BACKOFF_MIN: Duration = Duration::from_millis(10);
/// Longest pause after a failed accept.
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// At most one log line per this period for refused connections and for
/// accept errors (each line says how many were not logged).
const LOG_PERIOD: Duration = Duration::from_secs(10);

/// How accepted connections are set up.
#[derive(Debug, Clone)]
pub(crate) struct AcceptSettings {
    /// `server.keepalive_interval`: TCP keepalive's idle time and the
    /// pause between its probes.
    pub(crate) keepalive: Duration,
    /// `server.keepalive_timeout`: how long TCP keepalive probes may go
    /// unanswered before the kernel drops the connection.
    pub(crate) keepalive_timeout: Duration,
    /// `server.idle_timeout`.
    pub(crate) idle_timeout: Duration,
}

/// One admitted client connection. Its connect info is the socket's own
/// (`TcpConnectInfo`), so under TLS tonic still gives handlers
/// `TlsConnectInfo<TcpConnectInfo>` and client certificates stay readable
/// (`service::auth`).
#[derive(Debug)]
pub(crate) struct Conn {
    stream: TcpStream,
    peer: std::net::SocketAddr,
    admitted: Admitted,
    idle_timeout: Duration,
    timer: Pin<Box<Sleep>>,
}

impl Conn {
    /// The peer's address and port.
    pub(crate) fn peer(&self) -> std::net::SocketAddr {
        self.peer
    }

    /// The local address the connection came in on.
    pub(crate) fn local(&self) -> Option<std::net::SocketAddr> {
        self.stream.local_addr().ok()
    }

    /// The connection's open streams, for a server that counts its calls
    /// itself (the HTTP gateway) rather than through `conn::streams`.
    pub(crate) fn activity(&self) -> std::sync::Arc<super::gate::Activity> {
        std::sync::Arc::clone(&self.admitted.activity)
    }

    /// `Ready` once the connection has had no open stream for the idle
    /// timeout; otherwise registers for a wake-up at the next deadline.
    fn poll_idle(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        loop {
            if self.timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let now = Instant::now();
            let deadline = match self.admitted.activity.idle_since() {
                Some(since) => since + self.idle_timeout,
                None => now + self.idle_timeout,
            };
            if deadline <= now {
                return Poll::Ready(());
            }
            self.timer.as_mut().reset(deadline);
        }
    }
}

impl Connected for Conn {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if let Poll::Ready(read) = Pin::new(&mut this.stream).poll_read(cx, buf) {
            // Data or the end of the stream (FIN): the client was heard
            // from, recorded before hyper sees it (`super::heard`). An
            // error is not: a timeout (TCP keepalive gave up) or a reset,
            // which a middlebox may send for a client cut off behind it.
            if read.is_ok() {
                this.admitted.activity.heard.now();
            }
            return Poll::Ready(read);
        }
        // The server always has a read pending on a connection, so this is
        // where an idle one is noticed; the error makes hyper drop it.
        match this.poll_idle(cx) {
            Poll::Ready(()) => {
                tracing::debug!("closing an idle client connection");
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "connection idle for server.idle_timeout",
                )))
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// Errors of one pending connection (the peer gave up before accept):
/// the next accept can go ahead at once.
fn is_connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
    )
}

/// Sets up an admitted socket: TCP_NODELAY (without it Nagle's algorithm
/// and the client's delayed ACK hold a response back by ~40 ms) and TCP
/// keepalive with the same bound as the HTTP/2 PINGs (`server/mod.rs`): idle
/// `interval`, then a probe every `interval` until `timeout` has gone
/// unanswered. Linux's own defaults (a probe every 75 s, 9 of them) would
/// leave a dead peer's connection open for 11 minutes; the PINGs end a
/// session sooner, and this is the backstop where no PING runs (the HTTP
/// gateway's HTTP/1.1 connections).
fn configure(stream: &TcpStream, settings: &AcceptSettings) {
    if let Err(e) = stream.set_nodelay(true) {
        tracing::debug!(error = %e, "could not set TCP_NODELAY");
    }
    let ka = keepalive(settings.keepalive, settings.keepalive_timeout);
    if let Err(e) = socket2::SockRef::from(stream).set_tcp_keepalive(&ka) {
        tracing::debug!(error = %e, "could not set TCP keepalive");
    }
}

/// TCP keepalive: idle `interval`, probes `interval` apart, as many as fit
/// in `timeout` (at least one).
fn keepalive(interval: Duration, timeout: Duration) -> socket2::TcpKeepalive {
    socket2::TcpKeepalive::new()
        .with_time(interval)
        .with_interval(interval)
        .with_retries(probes(interval, timeout))
}

/// How many unanswered probes `interval` apart make `timeout`, rounded up.
/// Public (as `server::keepalive_probes`) for the benchmark's gRPC floor,
/// which sets its TCP keepalive as the daemon does.
pub fn probes(interval: Duration, timeout: Duration) -> u32 {
    let interval = interval.as_millis().max(1);
    u32::try_from(timeout.as_millis().div_ceil(interval))
        .unwrap_or(u32::MAX)
        .max(1)
}

struct Loop {
    listener: TcpListener,
    gate: Gate,
    settings: AcceptSettings,
    backoff: Duration,
    refused_log: Throttled,
    error_log: Throttled,
}

impl Loop {
    /// Accepts until a connection is admitted. Never ends: tonic stops
    /// polling it at shutdown.
    async fn next(&mut self) -> Conn {
        loop {
            match self.listener.accept().await {
                Ok((stream, peer)) => {
                    self.backoff = BACKOFF_MIN;
                    match self.gate.admit(peer) {
                        Ok(admitted) => {
                            configure(&stream, &self.settings);
                            let idle_timeout = self.settings.idle_timeout;
                            return Conn {
                                stream,
                                peer,
                                admitted,
                                idle_timeout,
                                timer: Box::pin(tokio::time::sleep(idle_timeout)),
                            };
                        }
                        Err(refused) => {
                            // Dropping the socket closes it: the cheapest
                            // refusal there is, no TLS and no HTTP/2.
                            drop(stream);
                            crate::metrics::connection_refused(refused.reason());
                            if let Some(skipped) = self.refused_log.ready() {
                                tracing::warn!(
                                    peer = %peer.ip(),
                                    limit = refused.reason(),
                                    not_logged = skipped,
                                    "connection refused: limits.{} reached",
                                    refused.reason()
                                );
                            }
                        }
                    }
                }
                Err(e) if is_connection_error(&e) => {}
                Err(e) => {
                    // EMFILE/ENFILE/ENOBUFS: retrying at once would spin a
                    // core; the pending connection waits in the backlog.
                    crate::metrics::connection_refused("accept_error");
                    if let Some(skipped) = self.error_log.ready() {
                        tracing::warn!(
                            error = %e,
                            not_logged = skipped,
                            pause = ?self.backoff,
                            "accepting a connection failed; pausing accepts"
                        );
                    }
                    tokio::time::sleep(self.backoff).await;
                    self.backoff = (self.backoff * 2).min(BACKOFF_MAX);
                }
            }
        }
    }
}

/// The admitted connections of `listener`, for tonic's
/// `serve_with_incoming_shutdown`.
pub(crate) fn incoming(
    listener: TcpListener,
    gate: Gate,
    settings: AcceptSettings,
) -> impl Stream<Item = Result<Conn, io::Error>> {
    let state = Loop {
        listener,
        gate,
        settings,
        backoff: BACKOFF_MIN,
        refused_log: Throttled::new(LOG_PERIOD),
        error_log: Throttled::new(LOG_PERIOD),
    };
    futures::stream::unfold(state, |mut state| async move {
        let conn = state.next().await;
        Some((Ok(conn), state))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Probes fit the timeout, rounded up, at least one.
    #[test]
    fn probes_fill_the_timeout() {
        let s = Duration::from_secs;
        assert_eq!(probes(s(1), s(2)), 2);
        assert_eq!(probes(s(1), Duration::from_millis(2_500)), 3);
        assert_eq!(probes(s(10), s(1)), 1);
        assert_eq!(probes(Duration::ZERO, s(1)), 1_000);
    }

    /// An accepted socket carries the keepalive the settings ask for, as
    /// the kernel reports it back.
    #[tokio::test]
    async fn accepted_sockets_probe_at_the_configured_pace() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let _client = TcpStream::connect(addr).await.expect("connect");
        let (stream, _) = listener.accept().await.expect("accept");
        let settings = AcceptSettings {
            keepalive: Duration::from_secs(1),
            keepalive_timeout: Duration::from_secs(2),
            idle_timeout: Duration::from_secs(60),
        };
        configure(&stream, &settings);
        let socket = socket2::SockRef::from(&stream);
        assert!(socket.keepalive().expect("SO_KEEPALIVE"));
        assert_eq!(
            socket.tcp_keepalive_time().expect("TCP_KEEPIDLE"),
            Duration::from_secs(1)
        );
        assert_eq!(
            socket.tcp_keepalive_interval().expect("TCP_KEEPINTVL"),
            Duration::from_secs(1)
        );
        assert_eq!(socket.tcp_keepalive_retries().expect("TCP_KEEPCNT"), 2);
        assert!(socket.tcp_nodelay().expect("TCP_NODELAY"));
    }
}
