//! TLS on admitted connections, done by the daemon rather than by tonic or
//! hyper, for both the gRPC port and the HTTP gateway: every handshake has
//! a deadline (`server.tls_handshake_timeout`), runs beside the others (a
//! slow client never delays another's), and a failed one is logged at info
//! at a bounded rate with the peer address, and counted in
//! `redlock_connections_refused_total{reason="tls_handshake"}`, so an
//! operator sees clients with the wrong CA, expired certificates or
//! plaintext on a TLS port without turning on debug logs.

use super::accept::Conn;
use super::Throttled;
use futures::stream::FuturesUnordered;
use futures::{Stream, StreamExt};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

/// At most one log line per this period for failed handshakes (each line
/// says how many were not logged).
const LOG_PERIOD: Duration = Duration::from_secs(10);

/// One handshake in progress: the peer, and the TLS stream or why not.
type Pending = Pin<Box<dyn Future<Output = (SocketAddr, Handshaken)> + Send>>;

/// A finished handshake (boxed: a TLS stream is large), or why it failed.
type Handshaken = Result<Box<TlsStream<Conn>>, String>;

struct State<S> {
    incoming: Pin<Box<S>>,
    incoming_ended: bool,
    pending: FuturesUnordered<Pending>,
    acceptor: TlsAcceptor,
    timeout: Duration,
    failed_log: Throttled,
    port: &'static str,
}

/// What the loop saw next.
enum Next {
    Accepted(Conn),
    AcceptError(io::Error),
    Handshake(SocketAddr, Handshaken),
    Ended,
}

impl<S> State<S>
where
    S: Stream<Item = Result<Conn, io::Error>> + Send,
{
    fn start(&mut self, conn: Conn) {
        let acceptor = self.acceptor.clone();
        let timeout = self.timeout;
        self.pending.push(Box::pin(async move {
            let peer = conn.peer();
            let result = match tokio::time::timeout(timeout, acceptor.accept(conn)).await {
                Ok(Ok(stream)) => Ok(Box::new(stream)),
                Ok(Err(e)) => Err(e.to_string()),
                Err(_) => Err(format!(
                    "not finished within server.tls_handshake_timeout ({timeout:?})"
                )),
            };
            (peer, result)
        }));
    }

    async fn next(&mut self) -> Next {
        tokio::select! {
            conn = self.incoming.next(), if !self.incoming_ended => match conn {
                Some(Ok(conn)) => Next::Accepted(conn),
                Some(Err(e)) => Next::AcceptError(e),
                None => Next::Ended,
            },
            Some((peer, result)) = self.pending.next(), if !self.pending.is_empty() => {
                Next::Handshake(peer, result)
            }
            else => Next::Ended,
        }
    }

    fn failed(&self, peer: SocketAddr, reason: &str) {
        crate::metrics::connection_refused("tls_handshake");
        if let Some(skipped) = self.failed_log.ready() {
            tracing::info!(
                port = self.port,
                peer = %peer.ip(),
                reason,
                not_logged = skipped,
                "TLS handshake failed"
            );
        }
    }
}

/// The TLS streams of `incoming`'s connections, for a port named `port`
/// in logs ("grpc" or "http"). Connections whose handshake fails or times
/// out are closed (their place in the connection caps with them).
pub(crate) fn tls<S>(
    incoming: S,
    config: Arc<rustls::ServerConfig>,
    timeout: Duration,
    port: &'static str,
) -> impl Stream<Item = Result<TlsStream<Conn>, io::Error>>
where
    S: Stream<Item = Result<Conn, io::Error>> + Send + 'static,
{
    let state = State {
        incoming: Box::pin(incoming),
        incoming_ended: false,
        pending: FuturesUnordered::new(),
        acceptor: TlsAcceptor::from(config),
        timeout,
        failed_log: Throttled::new(LOG_PERIOD),
        port,
    };
    futures::stream::unfold(state, |mut state| async move {
        loop {
            match state.next().await {
                Next::Accepted(conn) => state.start(conn),
                Next::AcceptError(e) => return Some((Err(e), state)),
                Next::Handshake(_, Ok(stream)) => return Some((Ok(*stream), state)),
                Next::Handshake(peer, Err(reason)) => state.failed(peer, &reason),
                Next::Ended if state.incoming_ended || state.pending.is_empty() => return None,
                Next::Ended => state.incoming_ended = true,
            }
        }
    })
}
