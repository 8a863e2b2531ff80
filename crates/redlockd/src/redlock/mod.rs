//! The Redlock algorithm over N independent masters, with no gRPC and no
//! Valkey client in it: masters are reached through the [`Master`] trait.
//!
//! Every operation sends one round of commands to all masters at once, each
//! bounded by `node_timeout`, and stops listening as soon as the round is
//! decided ([`quorum`]). Time is measured on tokio's monotonic clock from
//! before the first send, and the answer's validity is
//! `ttl - elapsed - drift` ([`validity`]). An acquisition that does not end in
//! a grant is released on every master, including those that refused or timed
//! out (a timed-out SET may still have landed).
//!
//! Files: [`acquire`] (the entry points of an acquisition), [`attempt`] (one
//! acquisition attempt), [`wait`] (waiting for a held resource, first come
//! first served, woken by releases), [`lease`] (Extend, Release, Validate of a
//! held lock), [`kinds`] (the extensions: semaphores, read-write locks,
//! several resources at once), [`session`] (keeping a lock alive), [`round`] (sending a command to the
//! masters), [`held`] (counting the locks handed out, for the dashboard).

pub(crate) mod acquire;
pub(crate) mod admin;
pub(crate) mod admission;
pub(crate) mod attempt;
pub(crate) mod boottime;
pub(crate) mod changes;
pub(crate) mod claim;
pub(crate) mod error;
#[cfg(test)]
pub(crate) mod fake;
pub(crate) mod fence;
pub(crate) mod held;
pub(crate) mod keys;
pub(crate) mod kinds;
pub(crate) mod lease;
pub(crate) mod master;
pub(crate) mod notices;
pub(crate) mod proclaim;
pub(crate) mod quorum;
pub(crate) mod recreate;
pub(crate) mod retry;
pub(crate) mod round;
pub(crate) mod session;
#[cfg(test)]
mod tests;
pub(crate) mod token;
pub(crate) mod turns;
pub(crate) mod validity;
pub(crate) mod wait;
pub(crate) mod waiters;

pub use acquire::DetachedAcquire;
pub use admin::SessionKind;
pub(crate) use admin::{HeldLock, ListCursor};
pub(crate) use admission::AdmissionLimits;
pub use claim::{Claim, Epoch};
pub use error::{LockError, NodeError};
pub use fence::{clock_allowance, FenceRead, Proposal};
pub(crate) use fence::{proposal_window, refresh_period};
pub use keys::LockKeys;
pub(crate) use kinds::multi::Member;
pub use master::{AcquireAllVote, AcquireVote, Ending, ExtendVote, Master};
pub(crate) use quorum::Decision;
pub(crate) use quorum::Vote;
pub use quorum::{Quorum, Tally};
pub(crate) use retry::RetryPolicy;
pub(crate) use round::QUEUE_ALLOWANCE;
pub use session::HoldEnd;
pub(crate) use session::UNHEARD;
pub(crate) use token::TokenKind;
pub use token::{RequestId, RequestIdError, Token, TokenError};
pub(crate) use validity::Deadline;

use notices::SeenNotices;
use round::Subject;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use waiters::Waiters;

/// The engine's tunables, taken from the configuration.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    /// Prefix of every key the engine writes (see [`keys`]).
    pub key_prefix: String,
    /// The longest one master may take to answer one command.
    pub node_timeout: Duration,
    /// Clock-rate allowance, part of every validity.
    pub drift_factor: f64,
    /// Pause between acquisition attempts when masters fail, and between
    /// all attempts when `wake_on_release` is off.
    pub retry: RetryPolicy,
    /// Expiry of the fence hashes (see [`fence`]).
    pub fence_ttl: Duration,
    /// Queue waiters and wake them on releases and expiries (see [`wait`]).
    pub wake_on_release: bool,
    /// Longest a front waiter sleeps without a wake-up.
    pub wait_fallback: Duration,
    /// Cap on waiters for one resource.
    pub max_waiters_per_resource: usize,
    /// Cap on waiters, all resources together.
    pub max_waiters: usize,
    /// How much work is out at the masters at once (see [`admission`]).
    pub admission: AdmissionLimits,
}

/// A granted or extended lock, as the engine reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lock {
    /// The resource the lock is on.
    pub resource: String,
    /// The secret proving ownership.
    pub token: Token,
    /// The grant's fencing token (see [`fence`]).
    pub fence: u64,
    /// How long the lock was guaranteed to stay held when the engine
    /// computed it (at `deadline`'s reading of the clocks).
    pub validity: Duration,
    /// When it stops being guaranteed: start + ttl - drift of the operation
    /// that granted or extended it. What is reported later is counted down
    /// from this ([`Deadline::left`]), never re-anchored.
    pub(crate) deadline: Deadline,
    /// A lock on several resources at once: each with its fence, in the
    /// order asked (the first is `resource`, `fence`). Empty for a lock on
    /// one resource. See [`multi`](kinds::multi).
    pub(crate) members: Vec<Member>,
    /// The epoch of the acquisition that holds it, when it had a request
    /// id ([`claim`]): the lock's own extensions and releases carry it.
    pub(crate) epoch: Option<Epoch>,
}

