//! A grant is the caller's only once its answer has left: an `Acquire`
//! answer that cannot be sent (the caller reset the call, or its connection
//! closed, as the grant came) releases its grant at once, instead of
//! leaving the resource locked for the whole ttl.
//!
//! Why this is needed beside the detached acquisition's release on drop
//! (`redlock::acquire::DetachedAcquire`): hyper polls a call's handler
//! before it looks at the call's reset. When a grant and the caller's
//! cancel land together (a waiter woken by a release, whose caller had
//! cancelled just before that release), the handler completes, its answer
//! meets a reset stream and is dropped unsent, and nothing told the engine.
//! The caller never learns that lock's token: it is the daemon's to release.
//! (Seen in CI: tests/cancellation.rs found the lock still held after the
//! cancelled waiter's holder released.)
//!
//! How: the handler's [`answer`] puts an [`Undelivered`] in its extensions;
//! `conn::streams`, around every service, ties it to the answer's body
//! ([`watch`]); the body marks the grant delivered when it hands out the
//! call's last frame (the trailers carrying `grpc-status`, without which no
//! gRPC client takes the answer), and a body dropped before that releases
//! the grant. An answer that never goes through that layer (the HTTP
//! gateway reads the message itself) releases nothing.
//!
//! What is left: an answer handed to the connection whole just before the
//! caller's reset arrives is lost on the caller's side with the lock still
//! held, and expires with its ttl (a request id covers it: the retry gets
//! the same lock).

use crate::redlock::{Lock, Redlock};
use http_body::Body as _;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tonic::body::Body;
use tonic::codegen::http::Response;

/// A grant on its way to the caller, carried in the answer's extensions
/// until `conn::streams` ties it to the answer's body. Only the body
/// releases: dropped anywhere else (an answer that went elsewhere, a clone
/// the extensions made), it releases nothing.
#[derive(Clone)]
pub(crate) struct Undelivered {
    engine: Arc<Redlock>,
    lock: Lock,
}

/// The answer `message`, carrying `lock` until it has left (released if it
/// never does).
pub(crate) fn answer<T>(message: T, engine: &Arc<Redlock>, lock: Lock) -> tonic::Response<T> {
    let mut response = tonic::Response::new(message);
    response.extensions_mut().insert(Undelivered {
        engine: Arc::clone(engine),
        lock,
    });
    response
}

/// `response` with its grant, if it carries one, released unless its body
/// is sent to the end.
pub(crate) fn watch(mut response: Response<Body>) -> Response<Body> {
    match response.extensions_mut().remove::<Undelivered>() {
        // An empty body is no grant's answer (and tonic's `Body::new`
        // would drop the wrapper at once).
        Some(grant) if !response.body().is_end_stream() => response.map(|inner| {
            Body::new(Watched {
                inner,
                grant: Some(grant),
            })
        }),
        _ => response,
    }
}

/// An answer's body that releases its grant if dropped before its last
/// frame was handed out.
struct Watched {
    inner: Body,
    grant: Option<Undelivered>,
}

impl tonic::codegen::Body for Watched {
    type Data = <Body as tonic::codegen::Body>::Data;
    type Error = <Body as tonic::codegen::Body>::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        let last = match &polled {
            Poll::Ready(Some(Ok(frame))) => frame.is_trailers(),
            Poll::Ready(None) => true,
            Poll::Ready(Some(Err(_))) | Poll::Pending => false,
        };
        if last {
            self.grant = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        // A body at its end was sent whole, whether or not hyper polled it
        // to `None` (it stops at `is_end_stream`).
        if self.inner.is_end_stream() {
            return;
        }
        if let Some(Undelivered { engine, lock }) = self.grant.take() {
            engine.release_undelivered(lock);
        }
    }
}
