//! Counts the open streams of each connection, every service included
//! (health watches and reflection too, which sit outside authentication),
//! so that `conn::accept::Conn` closes a connection only when nothing is
//! open on it: a silent `Hold` session is never cut by the idle timeout.
//! The same layer bounds the calls of the services outside authentication
//! (`limits.max_unauthenticated_calls`, see [`Unauthenticated`]), and ties
//! an `Acquire` answer's grant to its body (`service::delivery`).

use super::gate::{ClientSocket, Gate, OpenStream};
use super::Throttled;
use crate::service::denied::Denied;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tonic::body::Body;
use tonic::codegen::http::{Request, Response};
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};

/// The calls that hold a lock for as long as their stream lives: each is
/// told when its connection last heard from its client ([`ClientSocket`]).
const SESSIONS: [&str; 2] = [
    "/redlock.v1.LockService/Hold",
    "/redlock.v1.ElectionService/Campaign",
];

/// At most one log line per this period for refused unauthenticated calls.
const LOG_PERIOD: Duration = Duration::from_secs(10);

/// The services whose calls are authenticated (`service::auth`) and bounded
/// by the per-identity limits: everything under this path prefix. Other
/// paths (health, reflection, unknown methods) are answered to anyone, so
/// they share one global bound instead.
const AUTHENTICATED_PREFIX: &str = "/redlock.v1.";

/// How many calls of the services outside authentication may be open at
/// once, all connections together. Health `Watch` streams stay open for as
/// long as the client likes and cost memory each; without this bound,
/// 40,000 of them from four connections took 200 MB.
#[derive(Debug)]
pub(crate) struct Unauthenticated {
    max: usize,
    open: AtomicUsize,
    refused_log: Throttled,
}

/// One open unauthenticated call; frees its place when dropped.
struct Place(Arc<Unauthenticated>);

impl Unauthenticated {
    /// At most `max` such calls at once.
    pub(crate) fn new(max: usize) -> Arc<Unauthenticated> {
        Arc::new(Unauthenticated {
            max,
            open: AtomicUsize::new(0),
            refused_log: Throttled::new(LOG_PERIOD),
        })
    }

    /// A place for one more call, or `None` when all `max` are taken.
    fn take(self: &Arc<Self>) -> Option<Place> {
        self.open
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |open| {
                (open < self.max).then_some(open + 1)
            })
            .ok()
            .map(|_| Place(self.clone()))
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The layer: wraps the server's routes in [`Streams`].
#[derive(Debug, Clone)]
pub(crate) struct StreamsLayer {
    gate: Gate,
    unauthenticated: Arc<Unauthenticated>,
}

impl StreamsLayer {
    /// Streams are counted on the connections `gate` admitted; at most
    /// `max_unauthenticated` calls outside authentication are open at once.
    pub(crate) fn new(gate: Gate, max_unauthenticated: usize) -> StreamsLayer {
        StreamsLayer {
            gate,
            unauthenticated: Unauthenticated::new(max_unauthenticated),
        }
    }
}

impl<S> tower::Layer<S> for StreamsLayer {
    type Service = Streams<S>;

    fn layer(&self, inner: S) -> Streams<S> {
        Streams {
            inner,
            gate: self.gate.clone(),
            unauthenticated: self.unauthenticated.clone(),
        }
    }
}

/// Counts a stream open from its request until its response body ends, and
/// refuses calls outside authentication past their bound.
#[derive(Debug, Clone)]
pub(crate) struct Streams<S> {
    inner: S,
    gate: Gate,
    unauthenticated: Arc<Unauthenticated>,
}

/// The peer (address and port) a request came from, with or without TLS.
fn peer<B>(request: &Request<B>) -> Option<std::net::SocketAddr> {
    let ext = request.extensions();
    ext.get::<TcpConnectInfo>()
        .and_then(TcpConnectInfo::remote_addr)
        .or_else(|| {
            ext.get::<TlsConnectInfo<TcpConnectInfo>>()
                .and_then(|i| i.get_ref().remote_addr())
        })
}

/// A response body that keeps its stream counted (and its unauthenticated
/// call's place taken) until it is done.
struct Counted {
    inner: Body,
    _open: Option<OpenStream>,
    _place: Option<Place>,
}

impl tonic::codegen::Body for Counted {
    type Data = <Body as tonic::codegen::Body>::Data;
    type Error = <Body as tonic::codegen::Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl<S> Streams<S> {
    /// The answer past `limits.max_unauthenticated_calls`: counted, logged
    /// at a bounded rate, and cheap (the inner service never runs).
    fn refuse(&self) -> Response<Body> {
        let denied = Denied::UnauthenticatedCalls {
            max: self.unauthenticated.max,
        }
        .counted();
        if let Some(skipped) = self.unauthenticated.refused_log.ready() {
            tracing::warn!(
                limit = self.unauthenticated.max,
                not_logged = skipped,
                "health/reflection call refused: limits.max_unauthenticated_calls reached"
            );
        }
        denied.into_status().into_http()
    }
}

impl<S> tower::Service<Request<Body>> for Streams<S>
where
    S: tower::Service<Request<Body>, Response = Response<Body>> + Send,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let place = if request.uri().path().starts_with(AUTHENTICATED_PREFIX) {
            None
        } else {
            match self.unauthenticated.take() {
                Some(place) => Some(place),
                None => return Box::pin(std::future::ready(Ok(self.refuse()))),
            }
        };
        let mut request = request;
        let activity = peer(&request).and_then(|p| self.gate.activity(p));
        if let Some(activity) = &activity {
            if SESSIONS.contains(&request.uri().path()) {
                request.extensions_mut().insert(ClientSocket::of(activity));
            }
        }
        let open = activity.map(|activity| activity.open_stream());
        let response = self.inner.call(request);
        Box::pin(async move {
            // A grant in the answer is released unless the answer is sent.
            let response = crate::service::delivery::watch(response.await?);
            Ok(if open.is_none() && place.is_none() {
                response
            } else {
                response.map(|inner| {
                    Body::new(Counted {
                        inner,
                        _open: open,
                        _place: place,
                    })
                })
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Unauthenticated;

    /// Places are taken up to the bound and given back when dropped.
    #[test]
    fn unauthenticated_places_are_bounded_and_returned() {
        let bound = Unauthenticated::new(2);
        let a = bound.take().expect("first place");
        let _b = bound.take().expect("second place");
        assert!(bound.take().is_none(), "no third place");
        drop(a);
        assert!(bound.take().is_some(), "a dropped place comes back");
    }
}
