//! The handler tier: `LockService` methods called directly, no network, on a
//! [`LockApi`] built as `server::run` builds it, over five in-memory masters
//! ([`FakeMaster`]) under tokio's paused clock. Each test pins the status code
//! (and message) of one outcome of the contract in
//! `proto/redlock/v1/lock.proto`; all of them run in milliseconds.
//!
//! Where the server runs the interceptor ([`Gatekeeper::check`]) before the
//! handler, so do these tests ([`Daemon::checked`]). `Hold` gets a real
//! request stream: gRPC frames pushed through a channel-backed body and
//! decoded by the codec the generated server uses.

use super::auth::{token_sha256, Gatekeeper};
use super::drain::{self, DrainControl};
use super::hold::Sessions;
use super::rate::ConnectionCalls;
use super::request::RequestBounds;
use super::{HoldStream, LockApi};
use crate::config::{AuthConfig, ClientConfig, Config};
use crate::pb;
use crate::pb::hold_event::Event;
use crate::pb::hold_request::Request as HoldRequest;
use crate::pb::lock_service_server::LockService;
use crate::redlock::fake::{self, Behaviour, FakeMaster, Op};
use crate::redlock::{LockKeys, Redlock, Token};
use crate::server::engine::engine_settings;
use hyper::body::{Bytes, Frame};
use prost::Message;
use redlockd_proto::codec::SmallBufferCodec;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::codec::Codec;
use tonic::transport::server::TcpConnectInfo;
use tonic::{Code, Request, Status, Streaming};

mod delivery;
mod draining;
mod idempotent;
mod lost;
mod props;

const MS: fn(u64) -> Duration = Duration::from_millis;
const RESOURCE: &str = "orders/42";
const TTL: Duration = Duration::from_secs(10);
const TOKEN: &str = "secret-orders";

/// A daemon without a network: the service, its interceptor, its masters.
struct Daemon {
    api: LockApi,
    gate: Gatekeeper,
    fakes: Vec<Arc<FakeMaster>>,
    keys: LockKeys,
    /// Moves the daemon's phase on, as `run` does on shutdown.
    control: DrainControl,
}

/// A daemon with the default configuration.
fn daemon() -> Daemon {
    daemon_with(|_| {})
}

/// A daemon with the default configuration changed by `configure`, wired as
/// `server::run` wires it.
fn daemon_with(configure: impl FnOnce(&mut Config)) -> Daemon {
    let mut config = Config::default();
    configure(&mut config);
    let fakes = fake::five();
    let engine =
        Redlock::new(fake::as_nodes(&fakes), engine_settings(&config)).expect("five masters");
    let (control, phase) = drain::channel();
    let gate = Gatekeeper::new(&config.auth, &config.limits);
    let api = LockApi::new(
        Arc::new(engine),
        RequestBounds::from(&config.redlock),
        Sessions::new(&config, phase),
        gate.clone(),
        ConnectionCalls::new(config.limits.max_calls_per_connection),
        config.server.deadline_reserve,
    );
    Daemon {
        api,
        gate,
        fakes,
        keys: LockKeys::new(&config.redlock.key_prefix, RESOURCE),
        control,
    }
}

/// Authentication on: one client, `orders`, with [`TOKEN`], limited to
/// `orders/`.
fn with_auth(config: &mut Config) {
    config.auth = AuthConfig {
        admins: Vec::new(),
        clients: vec![ClientConfig {
            max_sessions: None,
            max_waiters: None,
            name: "orders".into(),
            token_sha256: Some(token_sha256(TOKEN)),
            certificate_san: None,
            namespaces: vec!["orders/".into()],
        }],
    };
}

fn proto(duration: Duration) -> Option<prost_types::Duration> {
    Some(prost_types::Duration::try_from(duration).expect("small"))
}

fn acquire(resource: &str, ttl: Duration, wait: Duration) -> pb::AcquireRequest {
    pb::AcquireRequest {
        resource: resource.into(),
        ttl: proto(ttl),
        wait: proto(wait),
        owner: "handler-test".into(),
        request_id: String::new(),
        ..Default::default()
    }
}

fn lock_of(response: Result<tonic::Response<pb::AcquireResponse>, Status>) -> pb::Lock {
    response
        .expect("granted")
        .into_inner()
        .lock
        .expect("a lock")
}

/// A request carrying `authorization: Bearer <token>`.
fn bearer<T>(message: T, token: &str) -> Request<T> {
    let mut request = Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {token}").parse().expect("ascii"),
    );
    request
}

/// A request arriving on the connection from `peer`.
fn from_peer<T>(message: T, peer: SocketAddr) -> Request<T> {
    let mut request = Request::new(message);
    request.extensions_mut().insert(TcpConnectInfo {
        local_addr: None,
        remote_addr: Some(peer),
    });
    request
}

