//! The gRPC face of the engine: each handler validates the request
//! ([`request`]), calls the engine, and maps the outcome ([`status`]).
//! No lock logic lives here.

pub(crate) mod admin;
pub(crate) mod auth;
pub(crate) mod deadline;
pub(crate) mod delivery;
pub(crate) mod denied;
pub(crate) mod drain;
pub(crate) mod election;
pub(crate) mod hold;
pub mod inbound;

pub(crate) use admin::AdminApi;
pub use auth::{token_sha256, Identity};
pub use request::RequestBounds;
pub(crate) mod quota;
pub(crate) mod rate;
pub(crate) mod request;
pub(crate) mod status;
#[cfg(test)]
mod tests;

use crate::metrics;
use crate::pb;
use crate::pb::lock_service_server::LockService;
use crate::redlock::{Holder, Lock, LockError, Redlock};
use auth::Gatekeeper;
use denied::Denied;
use futures::FutureExt;
use rate::{CallSlot, ConnectionCalls};
use request::{InvalidRequest, NamesLock};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;
use tonic::{Code, Request, Response, Status, Streaming};
use tracing::Instrument;

/// How much earlier than the caller's cut-off a wait shortened by it ends:
/// time for the engine's answer to cross from its task to the handler.
const ANSWER_SLACK: Duration = Duration::from_millis(1);

/// The `redlock.v1.LockService` implementation.
pub(crate) struct LockApi {
    engine: Arc<Redlock>,
    limits: RequestBounds,
    sessions: hold::Sessions,
    /// Identities (set by the interceptor) and their namespaces.
    gate: Gatekeeper,
    /// The cap on calls in progress per connection.
    calls: ConnectionCalls,
    /// `server.deadline_reserve`: no grant is handed to a caller later than
    /// this before its deadline.
    deadline_reserve: Duration,
    /// `[testing]`: the fixed defects put back (for the chaos checker
    /// only; see `election` for the one it reads).
    counterfactuals: crate::config::Counterfactuals,
}

impl LockApi {
    /// Serves `engine`, checking requests against `limits`, callers
    /// against `gate`, and connections against `calls`; grants stop
    /// `deadline_reserve` before a caller's deadline.
    pub(crate) fn new(
        engine: Arc<Redlock>,
        limits: RequestBounds,
        sessions: hold::Sessions,
        gate: Gatekeeper,
        calls: ConnectionCalls,
        deadline_reserve: Duration,
    ) -> LockApi {
        LockApi {
            engine,
            limits,
            sessions,
            gate,
            calls,
            deadline_reserve,
            counterfactuals: crate::config::Counterfactuals::default(),
        }
    }

    /// The same, with `[testing]`'s fixed defects put back.
    pub(crate) fn with_counterfactuals(
        mut self,
        counterfactuals: crate::config::Counterfactuals,
    ) -> LockApi {
        self.counterfactuals = counterfactuals;
        self
    }

    /// Who calls, holding a call slot of its connection while the call
    /// lasts; refused before the request is looked at.
    fn admit<T>(&self, request: &Request<T>) -> Result<(Identity, CallSlot), Denied> {
        let identity = self.gate.identity_of(request)?;
        let slot = self
            .calls
            .enter(request.remote_addr())
            .map_err(|max| Denied::TooManyCalls { max })?;
        Ok((identity, slot))
    }

    /// The prologue of a call on a held lock (Extend, Release, Validate):
    /// admits the caller ([`LockApi::admit`]), checks the request
    /// (`check`), and permits the caller the lock's resource, and every
    /// resource of a lock on several; names the resource in the request
    /// span. The call slot is held while the call lasts.
    fn admit_lock<T, A: NamesLock>(
        &self,
        request: Request<T>,
        check: impl FnOnce(&RequestBounds, T) -> Result<A, InvalidRequest>,
    ) -> Result<(A, CallSlot), Status> {
        let (identity, slot) = self.admit(&request)?;
        let args = check(&self.limits, request.into_inner())?;
        let (resource, token) = args.lock();
        identity.permit(resource)?;
        permit_members(&identity, token)?;
        record_resource(resource);
        Ok((args, slot))
    }
}

impl From<Lock> for pb::Lock {
    fn from(lock: Lock) -> pb::Lock {
        pb::Lock {
            resource: lock.resource,
            token: lock.token.expose().to_owned(),
            fence: lock.fence,
            permit: lock.token.permit().unwrap_or(0),
            // Counted down from the engine's deadline to this moment.
            validity: Some(proto_duration(lock.deadline.left())),
            resources: lock
                .members
                .into_iter()
                .map(|m| pb::LockedResource {
                    resource: m.resource,
                    fence: m.fence,
                })
                .collect(),
        }
    }
}

