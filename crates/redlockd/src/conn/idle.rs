//! Counts the open streams of each connection, every service included
//! (health watches and reflection too, which sit outside authentication),
//! so that `conn::accept::Conn` closes a connection only when nothing is
//! open on it: a silent `Hold` session is never cut by the idle timeout.

use super::gate::{Activity, Gate};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::body::Body;
use tonic::codegen::http::{Request, Response};
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo};

/// The layer: wraps the server's routes in [`Streams`].
#[derive(Debug, Clone)]
pub(crate) struct StreamsLayer {
    gate: Gate,
}

impl StreamsLayer {
    /// Streams are counted on the connections `gate` admitted.
    pub(crate) fn new(gate: Gate) -> StreamsLayer {
        StreamsLayer { gate }
    }
}

impl<S> tower::Layer<S> for StreamsLayer {
    type Service = Streams<S>;

    fn layer(&self, inner: S) -> Streams<S> {
        Streams {
            inner,
            gate: self.gate.clone(),
        }
    }
}

/// Counts a stream open from its request until its response body ends.
#[derive(Debug, Clone)]
pub(crate) struct Streams<S> {
    inner: S,
    gate: Gate,
}

/// One open stream; counted until dropped.
struct Open(Arc<Activity>);

impl Open {
    fn new(activity: Arc<Activity>) -> Open {
        activity.stream_opened();
        Open(activity)
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.stream_closed();
    }
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

/// A response body that keeps its stream counted until it is done.
struct Counted {
    inner: Body,
    _open: Open,
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

impl<S> tower::Service<Request<Body>> for Streams<S>
where
    S: tower::Service<Request<Body>, Response = Response<Body>> + Send,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future =
        Pin<Box<dyn std::future::Future<Output = Result<Response<Body>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let open = peer(&request)
            .and_then(|p| self.gate.activity(p))
            .map(Open::new);
        let response = self.inner.call(request);
        Box::pin(async move {
            let response = response.await?;
            Ok(match open {
                Some(open) => response.map(|inner| Body::new(Counted { inner, _open: open })),
                None => response,
            })
        })
    }
}