/// Asserts the call failed with `code`; returns its message.
#[track_caller]
fn refused<T>(result: Result<T, Status>, code: Code) -> String {
    let Err(status) = result else {
        panic!("must be refused with {code:?}, but succeeded");
    };
    assert_eq!(status.code(), code, "{status:?}");
    status.message().to_owned()
}

impl Daemon {
    /// Runs the interceptor on `request`'s headers, as the server does
    /// before the handler (tonic's `InterceptedService` likewise splits the
    /// message off and puts it back).
    fn checked<T>(&self, request: Request<T>) -> Result<Request<T>, Status> {
        let (metadata, extensions, message) = request.into_parts();
        let checked = self
            .gate
            .check(Request::from_parts(metadata, extensions, ()))?;
        let (metadata, extensions, ()) = checked.into_parts();
        Ok(Request::from_parts(metadata, extensions, message))
    }

    /// Plants a lock on `RESOURCE` held by another client on masters
    /// `which`, for `ttl`.
    fn held_elsewhere(&self, which: &[usize], ttl: Duration) -> Token {
        let other = Token::generate().expect("OS RNG");
        for &i in which {
            self.fakes[i].hold(&self.keys, &other, ttl);
        }
        other
    }

    fn set(&self, which: &[usize], behaviour: Behaviour) {
        for &i in which {
            self.fakes[i].set(behaviour);
        }
    }

    /// Masters where `token` holds `RESOURCE` now.
    fn held_by(&self, token: &str) -> usize {
        self.fakes
            .iter()
            .filter(|f| f.holder(&self.keys).as_deref() == Some(token))
            .count()
    }

    /// Commands the masters received, all together.
    fn commands(&self) -> usize {
        self.fakes.iter().map(|f| f.calls().len()).sum()
    }
}

/// The client side of a `Hold` stream: gRPC frames pushed into the body
/// the handler reads.
struct HoldClient {
    frames: mpsc::Sender<Result<Frame<Bytes>, Infallible>>,
}

impl HoldClient {
    /// A client and the request stream the handler receives from it.
    fn new() -> (HoldClient, Request<Streaming<pb::HoldRequest>>) {
        let (frames, body) = mpsc::channel(8);
        let body = http_body_util::StreamBody::new(ReceiverStream::new(body));
        let decoder = SmallBufferCodec::<pb::HoldEvent, pb::HoldRequest>::default().decoder();
        let stream = Streaming::new_request(decoder, body, None, None);
        (HoldClient { frames }, Request::new(stream))
    }

    /// Sends one message in a gRPC frame (uncompressed).
    async fn send(&self, request: HoldRequest) {
        let payload = pb::HoldRequest {
            request: Some(request),
        }
        .encode_to_vec();
        let mut frame = vec![0];
        frame.extend_from_slice(&u32::try_from(payload.len()).expect("small").to_be_bytes());
        frame.extend_from_slice(&payload);
        self.frames
            .send(Ok(Frame::data(Bytes::from(frame))))
            .await
            .expect("the handler reads the stream");
    }

    async fn acquire(&self, ttl: Duration, wait: Duration) {
        self.send(HoldRequest::Acquire(acquire(RESOURCE, ttl, wait)))
            .await;
    }

    async fn release(&self) {
        self.send(HoldRequest::Release(pb::hold_request::Release {}))
            .await;
    }
}

/// The next event of a session, or its error.
async fn next_event(events: &mut HoldStream) -> Result<Event, Status> {
    let item = tokio::time::timeout(Duration::from_secs(60), events.next())
        .await
        .expect("an event within a minute")
        .expect("the stream is still open");
    item.map(|event| event.event.expect("an event"))
}

// --- OK -------------------------------------------------------------------

/// Acquire on five healthy masters: OK at once, a fence, and ttl less drift of validity; the lock is on every master.
#[tokio::test(start_paused = true)]
async fn acquire_ok() {
    let d = daemon();
    let start = Instant::now();
    let lock = lock_of(
        d.api
            .acquire(Request::new(acquire(RESOURCE, TTL, Duration::ZERO)))
            .await,
    );
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(lock.resource, RESOURCE);
    assert!(lock.fence > 0);
    // 10 s - (1% of 10 s + 2 ms).
    assert_eq!(lock.validity, proto(MS(9_898)));
    assert_eq!(d.held_by(&lock.token), 5);
}