pub(crate) fn proto_duration(duration: Duration) -> prost_types::Duration {
    prost_types::Duration::try_from(duration).unwrap_or(prost_types::Duration {
        seconds: i64::MAX,
        nanos: 0,
    })
}

/// The stream of events of one `Hold` session.
pub(crate) type HoldStream = hold::SessionStream<hold::Hold>;

#[tonic::async_trait]
impl LockService for LockApi {
    async fn acquire(
        &self,
        request: Request<pb::AcquireRequest>,
    ) -> Result<Response<pb::AcquireResponse>, Status> {
        observed("Acquire", async {
            let (identity, _slot) = self.admit(&request)?;
            self.sessions.drain().refuse_new()?;
            let deadline = deadline::caller_deadline(request.metadata());
            let key = Gatekeeper::quota_key_of(&request, &identity);
            let args = self.limits.acquire(request.into_inner())?;
            identity.permit(&args.resource)?;
            for resource in &args.resources {
                identity.permit(resource)?;
            }
            // A waiting acquisition counts against its identity's quota of
            // waiters while the call lasts.
            let _waiting = self.sessions.waiter_slot(&key, &identity, args.wait)?;
            record_resource(&args.resource);
            // A drain answers a waiting acquisition UNAVAILABLE (dropping
            // it releases whatever it got).
            let lock = self
                .sessions
                .drain()
                .unless_draining(self.acquire_until(args, deadline))
                .await??;
            let message = pb::AcquireResponse {
                lock: Some(lock.clone().into()),
            };
            Ok(delivery::answer(message, &self.engine, lock))
        })
        .await
    }

    async fn extend(
        &self,
        request: Request<pb::ExtendRequest>,
    ) -> Result<Response<pb::ExtendResponse>, Status> {
        observed("Extend", async {
            let (args, _slot) = self.admit_lock(request, RequestBounds::extend)?;
            let lock = self
                .engine
                .extend(&args.resource, &args.token, args.ttl)
                .await?;
            Ok(Response::new(pb::ExtendResponse {
                lock: Some(lock.into()),
            }))
        })
        .await
    }

    async fn release(
        &self,
        request: Request<pb::ReleaseRequest>,
    ) -> Result<Response<pb::ReleaseResponse>, Status> {
        observed("Release", async {
            let (lock, _slot) = self.admit_lock(request, |bounds, r: pb::ReleaseRequest| {
                bounds.lock_ref(r.resource, &r.token)
            })?;
            let was_held = self.engine.release(&lock.resource, &lock.token).await?;
            Ok(Response::new(pb::ReleaseResponse { was_held }))
        })
        .await
    }

    async fn validate(
        &self,
        request: Request<pb::ValidateRequest>,
    ) -> Result<Response<pb::ValidateResponse>, Status> {
        observed("Validate", async {
            let (lock, _slot) = self.admit_lock(request, |bounds, r: pb::ValidateRequest| {
                bounds.lock_ref(r.resource, &r.token)
            })?;
            let validity = self.engine.validate(&lock.resource, &lock.token).await?;
            Ok(Response::new(pb::ValidateResponse {
                held: validity.is_some(),
                validity: validity.map(proto_duration),
            }))
        })
        .await
    }

    type HoldStream = HoldStream;

    async fn hold(
        &self,
        request: Request<Streaming<pb::HoldRequest>>,
    ) -> Result<Response<Self::HoldStream>, Status> {
        observed("Hold", self.open_session::<hold::Hold>(request)).await
    }
}

/// Runs one call inside a `request` span (rpc, resource, outcome, duration;
/// never a token) and counts it in the request metrics.
///
/// A plain function returning `call` wrapped, not an `async fn`: an
/// `async fn` keeps its argument and the future it awaits side by side in
/// its state, so every call's future would be laid out twice (3 KB per
/// `Hold` being opened; 10,000-session burst).
fn observed<T>(
    rpc: &'static str,
    call: impl Future<Output = Result<T, Status>>,
) -> impl Future<Output = Result<T, Status>> {
    let span = tracing::debug_span!(
        "request",
        rpc,
        resource = tracing::field::Empty,
        outcome = tracing::field::Empty,
        duration_us = tracing::field::Empty
    );
    let started = Instant::now();
    call.instrument(span.clone()).map(move |result| {
        let elapsed = started.elapsed();
        let outcome = status::code_name(result.as_ref().err().map_or(Code::Ok, Status::code));
        span.record("outcome", outcome);
        span.record(
            "duration_us",
            u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX),
        );
        span.in_scope(|| tracing::debug!("answered"));
        metrics::request(rpc, outcome, elapsed);
        result
    })
}

