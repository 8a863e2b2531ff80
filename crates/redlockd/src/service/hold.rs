//! `Hold`: a lock session over a bidirectional stream. The daemon acquires
//! the lock, keeps extending it while the stream lives, and releases it the
//! moment the client says so, half-closes, cancels or disappears, or the
//! daemon's shutdown grace runs out. If the lock cannot be kept, the client
//! is told `lost`. When the daemon starts draining (`super::drain`), each
//! session is told `draining` and kept until it ends or the grace is over.
//!
//! The first message must arrive within `session.first_message_timeout`,
//! and the session's slot (`limits.max_sessions`) is taken only once it
//! has: a stream that never speaks cannot hold a slot.

use super::auth::{Gatekeeper, Identity};
use super::denied::Denied;
use super::drain::{Drain, Phase};
use super::quota::{Quota, QuotaSlot};
use super::rate::CallSlot;
use super::request::AcquireArgs;
use super::{HoldStream, LockApi};
use crate::config::Config;
use crate::metrics;
use crate::pb;
use crate::pb::hold_event::{Draining, Event, Lost, Released};
use crate::pb::hold_request::Request as HoldRequest;
use crate::redlock::{validity, HoldEnd, Holder, Lock, Redlock, Token};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::StreamExt;
use tonic::{Request, Response, Status, Streaming};

/// The `lost` reason of a session whose lock an operator force-released.
pub(crate) const RELEASED_BY_OPERATOR: &str = "released by an operator";

/// Events buffered per session when the client reads slowly.
const EVENT_BUFFER: usize = 8;

/// What a session sends its client, boxed: a channel allocates room for 32
/// items when it is created, and unboxed (a `Status` is large) that was
/// kilobytes per session, for a stream that carries one event a second.
type Outgoing = Box<Result<pb::HoldEvent, Status>>;

/// What every session shares: its settings, the cap on open sessions, the
/// count of open ones, and the daemon's phase.
pub struct Sessions {
    extend_at: f64,
    first_message: Duration,
    /// `session.min_ttl`.
    min_ttl: Duration,
    slots: Arc<Semaphore>,
    max: usize,
    open: Arc<watch::Sender<usize>>,
    drain: Drain,
    registry: SessionRegistry,
    /// `limits.max_sessions_per_identity`.
    per_identity: Quota,
    /// `limits.max_waiters_per_identity`, for Acquire and Hold alike.
    waiters: Quota,
}

/// The clients of `[auth]` that set their own quota (`pick`), by name: the
/// quota key of an authenticated caller (`auth::QuotaKey`).
fn own_quotas(
    config: &Config,
    pick: impl Fn(&crate::config::ClientConfig) -> Option<usize>,
) -> std::collections::HashMap<Arc<str>, usize> {
    config
        .auth
        .clients
        .iter()
        .filter_map(|c| Some((Arc::from(c.name.as_str()), pick(c)?)))
        .collect()
}

/// This replica's Hold sessions by their lock's token, so that
/// `LockAdmin.ForceRelease` can end the ones holding a lock at once.
///
/// Several sessions can hold one token: a `Hold` retried with its
/// request id on a new connection resumes the lock while the first
/// session's stream lingers (`crate::redlock::claim`). Each entry is
/// therefore the session's own, and a session that ends removes only its
/// own entry, never its successor's.
#[derive(Clone, Default)]
pub struct SessionRegistry {
    inner: Arc<Mutex<Entries>>,
}

/// The registry's entries, and the next session's id.
#[derive(Default)]
struct Entries {
    by_token: HashMap<String, Vec<(u64, Arc<Notify>)>>,
    next: u64,
}

impl SessionRegistry {
    /// Ends every session holding `token` here: each tells its client
    /// `lost` ("released by an operator"). Returns whether one did.
    pub(crate) fn end(&self, token: &Token) -> bool {
        let entries = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match entries.by_token.get(token.expose()) {
            Some(sessions) if !sessions.is_empty() => {
                for (_, ending) in sessions {
                    ending.notify_one();
                }
                true
            }
            _ => false,
        }
    }

    fn register(&self, token: &Token) -> Registered {
        let ending = Arc::new(Notify::new());
        let mut entries = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let id = entries.next;
        entries.next += 1;
        entries
            .by_token
            .entry(token.expose().to_owned())
            .or_default()
            .push((id, Arc::clone(&ending)));
        Registered {
            registry: self.clone(),
            token: token.expose().to_owned(),
            id,
            ending,
        }
    }