/// Extend of a held lock: OK, same token and fence, a fresh validity.
#[tokio::test(start_paused = true)]
async fn extend_ok_keeps_the_fence() {
    let d = daemon();
    let lock = lock_of(
        d.api
            .acquire(Request::new(acquire(RESOURCE, TTL, Duration::ZERO)))
            .await,
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    let extended = d
        .api
        .extend(Request::new(pb::ExtendRequest {
            resource: RESOURCE.into(),
            token: lock.token.clone(),
            ttl: proto(TTL),
        }))
        .await
        .expect("still held")
        .into_inner()
        .lock
        .expect("a lock");
    assert_eq!(extended.token, lock.token);
    assert_eq!(extended.fence, lock.fence);
    assert_eq!(extended.validity, proto(MS(9_898)));
}

/// Release answers was_held true for the holder's first release, false for a second one and for a token that never held the lock.
#[tokio::test(start_paused = true)]
async fn release_reports_was_held() {
    let d = daemon();
    let lock = lock_of(
        d.api
            .acquire(Request::new(acquire(RESOURCE, TTL, Duration::ZERO)))
            .await,
    );
    let release = |token: &str| {
        Request::new(pb::ReleaseRequest {
            resource: RESOURCE.into(),
            token: token.into(),
        })
    };
    let first = d.api.release(release(&lock.token)).await.expect("OK");
    assert!(first.into_inner().was_held);
    assert_eq!(d.held_by(&lock.token), 0);
    let again = d.api.release(release(&lock.token)).await.expect("OK");
    assert!(!again.into_inner().was_held);
    let stranger = Token::generate().expect("OS RNG");
    let never = d.api.release(release(stranger.expose())).await.expect("OK");
    assert!(!never.into_inner().was_held);
}

/// Validate answers held with the remaining validity while the lock is held, and not held (no validity) after its release or expiry.
#[tokio::test(start_paused = true)]
async fn validate_reports_held() {
    let d = daemon();
    let validate = |token: &str| {
        Request::new(pb::ValidateRequest {
            resource: RESOURCE.into(),
            token: token.into(),
        })
    };
    let lock = lock_of(
        d.api
            .acquire(Request::new(acquire(RESOURCE, MS(1_000), Duration::ZERO)))
            .await,
    );
    tokio::time::sleep(MS(400)).await;
    let held = d.api.validate(validate(&lock.token)).await.expect("OK");
    let held = held.into_inner();
    assert!(held.held);
    // 600 ms left, less 1% drift and 2 ms.
    assert_eq!(held.validity, proto(MS(592)));
    tokio::time::sleep(MS(600)).await;
    let expired = d.api.validate(validate(&lock.token)).await.expect("OK");
    assert!(!expired.into_inner().held);

    let lock = lock_of(
        d.api
            .acquire(Request::new(acquire(RESOURCE, TTL, Duration::ZERO)))
            .await,
    );
    let release = pb::ReleaseRequest {
        resource: RESOURCE.into(),
        token: lock.token.clone(),
    };
    d.api.release(Request::new(release)).await.expect("OK");
    let released = d.api.validate(validate(&lock.token)).await.expect("OK");
    let released = released.into_inner();
    assert!(!released.held);
    assert_eq!(released.validity, None);
}

// --- INVALID_ARGUMENT -----------------------------------------------------

/// A bad field in any unary call is INVALID_ARGUMENT naming the field, and no master is asked.
#[tokio::test(start_paused = true)]
async fn invalid_argument_names_the_field() {
    let d = daemon();
    let no_ttl = pb::AcquireRequest {
        ttl: None,
        ..acquire(RESOURCE, TTL, Duration::ZERO)
    };
    let message = refused(
        d.api.acquire(Request::new(no_ttl)).await,
        Code::InvalidArgument,
    );
    assert_eq!(message, "ttl: is required");
    let message = refused(
        d.api
            .acquire(Request::new(acquire("", TTL, Duration::ZERO)))
            .await,
        Code::InvalidArgument,
    );
    assert!(message.starts_with("resource: "), "{message}");
    let message = refused(
        d.api
            .acquire(Request::new(acquire(
                RESOURCE,
                TTL,
                Duration::from_secs(301),
            )))
            .await,
        Code::InvalidArgument,
    );
    assert!(message.starts_with("wait: "), "{message}");
    let extend = pb::ExtendRequest {
        resource: RESOURCE.into(),
        token: "not-a-token".into(),
        ttl: proto(TTL),
    };
    let message = refused(
        d.api.extend(Request::new(extend)).await,
        Code::InvalidArgument,
    );
    assert!(message.starts_with("token: "), "{message}");
    let release = pb::ReleaseRequest {
        resource: RESOURCE.into(),
        token: String::new(),
    };
    let message = refused(
        d.api.release(Request::new(release)).await,
        Code::InvalidArgument,
    );
    assert!(message.starts_with("token: "), "{message}");
    let validate = pb::ValidateRequest {
        resource: "a\nb".into(),
        token: Token::generate().expect("OS RNG").expose().into(),
    };
    let message = refused(
        d.api.validate(Request::new(validate)).await,
        Code::InvalidArgument,
    );
    assert!(message.starts_with("resource: "), "{message}");
    assert_eq!(d.commands(), 0, "no master was asked");
}

// --- ABORTED --------------------------------------------------------------

/// A resource held elsewhere on a majority is ABORTED: at once without a wait, and after the whole wait with one.
#[tokio::test(start_paused = true)]
async fn aborted_when_held_elsewhere_for_the_whole_wait() {
    let d = daemon();
    let other = d.held_elsewhere(&[0, 1, 2], TTL);
    let start = Instant::now();
    refused(
        d.api
            .acquire(Request::new(acquire(RESOURCE, TTL, Duration::ZERO)))
            .await,
        Code::Aborted,
    );
    assert_eq!(start.elapsed(), Duration::ZERO);
    let start = Instant::now();
    refused(
        d.api
            .acquire(Request::new(acquire(RESOURCE, TTL, MS(300))))
            .await,
        Code::Aborted,
    );
    let waited = start.elapsed();
    assert!(waited >= MS(300) && waited < MS(400), "{waited:?}");
    assert_eq!(d.held_by(other.expose()), 3, "the holder is untouched");
}

/// With a caller deadline longer than the wait, the wait ends first: still ABORTED, not DEADLINE_EXCEEDED.
#[tokio::test(start_paused = true)]
async fn aborted_when_the_deadline_outlasts_the_wait() {
    let d = daemon();
    d.held_elsewhere(&[0, 1, 2], TTL);
    let mut request = Request::new(acquire(RESOURCE, TTL, MS(200)));
    request.set_timeout(Duration::from_secs(2));
    refused(d.api.acquire(request).await, Code::Aborted);
}

/// Two masters down and the resource held on the other three: ABORTED (held
/// elsewhere, wait for it), not UNAVAILABLE (retry at once), although the
/// two failures answer first.
#[tokio::test(start_paused = true)]
async fn aborted_when_held_while_two_masters_are_down() {
    let d = daemon();
    d.set(&[0, 1], Behaviour::Down);
    let other = d.held_elsewhere(&[2, 3, 4], TTL);
    let message = refused(
        d.api
            .acquire(Request::new(acquire(RESOURCE, TTL, Duration::ZERO)))
            .await,
        Code::Aborted,
    );
    assert!(message.contains("3 no, 2 failed"), "{message}");
    assert_eq!(d.held_by(other.expose()), 3, "the holder is untouched");
}

// --- FAILED_PRECONDITION --------------------------------------------------

/// Extend of a lock not held (never taken, or expired) is FAILED_PRECONDITION.
#[tokio::test(start_paused = true)]
async fn failed_precondition_when_extending_a_lock_not_held() {
    let d = daemon();
    let extend = |token: &str| {
        Request::new(pb::ExtendRequest {
            resource: RESOURCE.into(),
            token: token.into(),
            ttl: proto(TTL),
        })
    };
    let stranger = Token::generate().expect("OS RNG");
    refused(
        d.api.extend(extend(stranger.expose())).await,
        Code::FailedPrecondition,
    );
    let lock = lock_of(
        d.api
            .acquire(Request::new(acquire(RESOURCE, MS(100), Duration::ZERO)))
            .await,
    );
    tokio::time::sleep(MS(100)).await;
    refused(
        d.api.extend(extend(&lock.token)).await,
        Code::FailedPrecondition,
    );
    assert_eq!(d.held_by(&lock.token), 0, "an expired lock is not revived");
}

// --- UNAVAILABLE ----------------------------------------------------------

/// With three of five masters down, every unary call is UNAVAILABLE (no quorum answered), and the failed acquisition leaves nothing locked.
#[tokio::test(start_paused = true)]
async fn unavailable_when_masters_are_down() {
    let d = daemon();
    let lock = lock_of(
        d.api
            .acquire(Request::new(acquire(RESOURCE, TTL, Duration::ZERO)))
            .await,
    );
    d.set(&[0, 2, 4], Behaviour::Down);
    refused(
        d.api
            .acquire(Request::new(acquire("orders/7", TTL, Duration::ZERO)))
            .await,
        Code::Unavailable,
    );
    let other_keys = LockKeys::new("redlock:", "orders/7");
    assert!(d.fakes.iter().all(|f| f.holder(&other_keys).is_none()));
    let extend = pb::ExtendRequest {
        resource: RESOURCE.into(),
        token: lock.token.clone(),
        ttl: proto(TTL),
    };
    refused(d.api.extend(Request::new(extend)).await, Code::Unavailable);
    let validate = pb::ValidateRequest {
        resource: RESOURCE.into(),
        token: lock.token.clone(),
    };
    refused(
        d.api.validate(Request::new(validate)).await,
        Code::Unavailable,
    );
    let release = pb::ReleaseRequest {
        resource: RESOURCE.into(),
        token: lock.token.clone(),
    };
    refused(
        d.api.release(Request::new(release)).await,
        Code::Unavailable,
    );
}

// --- DEADLINE_EXCEEDED ----------------------------------------------------

/// A `grpc-timeout` shorter than the wait, while the resource stays held:
/// DEADLINE_EXCEEDED, answered before the caller's deadline passes (a
/// tonic client would report its own expiry as CANCELLED).
#[tokio::test(start_paused = true)]
async fn deadline_exceeded_when_grpc_timeout_is_shorter_than_the_wait() {
    let d = daemon();
    let other = d.held_elsewhere(&[0, 1, 2], TTL);
    let mut request = Request::new(acquire(RESOURCE, TTL, Duration::from_secs(5)));
    request.set_timeout(MS(100));
    let start = Instant::now();
    refused(d.api.acquire(request).await, Code::DeadlineExceeded);
    let answered = start.elapsed();
    assert!(answered < MS(100), "answered after {answered:?}");
    // The raw header, as any gRPC client sends it, works the same.
    let mut request = Request::new(acquire(RESOURCE, TTL, Duration::from_secs(5)));
    request
        .metadata_mut()
        .insert("grpc-timeout", "100m".parse().expect("ascii"));
    refused(d.api.acquire(request).await, Code::DeadlineExceeded);
    assert_eq!(d.held_by(other.expose()), 3, "the holder is untouched");
}

/// The daemon learns a caller's deadline later than the caller, by the
/// request's travel time. A grant that completes within
/// `server.deadline_reserve` of the deadline is not handed over (the caller
/// may be gone): it is released, and nothing stays locked in its name.
#[tokio::test(start_paused = true)]
async fn no_grant_inside_the_deadline_reserve() {
    let d = daemon_with(|c| c.server.deadline_reserve = MS(20));
    // The holder's keys expire 290 ms in: inside the last 20 ms of the
    // caller's 300 ms.
    d.held_elsewhere(&[0, 1, 2], MS(290));
    let mut request = Request::new(acquire(RESOURCE, TTL, Duration::from_secs(5)));
    request.set_timeout(MS(300));
    let start = Instant::now();
    refused(d.api.acquire(request).await, Code::DeadlineExceeded);
    let answered = start.elapsed();
    assert!(answered <= MS(280), "answered after {answered:?}");
    // Well after the holder's expiry, nobody holds the resource: the waiter
    // did not take it after its caller's cut-off.
    tokio::time::sleep(MS(500)).await;
    let holders: Vec<_> = d.fakes.iter().filter_map(|f| f.holder(&d.keys)).collect();
    assert!(holders.is_empty(), "left locked: {holders:?}");
}

/// A deadline shorter than `server.deadline_reserve` is still tried: it
/// keeps three quarters of itself (a fixed reserve refused every call with
/// a deadline of 20 ms or less without trying). The grant comes before the
/// deadline, and a held resource is told DEADLINE_EXCEEDED before it too.
#[tokio::test(start_paused = true)]
async fn a_deadline_shorter_than_the_reserve_is_still_tried() {
    let d = daemon_with(|c| c.server.deadline_reserve = MS(20));
    d.set(&[0, 1, 2, 3, 4], Behaviour::Slow(MS(2)));
    let mut request = Request::new(acquire(RESOURCE, TTL, Duration::ZERO));
    request.set_timeout(MS(10));
    let start = Instant::now();
    lock_of(d.api.acquire(request).await);
    assert!(
        start.elapsed() < MS(10),
        "granted after {:?}",
        start.elapsed()
    );
    let mut request = Request::new(acquire(RESOURCE, TTL, Duration::from_secs(1)));
    request.set_timeout(MS(10));
    let start = Instant::now();
    refused(d.api.acquire(request).await, Code::DeadlineExceeded);
    assert!(start.elapsed() < MS(10), "told after {:?}", start.elapsed());
}

/// The reserve: the configured one, or a quarter of a shorter budget.
#[test]
fn reserve_for_short_deadlines() {
    use super::deadline::reserve_for;
    assert_eq!(reserve_for(MS(20), Duration::from_secs(1)), MS(20));
    assert_eq!(reserve_for(MS(20), MS(80)), MS(20));
    assert_eq!(reserve_for(MS(20), MS(40)), MS(10));
    assert_eq!(reserve_for(MS(20), MS(10)), Duration::from_micros(2_500));
    assert_eq!(reserve_for(MS(20), Duration::ZERO), Duration::ZERO);
}

/// A deadline shorter than the wait does not mask what really happened:
/// masters down is UNAVAILABLE, and a waiter limit RESOURCE_EXHAUSTED, not
/// DEADLINE_EXCEEDED.
#[tokio::test(start_paused = true)]
async fn a_short_deadline_does_not_mask_the_outcome() {
    let d = Arc::new(daemon_with(|c| c.limits.max_waiters_per_resource = 1));
    d.set(&[0, 1, 2], Behaviour::Down);
    let mut request = Request::new(acquire("orders/7", TTL, Duration::from_secs(5)));
    request.set_timeout(MS(300));
    refused(d.api.acquire(request).await, Code::Unavailable);
    d.set(&[0, 1, 2], Behaviour::Up);
    d.held_elsewhere(&[0, 1, 2], MS(500));
    let first = tokio::spawn({
        let d = Arc::clone(&d);
        async move {
            d.api
                .acquire(Request::new(acquire(RESOURCE, TTL, Duration::from_secs(5))))
                .await
        }
    });
    tokio::time::sleep(MS(10)).await;
    let mut request = Request::new(acquire(RESOURCE, TTL, Duration::from_secs(5)));
    request.set_timeout(MS(300));
    let start = Instant::now();
    let message = refused(d.api.acquire(request).await, Code::ResourceExhausted);
    assert_eq!(start.elapsed(), Duration::ZERO, "refused at once");
    assert!(message.contains("max_waiters_per_resource"), "{message}");
    lock_of(first.await.expect("no panic"));
}

// --- RESOURCE_EXHAUSTED ---------------------------------------------------

/// Past `limits.max_acquisitions_in_flight`, acquisitions queue (and are
/// granted in turn, each measured from its own send); past
/// `limits.max_queued_acquisitions`, the next is RESOURCE_EXHAUSTED at once,
/// naming the daemon as the bottleneck, never UNAVAILABLE.
#[tokio::test(start_paused = true)]
async fn resource_exhausted_when_the_daemon_is_overloaded() {
    let d = Arc::new(daemon_with(|c| {
        c.limits.max_acquisitions_in_flight = 1;
        c.limits.max_queued_acquisitions = 1;
    }));
    // Each attempt takes two rounds of 40 ms: within node_timeout (50 ms)
    // each, but the second caller's would not be if it counted its wait.
    d.set(&[0, 1, 2, 3, 4], Behaviour::Slow(MS(40)));
    let call = |resource: &'static str| {
        let d = Arc::clone(&d);
        tokio::spawn(async move {
            d.api
                .acquire(Request::new(acquire(resource, TTL, Duration::ZERO)))
                .await
        })
    };
    let first = call("orders/1");
    let second = call("orders/2");
    tokio::time::sleep(MS(1)).await;
    let start = Instant::now();
    let message = refused(
        d.api
            .acquire(Request::new(acquire("orders/3", TTL, Duration::ZERO)))
            .await,
        Code::ResourceExhausted,
    );
    assert_eq!(start.elapsed(), Duration::ZERO, "refused at once");
    assert!(message.contains("overloaded"), "{message}");
    lock_of(first.await.expect("no panic"));
    lock_of(second.await.expect("no panic"));
}