/// Who a grant is for: written beside its token by the fence commit
/// ([`Master::commit_fence`]), or, for a one-round grant, by the acquire that
/// took the proposed fence ([`Master::acquire`], see [`fence`]); shown by
/// `Inspect` and `List`. Never a metric label, never logged with the token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The caller's `owner` label (validated at the door: bounded, no
    /// control characters; may be empty).
    pub owner: Arc<str>,
    /// `unary`, or `hold:<replica>` for a `Hold` session on that replica.
    pub kind: Arc<str>,
    /// `AcquireRequest.lock_delay`: after an expiry, nobody acquires the
    /// resource for this long (zero: none). The commit (or the one-round
    /// acquire) records it on the masters (`crate::valkey::scripts`).
    pub lock_delay: Duration,
    /// `AcquireRequest.hold_at_least`: a holder's release before the grant's
    /// commit (or one-round acquire) + this shortens the lock instead of
    /// deleting it (zero: none).
    pub hold_at_least: Duration,
    /// `AcquireRequest.mode` is `SHARED`: a read lock ([`rw`](kinds::rw)),
    /// whose token carries the mode.
    pub shared: bool,
    /// `AcquireRequest.limit`: above 1, the acquisition takes one of this many
    /// permits of a semaphore ([`semaphore`](kinds::semaphore)); 0 or 1, a
    /// plain lock.
    pub limit: u32,
    /// The acquisition's epoch, when it has a request id ([`claim`]):
    /// recorded with the grant, so that another acquisition of the same
    /// request id can take the lock over.
    pub(crate) epoch: Option<Epoch>,
}

impl Holder {
    /// A unary Acquire's holder.
    pub fn unary(owner: &str) -> Holder {
        Holder {
            owner: owner.into(),
            kind: "unary".into(),
            lock_delay: Duration::ZERO,
            hold_at_least: Duration::ZERO,
            shared: false,
            limit: 0,
            epoch: None,
        }
    }

    /// A `Hold` session's holder on replica `replica`.
    pub fn session(owner: &str, replica: &str) -> Holder {
        Holder {
            owner: owner.into(),
            kind: format!("hold:{replica}").into(),
            lock_delay: Duration::ZERO,
            hold_at_least: Duration::ZERO,
            shared: false,
            limit: 0,
            epoch: None,
        }
    }

    /// This holder, taking a permit of a semaphore of `limit`.
    pub fn with_limit(self, limit: u32) -> Holder {
        Holder { limit, ..self }
    }

    /// This holder, with the lock's terms.
    pub(crate) fn with_terms(self, lock_delay: Duration, hold_at_least: Duration) -> Holder {
        Holder {
            lock_delay,
            hold_at_least,
            ..self
        }
    }

    /// This holder, shared (a read lock, [`rw`](kinds::rw)) or not.
    pub(crate) fn with_shared(self, shared: bool) -> Holder {
        Holder { shared, ..self }
    }
}

impl Default for Holder {
    fn default() -> Holder {
        Holder::unary("")
    }
}

/// This replica's name in session records: the host's name and the
/// process id, enough for an operator to find the daemon that holds a
/// session (the issue leaves the naming open).
fn replica_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    format!("{host}/{}", std::process::id())
}

/// When a release wakes this replica's waiters of the resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WakeWaiters {
    /// A holder's release: as soon as the deletes are on their way.
    AtOnce,
    /// The cleanup of a failed attempt: only if it deleted anything, with
    /// the tie-breaking jitter (another replica may be competing).
    IfDeleted,
    /// The cleanup of the front waiter's own failed attempt: the only
    /// local waiter it could wake is the attempter itself, which chooses
    /// its own pause (see [`wait`]). Waking it made a waiter whose attempt
    /// won a master or two retry every round, for the whole wait. The
    /// notice is marked seen, so its echo from the masters' channel does
    /// not wake it either; other replicas still hear it.
    NotSelf,
}

/// The engine refuses to exist without masters.
#[derive(Debug, thiserror::Error)]
#[error("at least one master is required")]
pub(crate) struct NoMasters;