    /// Sessions registered for `token` now.
    #[cfg(test)]
    fn count(&self, token: &Token) -> usize {
        let entries = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        entries.by_token.get(token.expose()).map_or(0, Vec::len)
    }
}

/// A session's entry in the [`SessionRegistry`], removed when dropped.
struct Registered {
    registry: SessionRegistry,
    token: String,
    id: u64,
    ending: Arc<Notify>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut entries = self
            .registry
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(sessions) = entries.by_token.get_mut(&self.token) {
            sessions.retain(|(id, _)| *id != self.id);
            if sessions.is_empty() {
                entries.by_token.remove(&self.token);
            }
        }
    }
}

impl Sessions {
    /// Sessions as configured; `drain` tells them when the daemon drains
    /// and stops.
    pub fn new(config: &Config, drain: Drain) -> Sessions {
        Sessions {
            extend_at: config.session.extend_at,
            first_message: config.session.first_message_timeout,
            min_ttl: config.session.min_ttl,
            slots: Arc::new(Semaphore::new(config.limits.max_sessions)),
            max: config.limits.max_sessions,
            open: Arc::new(watch::channel(0).0),
            drain,
            per_identity: Quota::with_own(
                config.limits.max_sessions_per_identity,
                own_quotas(config, |c| c.max_sessions),
            ),
            waiters: Quota::with_own(
                config.limits.max_waiters_per_identity,
                own_quotas(config, |c| c.max_waiters),
            ),
            registry: SessionRegistry::default(),
        }
    }

    /// The sessions of this replica, for `LockAdmin.ForceRelease`.
    pub fn registry(&self) -> SessionRegistry {
        self.registry.clone()
    }

    /// A place among `key`'s waiters when the acquisition may wait
    /// (`wait` > 0); none is needed otherwise.
    pub(super) fn waiter_slot(
        &self,
        key: &Arc<str>,
        identity: &Identity,
        wait: Duration,
    ) -> Result<Option<QuotaSlot>, Denied> {
        if wait.is_zero() {
            return Ok(None);
        }
        self.waiters.take(key).map(Some).map_err(|max| {
            Denied::IdentityQuota {
                client: identity.name.to_string(),
                what: "waiters",
                max,
            }
            .counted()
        })
    }

    /// The daemon's phase, for the handlers.
    pub(super) fn drain(&self) -> &Drain {
        &self.drain
    }

    /// A handle that completes [`OpenSessions::all_ended`] once no session
    /// is open.
    pub(crate) fn open(&self) -> OpenSessions {
        OpenSessions {
            open: self.open.subscribe(),
        }
    }
}

/// The number of open sessions, watched by the draining stop.
#[derive(Debug)]
pub(crate) struct OpenSessions {
    open: watch::Receiver<usize>,
}

impl OpenSessions {
    /// Completes once no session is open (new ones are refused by then).
    pub(crate) async fn all_ended(&mut self) {
        let _ = self.open.wait_for(|open| *open == 0).await;
    }
}

/// A session's place: its slot under `limits.max_sessions`, and its count
/// among the open sessions, both given back when the session ends.
struct Slot {
    _permit: OwnedSemaphorePermit,
    open: Arc<watch::Sender<usize>>,
}

impl Slot {
    fn take(sessions: &Sessions) -> Result<Slot, SessionError> {
        let permit = Arc::clone(&sessions.slots)
            .try_acquire_owned()
            .map_err(|_| SessionError::TooMany { max: sessions.max })?;
        sessions.open.send_modify(|open| *open += 1);
        Ok(Slot {
            _permit: permit,
            open: Arc::clone(&sessions.open),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open.send_modify(|open| *open = open.saturating_sub(1));
    }
}

/// Why a `Hold` session is refused, or ends with an error instead of an
/// event (the status code of each: `status.rs`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SessionError {
    /// `limits.max_sessions` sessions are open already.
    #[error("too many open sessions (limits.max_sessions = {max})")]
    TooMany {
        /// The configured cap.
        max: usize,
    },
    /// The stream's first message is not `acquire`, or there is none.
    #[error("request: the first message of a Hold must be `acquire`")]
    FirstNotAcquire,
    /// The session's ttl is below `session.min_ttl`.
    #[error(
        "ttl: {} is below session.min_ttl = {} for a Hold session",
        humantime::format_duration(*.ttl),
        humantime::format_duration(*.min)
    )]
    TtlTooShort {
        /// The requested ttl.
        ttl: Duration,
        /// The configured floor.
        min: Duration,
    },
    /// A message other than `release` after `acquire`.
    #[error("request: only `release` may follow `acquire` in a Hold")]
    OnlyRelease,
    /// No first message within `session.first_message_timeout`.
    #[error(
        "request: no `acquire` within session.first_message_timeout = {}",
        humantime::format_duration(*.after)
    )]
    NoFirstMessage {
        /// The configured bound.
        after: Duration,
    },
}