/// Past `limits.max_waiters_per_resource`, another waiter is refused at once with RESOURCE_EXHAUSTED, while the first keeps waiting.
#[tokio::test(start_paused = true)]
async fn resource_exhausted_past_the_waiter_limit() {
    let d = Arc::new(daemon_with(|c| c.limits.max_waiters_per_resource = 1));
    d.held_elsewhere(&[0, 1, 2], MS(500));
    let first = tokio::spawn({
        let d = Arc::clone(&d);
        async move {
            d.api
                .acquire(Request::new(acquire(RESOURCE, TTL, Duration::from_secs(5))))
                .await
        }
    });
    tokio::time::sleep(MS(10)).await;
    let start = Instant::now();
    let message = refused(
        d.api
            .acquire(Request::new(acquire(RESOURCE, TTL, Duration::from_secs(5))))
            .await,
        Code::ResourceExhausted,
    );
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert!(message.contains("max_waiters_per_resource"), "{message}");
    let lock = lock_of(first.await.expect("no panic"));
    assert_eq!(d.held_by(&lock.token), 5, "the first waiter got it");
}

/// Past twice `limits.max_calls_per_connection` (its streams are bounded by HTTP/2; calls winding down are tolerated up to twice it), another call on the same connection is RESOURCE_EXHAUSTED; other connections are not affected.
#[tokio::test(start_paused = true)]
async fn resource_exhausted_past_the_calls_per_connection() {
    let d = Arc::new(daemon_with(|c| c.limits.max_calls_per_connection = 1));
    d.held_elsewhere(&[0, 1, 2], MS(500));
    let peer: SocketAddr = "192.0.2.1:40000".parse().expect("address");
    // Twice the limit (calls still winding down are tolerated up to it).
    let waiting: Vec<_> = (0..2)
        .map(|_| {
            let d = Arc::clone(&d);
            tokio::spawn(async move {
                let request = acquire(RESOURCE, TTL, Duration::from_secs(5));
                d.api.acquire(from_peer(request, peer)).await
            })
        })
        .collect();
    tokio::time::sleep(MS(10)).await;
    let validate = pb::ValidateRequest {
        resource: RESOURCE.into(),
        token: Token::generate().expect("OS RNG").expose().into(),
    };
    let message = refused(
        d.api.validate(from_peer(validate.clone(), peer)).await,
        Code::ResourceExhausted,
    );
    assert!(
        message.contains("max_calls_per_connection = 1"),
        "{message}"
    );
    let elsewhere: SocketAddr = "192.0.2.2:40000".parse().expect("address");
    d.api
        .validate(from_peer(validate, elsewhere))
        .await
        .expect("another connection");
    for waiter in waiting {
        let _ = waiter.await.expect("no panic");
    }
}

