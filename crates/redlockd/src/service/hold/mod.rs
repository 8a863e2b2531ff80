//! `Hold`: a lock session over a bidirectional stream. The daemon acquires
//! the lock, keeps extending it while the stream lives, and releases it the
//! moment the client says so (`release`, a half-close) or closes its
//! connection. A client that goes silent (frozen, cut off: the daemon
//! closes its connection for an unanswered keepalive), a session whose
//! client vanished with a lock_delay, and one still open when the daemon's
//! shutdown grace runs out are no longer extended: their lock expires with
//! the validity the client was last told, which it may still act on (and
//! are not deleted then: a client library may keep the lock with Extend
//! calls of its own). If the lock cannot be kept, the client is told
//! `lost`. When the daemon starts draining (`super::drain`), each
//! session is told `draining` and kept until it ends or the grace is over.
//!
//! The first message must arrive within `session.first_message_timeout`,
//! and the session's slot (`limits.max_sessions`) is taken only once it
//! has: a stream that never speaks cannot hold a slot.

//!
//! Here the stream glue: opening a session ([`LockApi::open_session`]),
//! reading the client's end, the events sent back, and [`SessionError`].
//! The session's task is `session.rs`; what sessions share, and the
//! registry `LockAdmin.ForceRelease` uses, `registry.rs`.

mod registry;
mod session;
mod wire;

pub(crate) use registry::SessionRegistry;
pub(crate) use registry::{OpenSessions, Sessions};
pub(crate) use wire::{Campaign, Hold, Wire};

use super::auth::Gatekeeper;
use super::denied::Denied;
use super::LockApi;
use crate::conn::gate::ClientSocket;
use registry::Slot;
use session::Session;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

/// How long a session whose client's stream ended waits to learn whether
/// the client is still there (a half-close: it still reads its events) or
/// went away (a reset stream or a lost connection: hyper drops the events
/// stream at once). Only a lock with a lock_delay waits: for one without,
/// when the client was last heard from decides (`heard_lately`).
pub(crate) const SETTLE: std::time::Duration = std::time::Duration::from_secs(1);

/// The `lost` reason of a session whose lock an operator force-released.
pub(crate) const RELEASED_BY_OPERATOR: &str = "released by an operator";

/// The `lost` reason of a session still open when the daemon's drain ended:
/// its lock is left to expire with its ttl.
pub(crate) const DRAIN_OVER: &str =
    "the daemon stopped (its shutdown grace ran out): the lock is no longer extended and expires with its ttl";

/// Events buffered per session when the client reads slowly.
const EVENT_BUFFER: usize = 8;

/// What a session sends its client, boxed: a channel allocates room for 32
/// items when it is created, and unboxed (a `Status` is large) that was
/// kilobytes per session, for a stream that carries one event a second.
type Outgoing<W> = Box<Result<<W as Wire>::Event, Status>>;

/// The stream of events of one session of kind `W`.
pub(crate) type SessionStream<W> =
    std::pin::Pin<Box<dyn Stream<Item = Result<<W as Wire>::Event, Status>> + Send>>;

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
    /// A Campaign's first message is not `campaign`, or there is none.
    #[error("request: the first message of a Campaign must be `campaign`")]
    FirstNotCampaign,
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
    /// A message other than `resign` after `campaign`.
    #[error("request: only `resign` may follow `campaign` in a Campaign")]
    OnlyResign,
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
    /// The client's stream ended: a half-close (orderly), or a reset or a
    /// lost connection, which tonic and hyper report the same way (a
    /// stream reset with CANCEL or NO_ERROR reads as a clean end). Told
    /// apart by the session ([`SETTLE`]).
    Ended,
    /// The stream broke (connection lost, cancelled): the client vanished.
    /// Released as at an orderly end if the client was heard from a moment
    /// before (it ended the stream itself) and the lock has no lock-delay;
    /// otherwise left to expire with the validity last told (a frozen
    /// client may resume and act on it; a lock-delay applies after it).
    Gone,
    /// A message that makes no sense mid-session.
    Invalid(SessionError),
}

impl LockApi {
    /// Opens a session of kind `W` (a Hold, a Campaign): checks the first
    /// message, then runs the session on a task of its own that feeds the
    /// returned stream.
    pub(crate) async fn open_session<W: Wire>(
        &self,
        request: Request<Streaming<W::Request>>,
    ) -> Result<Response<SessionStream<W>>, Status> {
        let (identity, call_slot) = self.admit(&request)?;
        let key = Gatekeeper::quota_key_of(&request, &identity);
        let drain = &self.sessions.drain;
        drain.refuse_new()?;
        let socket = request.extensions().get::<ClientSocket>().cloned();
        let mut incoming = request.into_inner();
        let bound = self.sessions.first_message;
        // Bounded, and given up when the daemon drains: until it speaks, a
        // stream holds only its call slot, and not for long.
        let first = tokio::time::timeout(bound, incoming.message());
        let first = match drain.unless_draining(first).await? {
            Ok(first) => first?,
            Err(_elapsed) => return Err(SessionError::NoFirstMessage { after: bound }.into()),
        };
        let args = W::opening(&self.limits, first.unwrap_or_default())?;
        // An election is permitted by its name: the resource it is the
        // lock of is the daemon's own (`super::election`).
        let named = super::election::messages::name_of(&args.resource).unwrap_or(&args.resource);
        identity.permit(named).map_err(Denied::into_status)?;
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
        let session = Session::<W> {
            engine: Arc::clone(&self.engine),
            registry: self.sessions.registry(),
            args,
            incoming,
            socket,
            silent_at_most: self.sessions.silent_at_most,
            heard_within: self.sessions.heard_within,
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

/// The `draining` event: the lock is kept until `until` at the latest.
fn draining<W: Wire>(until: Instant) -> Outgoing<W> {
    let left = until.saturating_duration_since(Instant::now());
    Box::new(Ok(W::draining(left)))
}

/// Waits for the client to end the session: `release` (`resign`),
/// half-close, an error (cancelled, connection lost), or a message that is
/// not allowed now.
async fn next_end<W: Wire>(incoming: &mut Streaming<W::Request>) -> ClientEnd {
    match incoming.message().await {
        Ok(Some(request)) => match W::ending(request) {
            Ok(()) => ClientEnd::Done,
            Err(invalid) => ClientEnd::Invalid(invalid),
        },
        Ok(None) => ClientEnd::Ended,
        Err(_) => ClientEnd::Gone,
    }
}

/// What a session whose lock is left to expire does once its last
/// validity is over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Leftovers {
    /// Delete what is left of the lock: keys of an extension that landed on
    /// a minority only (the masters could not keep it: `lost`).
    Delete,
    /// Leave it: the client went silent, and a client library may keep
    /// the lock alive with Extend calls of its own while its session is
    /// cut off (the Rust client's and redlockctl's re-attachment); what
    /// is left expires by itself.
    Keep,
}

/// Whether the connection heard from the client within `within`: what
/// ended its stream then was the client's own act (it cancelled the stream
/// or half-closed it, or closed its socket: it exited, was killed, dropped
/// its channel), where a frozen or cut-off client's connection is closed by
/// the daemon after a keepalive timeout of silence (`crate::conn::heard`).
/// Without the connection's word (a server that does not give it, as
/// in-process tests), it counts as heard.
pub(super) fn heard_lately(socket: Option<&ClientSocket>, within: std::time::Duration) -> bool {
    socket.is_none_or(|socket| socket.silent_for() < within)
}