/// Why a held session ends on the client's side.
enum ClientEnd {
    /// A `release` message or a half-close: the orderly end, release.
    Done,
    /// The stream broke (connection lost, cancelled): the client vanished.
    /// Released as at an orderly end, unless the lock has a lock-delay:
    /// then it is left to expire, so that the delay applies.
    Gone,
    /// A message that makes no sense mid-session.
    Invalid(SessionError),
}

impl LockApi {
    /// Opens a session: checks the first message, then runs the session on
    /// a task of its own that feeds the returned stream.
    pub(super) async fn open_session(
        &self,
        request: Request<Streaming<pb::HoldRequest>>,
    ) -> Result<Response<HoldStream>, Status> {
        let (identity, call_slot) = self.admit(&request)?;
        let key = Gatekeeper::quota_key_of(&request, &identity);
        let drain = &self.sessions.drain;
        drain.refuse_new()?;
        let mut incoming = request.into_inner();
        let bound = self.sessions.first_message;
        // Bounded, and given up when the daemon drains: until it speaks, a
        // stream holds only its call slot, and not for long.
        let first = tokio::time::timeout(bound, incoming.message());
        let first = match drain.unless_draining(first).await? {
            Ok(first) => first?,
            Err(_elapsed) => return Err(SessionError::NoFirstMessage { after: bound }.into()),
        };
        let args = match first {
            Some(pb::HoldRequest {
                request: Some(HoldRequest::Acquire(acquire)),
            }) => self.limits.acquire(acquire)?,
            _ => return Err(SessionError::FirstNotAcquire.into()),
        };
        identity
            .permit(&args.resource)
            .map_err(Denied::into_status)?;
        for resource in &args.resources {
            identity.permit(resource).map_err(Denied::into_status)?;
        }
        if args.ttl < self.sessions.min_ttl {
            return Err(SessionError::TtlTooShort {
                ttl: args.ttl,
                min: self.sessions.min_ttl,
            }
            .into());
        }
        // The identity's quota first: an identity at its quota is refused
        // without touching the global slots others need.
        let quota = self.sessions.per_identity.take(&key).map_err(|max| {
            Denied::IdentityQuota {
                client: identity.name.to_string(),
                what: "sessions",
                max,
            }
            .counted()
            .into_status()
        })?;
        let waiting = self
            .sessions
            .waiter_slot(&key, &identity, args.wait)
            .map_err(Denied::into_status)?;
        let slot = Slot::take(&self.sessions)?;
        let (events, stream) = mpsc::channel(EVENT_BUFFER);
        let session = Session {
            engine: Arc::clone(&self.engine),
            registry: self.sessions.registry(),
            args,
            incoming,
            events,
            drain: drain.clone(),
            extend_at: self.sessions.extend_at,
            _slot: slot,
            _quota: quota,
            waiting,
            _call: call_slot,
        };
        // Boxed: the session's task then holds a pointer to it, not the
        // session twice (an `async fn` keeps its `self` argument beside the
        // local it moves into), for as long as the session lives.
        tokio::spawn(Box::new(session).run());
        Ok(Response::new(Box::pin(
            ReceiverStream::new(stream).map(|event| *event),
        )))
    }
}

struct Session {
    engine: Arc<Redlock>,
    registry: SessionRegistry,
    args: AcquireArgs,
    incoming: Streaming<pb::HoldRequest>,
    events: mpsc::Sender<Outgoing>,
    drain: Drain,
    extend_at: f64,
    _slot: Slot,
    /// The session's place under its identity's quota.
    _quota: QuotaSlot,
    /// Its place among its identity's waiters until it has its lock.
    waiting: Option<QuotaSlot>,
    /// The session counts as a call on its connection while it lives.
    _call: CallSlot,
}

/// Counts a session in `redlock_sessions_active` while it lives.
struct ActiveSession;