/// Past `limits.rate_per_second` (and its burst), the interceptor refuses the client's next call with RESOURCE_EXHAUSTED; time refills the bucket.
#[tokio::test(start_paused = true)]
async fn resource_exhausted_past_the_rate_limit() {
    let d = daemon_with(|c| {
        with_auth(c);
        c.limits.rate_per_second = 1;
        c.limits.burst = 1;
    });
    let call = || bearer(acquire(RESOURCE, TTL, Duration::ZERO), TOKEN);
    let request = d.checked(call()).expect("the first call passes");
    let lock = lock_of(d.api.acquire(request).await);
    let message = refused(d.checked(call()), Code::ResourceExhausted);
    assert!(message.contains("rate_per_second = 1"), "{message}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    let release = pb::ReleaseRequest {
        resource: RESOURCE.into(),
        token: lock.token,
    };
    let request = d.checked(bearer(release, TOKEN)).expect("refilled");
    assert!(
        d.api
            .release(request)
            .await
            .expect("OK")
            .into_inner()
            .was_held
    );
}

/// Past `limits.max_sessions`, another Hold is RESOURCE_EXHAUSTED naming the limit once its first message has come; a closed session frees its slot.
#[tokio::test(start_paused = true)]
async fn resource_exhausted_past_the_session_limit() {
    let d = daemon_with(|c| c.limits.max_sessions = 1);
    let (client, request) = HoldClient::new();
    client.acquire(TTL, Duration::ZERO).await;
    let mut events = d.api.hold(request).await.expect("a session").into_inner();
    assert!(matches!(
        next_event(&mut events).await,
        Ok(Event::Acquired(_))
    ));
    let (second, request) = HoldClient::new();
    second.acquire(TTL, Duration::ZERO).await;
    let message = refused(d.api.hold(request).await, Code::ResourceExhausted);
    assert_eq!(message, "too many open sessions (limits.max_sessions = 1)");
    client.release().await;
    assert!(matches!(
        next_event(&mut events).await,
        Ok(Event::Released(_))
    ));
    drop(client);
    let end = tokio::time::timeout(Duration::from_secs(60), events.next()).await;
    assert!(matches!(end, Ok(None)), "the session ended");
    let (third, request) = HoldClient::new();
    third.acquire(TTL, Duration::ZERO).await;
    d.api.hold(request).await.expect("the slot is free again");
}