/// A lock on several resources acts on all of them: the caller must be
/// permitted every one (its namespaces), not only the one it named.
fn permit_members(identity: &Identity, token: &crate::redlock::Token) -> Result<(), Denied> {
    for member in crate::redlock::token::members(token).unwrap_or_default() {
        identity.permit(&member)?;
    }
    Ok(())
}

/// Names the resource in the current request span.
fn record_resource(resource: &str) {
    tracing::Span::current().record("resource", resource);
}

impl LockApi {
    /// Acquires on a detached task (see [`Redlock::acquire_detached_as`]).
    ///
    /// With a caller deadline, grants are accepted only until the cut-off,
    /// `server.deadline_reserve` before it: the caller's deadline passes
    /// earlier on its side than here, by the request's travel time, and a
    /// grant it never receives would stay locked for its whole ttl. A grant
    /// completing after the cut-off is released (dropping the detached
    /// acquisition does that) and the caller told DEADLINE_EXCEEDED. The
    /// residual window: a client whose request took longer than the reserve
    /// to arrive can still miss a grant answered just before the cut-off;
    /// that lock expires with its ttl.
    ///
    /// A deadline shorter than four reserves keeps three quarters of itself
    /// ([`deadline::reserve_for`]): a fixed 20 ms reserve refused every call with a
    /// deadline of 20 ms or less without trying, though a free lock is
    /// granted in about a millisecond.
    ///
    /// DEADLINE_EXCEEDED is the answer only when the deadline is why the
    /// call failed: the wait, cut short by it, ended with the resource still
    /// held, or the cut-off passed. Any other failure (a limit, overload,
    /// masters unreachable) is told as it is, even when the caller's
    /// deadline is shorter than its wait. It is told at the cut-off, a
    /// moment before the caller's own deadline, on purpose: a tonic client
    /// reports its own expiry as CANCELLED ("Timeout expired"), so only the
    /// daemon's answer gives every client DEADLINE_EXCEEDED (the handler
    /// test `deadline_exceeded_when_grpc_timeout_is_shorter_than_the_wait`
    /// and tests/cancellation.rs hold it to that).
    ///
    /// With a request id too, a grant after the cut-off is released: the
    /// request id is for answers lost where the daemon cannot see it (see
    /// [`Redlock::acquire_detached_as`] for that and for a retry's window).
    async fn acquire_until(
        &self,
        args: request::AcquireArgs,
        deadline: Option<Instant>,
    ) -> Result<Lock, LockError> {
        let holder = Holder::unary(&args.owner)
            .with_terms(args.lock_delay, args.hold_at_least)
            .with_limit(args.limit)
            .with_shared(args.shared);
        let request::AcquireArgs {
            resource,
            resources,
            ttl,
            wait,
            request_id,
            ..
        } = args;
        let acquire = |wait| match resources.is_empty() {
            true => self.engine.acquire_detached_as(
                resource.clone(),
                request_id.as_ref(),
                ttl,
                wait,
                holder.clone(),
            ),
            false => {
                self.engine
                    .acquire_detached_multi(resources.clone(), ttl, wait, holder.clone())
            }
        };
        let Some(deadline) = deadline else {
            return acquire(wait).await;
        };
        let now = Instant::now();
        let reserve = deadline::reserve_for(
            self.deadline_reserve,
            deadline.saturating_duration_since(now),
        );
        let cutoff = deadline.checked_sub(reserve).unwrap_or(now).max(now);
        let usable = cutoff.saturating_duration_since(now);
        if usable.is_zero() {
            return Err(LockError::DeadlineExceeded);
        }
        // A wait cut by the deadline ends a moment before the cut-off, so
        // that its outcome (held, unreachable) reaches us before the cut-off
        // and is told as it is.
        let truncated = usable < wait;
        let wait = match truncated {
            true => usable.saturating_sub(ANSWER_SLACK),
            false => wait,
        };
        let attempt = acquire(wait);
        match tokio::time::timeout_at(cutoff, attempt).await {
            Ok(Ok(lock)) => Ok(lock),
            Ok(Err(LockError::Contended(_) | LockError::StillHeld)) if truncated => {
                Err(LockError::DeadlineExceeded)
            }
            Ok(Err(error)) => Err(error),
            // Dropping the detached attempt releases anything it still gets.
            Err(_elapsed) => Err(LockError::DeadlineExceeded),
        }
    }
}