impl ActiveSession {
    fn start() -> ActiveSession {
        metrics::session_delta(1.0);
        ActiveSession
    }
}

impl Drop for ActiveSession {
    fn drop(&mut self) {
        metrics::session_delta(-1.0);
    }
}

impl Session {
    async fn run(mut self: Box<Self>) {
        let _active = ActiveSession::start();
        // Boxed, as are the engine calls and sends below: a session's task
        // is as large as its largest state for as long as it lives, and the
        // acquisition (rounds, retries) is far larger than holding.
        let Some(mut lock) = Box::pin(self.acquire()).await else {
            return;
        };
        // No longer waiting.
        self.waiting = None;
        tracing::debug!(rpc = "Hold", resource = %lock.resource, "session acquired");
        if Box::pin(self.send(Event::Acquired(lock.clone().into())))
            .await
            .is_err()
        {
            let _ = Box::pin(self.engine.release_held_now(&lock)).await;
            return;
        }
        let mut client_end = None;
        let mut forced = false;
        let registered = self.registry.register(&lock.token);
        let events = self.events.clone();
        let until = {
            let incoming = &mut self.incoming;
            let drain = &self.drain;
            let client_end = &mut client_end;
            let forced = &mut forced;
            let ending = &registered.ending;
            let events = &events;
            async move {
                let mut told = false;
                loop {
                    tokio::select! {
                        () = ending.notified() => {
                            *forced = true;
                            return;
                        }
                        end = next_end(incoming) => {
                            *client_end = Some(end);
                            return;
                        }
                        () = events.closed() => return,
                        () = drain.stopping() => return,
                        () = drain.started(), if !told => {
                            told = true;
                            if let Phase::Draining { until } = drain.phase() {
                                let _ = events.try_send(draining(until));
                            }
                        }
                    }
                }
            }
        };
        // Boxed with `until` inside it: passed by value, an inline `until`
        // would be laid out twice in this task (the compiler does not
        // overlap a moved-from local with the future it moved into), and
        // the task lives as long as the session (10,000 sessions
        // opened at once under 100 MB).
        let end = Box::pin(self.engine.hold(
            &mut lock,
            self.args.ttl,
            self.extend_at,
            Box::pin(until),
            |lock| {
                let _ = events.try_send(Box::new(Ok(event(Event::Extended(lock.clone().into())))));
            },
        ))
        .await;
        drop(registered);
        match end {
            HoldEnd::Stopped if forced => {
                // Released already, by the operator's ForceRelease.
                metrics::lock_lost();
                tracing::warn!(rpc = "Hold", resource = %lock.resource, "session ended: released by an operator");
                let _ = Box::pin(self.send(Event::Lost(Lost {
                    reason: RELEASED_BY_OPERATOR.into(),
                })))
                .await;
            }
            HoldEnd::Stopped
                if matches!(client_end, Some(ClientEnd::Gone))
                    && !self.args.lock_delay.is_zero() =>
            {
                tracing::debug!(rpc = "Hold", resource = %lock.resource, "client vanished; lock left to expire (lock_delay)");
            }
            HoldEnd::Stopped => Box::pin(self.release(&lock, client_end)).await,
            HoldEnd::Lost(reason) => {
                metrics::lock_lost();
                tracing::warn!(rpc = "Hold", resource = %lock.resource, %reason, "session lost its lock");
                let _ = Box::pin(self.send(Event::Lost(Lost { reason }))).await;
                // Whatever is left of it on the masters goes too, but not
                // before the keys of the last grant or extension expire on
                // their own (its deadline plus the drift allowance): `lost`
                // may reach the client late, and until then the last
                // validity it was given stands (an extension that failed
                // with a little validity left is declared lost early, to
                // warn in time). What goes then is any later extension's
                // key on a minority.
                let drift = validity::drift(self.args.ttl, self.engine.settings().drift_factor);
                Box::pin(tokio::time::sleep_until(lock.deadline.mono + drift)).await;
                let _ = Box::pin(self.engine.release_held_now(&lock)).await;
            }
        }
    }