// --- UNAUTHENTICATED / PERMISSION_DENIED ----------------------------------

/// With authentication configured, a call without a token or with a wrong one is UNAUTHENTICATED at the interceptor, and a handler reached without the interceptor's identity fails closed; no master is asked.
#[tokio::test(start_paused = true)]
async fn unauthenticated_without_a_valid_token() {
    let d = daemon_with(with_auth);
    let call = || acquire(RESOURCE, TTL, Duration::ZERO);
    let message = refused(d.checked(Request::new(call())), Code::Unauthenticated);
    assert!(message.starts_with("missing credentials"), "{message}");
    let message = refused(d.checked(bearer(call(), "wrong")), Code::Unauthenticated);
    assert_eq!(message, "invalid credentials");
    assert!(!message.contains("wrong"), "the token is never echoed");
    refused(
        d.api.acquire(Request::new(call())).await,
        Code::Unauthenticated,
    );
    assert_eq!(d.commands(), 0, "no master was asked");
}

/// An authenticated client is served inside its namespaces and gets PERMISSION_DENIED, naming it, outside them; no master is asked then.
#[tokio::test(start_paused = true)]
async fn permission_denied_outside_the_namespaces() {
    let d = daemon_with(with_auth);
    let inside = d
        .checked(bearer(acquire(RESOURCE, TTL, Duration::ZERO), TOKEN))
        .expect("authenticated");
    lock_of(d.api.acquire(inside).await);
    let before = d.commands();
    let outside = d
        .checked(bearer(acquire("jobs/1", TTL, Duration::ZERO), TOKEN))
        .expect("authenticated");
    let message = refused(d.api.acquire(outside).await, Code::PermissionDenied);
    assert!(message.contains("\"orders\""), "{message}");
    let validate = pb::ValidateRequest {
        resource: "jobs/1".into(),
        token: Token::generate().expect("OS RNG").expose().into(),
    };
    let outside = d.checked(bearer(validate, TOKEN)).expect("authenticated");
    refused(d.api.validate(outside).await, Code::PermissionDenied);
    assert_eq!(d.commands(), before, "no master was asked");
}