/// The Redlock engine: cheap to share behind an `Arc`, safe to call
/// concurrently.
pub struct Redlock {
    nodes: Vec<Arc<dyn Master>>,
    quorum: Quorum,
    settings: Settings,
    waiters: Arc<Waiters>,
    admission: admission::Admission,
    seen_notices: Mutex<SeenNotices>,
    /// Counts the host's suspends (see [`Redlock::watch_for_suspend`]).
    suspends: tokio::sync::watch::Sender<u32>,
    /// Re-creations of lost keys in progress, which a release cancels.
    recreations: Arc<recreate::Recreations>,
    /// One acquisition at a time per request id (see [`turns`]).
    turns: turns::Turns,
    /// This replica's name in session records ([`Holder::session`]).
    replica: String,
    /// The locks handed out and not yet ended, for the held-locks gauge.
    held: held::HeldLocks,
    /// The fences this engine proposes (see [`fence`]).
    proposer: fence::Proposer,
    /// Grants that needed the fence commit round (see [`fence`]).
    commit_rounds: std::sync::atomic::AtomicU64,
    /// Holder changes heard of, for observers (see [`changes`]).
    changes: changes::Changes,
}

impl Redlock {
    /// An engine over `nodes`; the quorum is a majority of them.
    pub(crate) fn new(
        nodes: Vec<Arc<dyn Master>>,
        settings: Settings,
    ) -> Result<Redlock, NoMasters> {
        let quorum = Quorum::majority(nodes.len()).ok_or(NoMasters)?;
        let waiters = Arc::new(Waiters::new(
            settings.max_waiters_per_resource,
            settings.max_waiters,
        ));
        let admission = admission::Admission::new(settings.admission, settings.node_timeout);
        let proposer = fence::Proposer::new(settings.node_timeout, settings.fence_ttl);
        Ok(Redlock {
            nodes,
            quorum,
            settings,
            waiters,
            admission,
            seen_notices: Mutex::new(SeenNotices::default()),
            suspends: tokio::sync::watch::channel(0).0,
            recreations: Arc::default(),
            turns: turns::Turns::default(),
            replica: replica_name(),
            held: held::HeldLocks::default(),
            proposer,
            commit_rounds: std::sync::atomic::AtomicU64::new(0),
            changes: changes::Changes::default(),
        })
    }

    /// Grants so far that took the fence commit round, the fallback of the
    /// one-round fenced grant ([`fence`]): for tests and the metric
    /// `redlock_fence_grants_total{path="commit"}`.
    pub fn fence_commit_rounds(&self) -> u64 {
        self.commit_rounds
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The quorum this engine needs.
    pub fn quorum(&self) -> Quorum {
        self.quorum
    }

    /// This replica's name, as session records carry it.
    pub(crate) fn replica(&self) -> &str {
        &self.replica
    }

    /// Holder changes this replica hears of (see [`changes`]).
    pub(crate) fn changes(&self) -> &changes::Changes {
        &self.changes
    }

    /// The engine's tunables.
    pub(crate) fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Callers currently waiting for a resource on this engine.
    pub fn waiting(&self) -> usize {
        self.waiters.len()
    }

    /// Acquisitions currently queued for admission (see [`admission`]).
    pub fn queued(&self) -> usize {
        self.admission.queued()
    }

    /// Locks handed out through this replica that are still within their
    /// validity and not released through it (see [`held`]).
    pub(crate) fn held_locks(&self) -> usize {
        self.held.count()
    }

    /// The adaptive bound on acquisitions in flight now (see [`admission`]).
    pub(crate) fn admission_limit(&self) -> usize {
        self.admission.limit()
    }

    /// The keys `token` acts on: a permit's own (its index is in the
    /// token, see [`semaphore`](kinds::semaphore)) or the resource's lock.
    fn subject(&self, resource: &str, token: Token) -> Arc<Subject> {
        self.subject_of(resource, token, None)
    }

    /// [`Redlock::subject`] for the acquisition of `epoch` ([`claim`]).
    fn subject_of(&self, resource: &str, token: Token, epoch: Option<Epoch>) -> Arc<Subject> {
        self.subject_marking(resource, token, false, epoch)
    }

    /// [`Redlock::subject`] for an attempt: a waiting exclusive one sets the
    /// writer-waiting marker where shared holders refuse it
    /// ([`rw`](kinds::rw)); a try-lock (no wait) does not hold readers back.
    fn subject_marking(
        &self,
        resource: &str,
        token: Token,
        waits: bool,
        epoch: Option<Epoch>,
    ) -> Arc<Subject> {
        let prefix = &self.settings.key_prefix;
        let mark = match waits {
            true => kinds::rw::writer_mark(self.settings.wait_fallback),
            false => Duration::ZERO,
        };
        Arc::new(Subject {
            keys: match token.kind() {
                TokenKind::Permit { index, .. } => {
                    LockKeys::permit(prefix, resource, index, (0, Duration::ZERO))
                }
                _ => LockKeys::for_token(prefix, resource, &token, mark),
            },
            resource: resource.to_owned(),
            token,
            epoch,
        })
    }

    fn all(&self) -> std::ops::Range<usize> {
        0..self.nodes.len()
    }
}