    /// Acquires, giving up if the client goes away or the daemon stops
    /// first (the detached acquisition then releases whatever it gets).
    async fn acquire(&mut self) -> Option<Lock> {
        let args = &self.args;
        let holder = Holder::session(&args.owner, self.engine.replica())
            .with_terms(args.lock_delay, args.hold_at_least)
            .with_limit(args.limit)
            .with_shared(args.shared);
        let acquisition = match args.resources.is_empty() {
            true => self.engine.acquire_detached_as(
                args.resource.clone(),
                args.request_id.as_ref(),
                args.ttl,
                args.wait,
                holder,
            ),
            false => self.engine.acquire_detached_multi(
                args.resources.clone(),
                args.ttl,
                args.wait,
                holder,
            ),
        };
        let outcome = tokio::select! {
            result = acquisition => result.map_err(Status::from),
            () = self.events.closed() => return None,
            _ = next_end(&mut self.incoming) => return None,
            () = self.drain.started() => Err(Status::from(super::drain::Draining)),
        };
        match outcome {
            Ok(lock) => Some(lock),
            Err(status) => {
                let _ = self.events.send(Box::new(Err(status))).await;
                None
            }
        }
    }

    /// Releases at once, then tells the client if its stream still exists.
    async fn release(&self, lock: &Lock, client_end: Option<ClientEnd>) {
        let was_held = self.engine.release_held(lock).await;
        tracing::debug!(rpc = "Hold", resource = %lock.resource, ?was_held, "session released");
        match client_end {
            Some(ClientEnd::Invalid(why)) => {
                let _ = self.events.send(Box::new(Err(Status::from(why)))).await;
            }
            // Too few masters answered to tell: say so (UNAVAILABLE, as a
            // unary Release would), never a `was_held = false` that claims
            // the lock had been lost.
            _ => match was_held {
                Ok(was_held) => {
                    let _ = self.send(Event::Released(Released { was_held })).await;
                }
                Err(error) => {
                    let _ = self.events.send(Box::new(Err(Status::from(error)))).await;
                }
            },
        }
    }

    async fn send(&self, e: Event) -> Result<(), ()> {
        self.events
            .send(Box::new(Ok(event(e))))
            .await
            .map_err(|_| ())
    }
}

fn event(event: Event) -> pb::HoldEvent {
    pb::HoldEvent { event: Some(event) }
}

/// The `draining` event: the lock is kept until `until` at the latest.
fn draining(until: Instant) -> Outgoing {
    let left = until.saturating_duration_since(Instant::now());
    Box::new(Ok(event(Event::Draining(Draining {
        release_in: Some(super::proto_duration(left)),
    }))))
}

/// Waits for the client to end the session: `release`, half-close, an error
/// (cancelled, connection lost), or a message that is not allowed now.
async fn next_end(incoming: &mut Streaming<pb::HoldRequest>) -> ClientEnd {
    match incoming.message().await {
        Ok(Some(pb::HoldRequest {
            request: Some(HoldRequest::Release(_)),
        })) => ClientEnd::Done,
        Ok(Some(_)) => ClientEnd::Invalid(SessionError::OnlyRelease),
        Ok(None) => ClientEnd::Done,
        Err(_) => ClientEnd::Gone,
    }
}

#[cfg(test)]
mod tests {
    use super::{Session, SessionRegistry};
    use crate::redlock::Token;
    use std::future::Future;

    /// Two sessions of one token (a Hold retried with its request id while
    /// the first stream lingers): the first one's end removes only its own
    /// entry, so ForceRelease still reaches the second.
    #[test]
    fn a_sessions_end_keeps_its_successors_entry() {
        let registry = SessionRegistry::default();
        let token = Token::generate().expect("OS RNG");
        let first = registry.register(&token);
        let second = registry.register(&token);
        assert_eq!(registry.count(&token), 2);
        drop(first);
        assert_eq!(registry.count(&token), 1);
        assert!(registry.end(&token), "the successor is still reachable");
        drop(second);
        assert_eq!(registry.count(&token), 0);
        assert!(!registry.end(&token));
    }

    /// The size of the future `call` returns, without calling it.
    fn future_size<A, F: Future>(_call: impl FnOnce(A) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// A session's task lives as long as its lock, so 10,000 sessions are
    /// 10,000 of these (opened at once, under 100 MB). It was
    /// 1,816 bytes when `run` took the session by value: an `async fn`
    /// keeps its argument beside the local it moves into, and `Session`
    /// alone is over 500 bytes.
    #[test]
    fn a_sessions_task_stays_small() {
        let size = future_size(Session::run);
        println!("a session's task future: {size} bytes");
        assert!(size <= 512, "a session's task future is {size} bytes");
    }
}