// --- Hold -----------------------------------------------------------------

/// A Hold session acquires, keeps extending the lock past its ttl while the stream lives, and on `release` releases it and reports was_held.
#[tokio::test(start_paused = true)]
async fn hold_acquires_extends_and_releases() {
    let d = daemon();
    let (client, request) = HoldClient::new();
    client.acquire(MS(300), Duration::ZERO).await;
    let mut events = d.api.hold(request).await.expect("a session").into_inner();
    let Ok(Event::Acquired(lock)) = next_event(&mut events).await else {
        panic!("the first event is `acquired`");
    };
    let extended = next_event(&mut events).await;
    assert!(matches!(extended, Ok(Event::Extended(_))), "{extended:?}");
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(d.held_by(&lock.token), 5, "held past its 300 ms ttl");
    client.release().await;
    let released = loop {
        match next_event(&mut events).await {
            Ok(Event::Extended(_)) => continue,
            other => break other,
        }
    };
    assert!(
        matches!(
            released,
            Ok(Event::Released(pb::hold_event::Released { was_held: true }))
        ),
        "{released:?}"
    );
    assert_eq!(d.held_by(&lock.token), 0);
}

/// A Hold whose first message is not `acquire`, or that half-closes before sending one, is INVALID_ARGUMENT naming `request`; no master is asked.
#[tokio::test(start_paused = true)]
async fn hold_first_message_must_be_acquire() {
    let d = daemon();
    let (client, request) = HoldClient::new();
    client.release().await;
    let message = refused(d.api.hold(request).await, Code::InvalidArgument);
    assert_eq!(
        message,
        "request: the first message of a Hold must be `acquire`"
    );
    let (client, request) = HoldClient::new();
    drop(client);
    refused(d.api.hold(request).await, Code::InvalidArgument);
    let (client, request) = HoldClient::new();
    client
        .send(HoldRequest::Acquire(pb::AcquireRequest {
            ttl: None,
            ..acquire(RESOURCE, TTL, Duration::ZERO)
        }))
        .await;
    let message = refused(d.api.hold(request).await, Code::InvalidArgument);
    assert_eq!(message, "ttl: is required");
    assert_eq!(d.commands(), 0, "no master was asked");
}

/// Anything but `release` after `acquire` ends the session with INVALID_ARGUMENT naming `request`, and the lock is released.
#[tokio::test(start_paused = true)]
async fn hold_only_release_may_follow_acquire() {
    let d = daemon();
    let (client, request) = HoldClient::new();
    client.acquire(TTL, Duration::ZERO).await;
    let mut events = d.api.hold(request).await.expect("a session").into_inner();
    let Ok(Event::Acquired(lock)) = next_event(&mut events).await else {
        panic!("the first event is `acquired`");
    };
    client.acquire(TTL, Duration::ZERO).await;
    let message = refused(next_event(&mut events).await, Code::InvalidArgument);
    assert_eq!(
        message,
        "request: only `release` may follow `acquire` in a Hold"
    );
    assert_eq!(d.held_by(&lock.token), 0, "released");
}

/// A Hold still waiting for a held resource when the daemon starts draining ends with UNAVAILABLE "draining: ...", leaving nothing locked.
#[tokio::test(start_paused = true)]
async fn hold_unavailable_when_the_daemon_stops_while_waiting() {
    let d = daemon();
    let other = d.held_elsewhere(&[0, 1, 2], TTL);
    let (client, request) = HoldClient::new();
    client.acquire(TTL, Duration::from_secs(30)).await;
    let mut events = d.api.hold(request).await.expect("a session").into_inner();
    tokio::time::sleep(MS(100)).await;
    d.control.start(Duration::from_secs(20));
    let message = refused(next_event(&mut events).await, Code::Unavailable);
    assert_eq!(
        message,
        "draining: the daemon is stopping; call another replica"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(d.held_by(other.expose()), 3, "the holder is untouched");
    let acquires = d
        .fakes
        .iter()
        .flat_map(|f| f.calls())
        .filter(|call| call.op == Op::Acquire && call.hit)
        .count();
    let releases = d
        .fakes
        .iter()
        .flat_map(|f| f.calls())
        .filter(|call| call.op == Op::Release && call.hit)
        .count();
    assert_eq!(acquires, releases, "every key the session set was deleted");
}

/// A Hold session's acquisition fails as Acquire does: ABORTED while held elsewhere, UNAVAILABLE without a quorum, sent as the stream's error.
#[tokio::test(start_paused = true)]
async fn hold_acquisition_errors_are_the_stream_error() {
    let d = daemon();
    d.held_elsewhere(&[0, 1, 2], TTL);
    let (client, request) = HoldClient::new();
    client.acquire(TTL, Duration::ZERO).await;
    let mut events = d.api.hold(request).await.expect("a session").into_inner();
    refused(next_event(&mut events).await, Code::Aborted);
    drop(client);

    let d = daemon();
    d.set(&[0, 1, 2], Behaviour::Down);
    let (client, request) = HoldClient::new();
    client.acquire(TTL, Duration::ZERO).await;
    let mut events = d.api.hold(request).await.expect("a session").into_inner();
    refused(next_event(&mut events).await, Code::Unavailable);
    drop(client);
}
