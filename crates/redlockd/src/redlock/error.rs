//! The engine's errors: what went wrong with a lock call, and with one master.

use super::quorum::Tally;
use super::token::TokenError;
use super::waiters::WaitLimit;

/// Why a lock operation did not succeed. The gRPC layer maps each variant to
/// one status code in one place.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// The resource stayed held by someone else for the whole wait (or
    /// was kept by the lock-delay of a holder that did not release it).
    #[error("{}", contended(.0))]
    Contended(Tally),
    /// The wait ended while other waiters were ahead in the queue.
    #[error("resource stayed held for the whole wait")]
    StillHeld,
    /// Too many acquisitions are queued for admission already (see
    /// `admission`): the daemon, not the masters, is the bottleneck.
    #[error("the daemon is overloaded: limits.max_queued_acquisitions = {max_queued} acquisitions wait already")]
    Overloaded {
        /// The configured bound.
        max_queued: usize,
    },
    /// A limit on waiters was hit.
    #[error(transparent)]
    Limit(#[from] WaitLimit),
    /// The token does not hold the lock on a majority of masters.
    #[error("the token does not hold the lock on a majority ({0})")]
    NotHeld(Tally),
    /// The token still holds the lock, but another acquisition with its
    /// request id took the lock over (a `Hold` retried on a new connection
    /// or through another replica, see `super::claim`): this one no longer
    /// holds it.
    #[error("another acquisition with this request_id took the lock over ({0})")]
    Superseded(Tally),
    /// Too few masters answered in time to decide; nothing is left locked.
    #[error("no quorum of masters answered in time ({0})")]
    NoQuorum(Tally),
    /// Too few masters answered in time because the daemon's own backlog
    /// held the commands or their answers past the round's deadline
    /// ([`Tally::backlogged`]): the daemon is overloaded, the masters are
    /// not at fault. Nothing is left locked.
    #[error(
        "the daemon is overloaded: its own queue held the commands past the round's deadline \
         ({0})"
    )]
    Backlogged(Tally),
    /// A quorum agreed, but the round took so long that no validity was left.
    #[error("a quorum agreed but the lease was used up by the round itself ({0})")]
    Expired(Tally),
    /// Extended, but no master that extended the lock still keeps its
    /// fence record (lost with a restart): its fence cannot be vouched for.
    #[error(
        "the lock was extended, but no master that extended it still keeps its fence (masters \
         restarted without their data): release it and acquire anew for a fence"
    )]
    FenceUnknown,
    /// A majority of masters hold the resource under another limit (a
    /// plain lock, or a semaphore of another size): the limit is part of
    /// the resource's identity (see `super::kinds::semaphore`).
    #[error(
        "the resource is held under another limit (a plain lock, or a semaphore of another limit)"
    )]
    LimitConflict,
    /// The caller's deadline passed before the operation completed.
    #[error("the caller's deadline passed")]
    DeadlineExceeded,
    /// The caller went away while waiting; nothing was left locked.
    #[error("the caller cancelled")]
    Cancelled,
    /// A bug or a broken runtime (a task that died); never an expected outcome.
    #[error("internal error: {0}")]
    Internal(&'static str),
    /// A token could not be generated.
    #[error("token: {0}")]
    Token(#[from] TokenError),
}

impl LockError {
    /// The error of a round that reached no decision: [`LockError::Backlogged`]
    /// when the daemon's own backlog decided it, else
    /// [`LockError::NoQuorum`].
    pub(crate) fn no_quorum(tally: Tally) -> LockError {
        if tally.backlogged() {
            LockError::Backlogged(tally)
        } else {
            LockError::NoQuorum(tally)
        }
    }
}

/// Why one master did not give an answer to one command.
#[derive(Debug, Clone, thiserror::Error)]
pub enum NodeError {
    /// No answer within `node_timeout`.
    #[error("timed out")]
    Timeout,
    /// Not connected (fail-fast while disconnected or reconnecting).
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The master answered with an error.
    #[error("server error: {0}")]
    Server(String),
    /// The master answered something the scripts never return.
    #[error("unexpected reply: {0}")]
    Protocol(String),
}

impl NodeError {
    /// A short fixed name of the kind of failure, for metrics.
    pub fn kind(&self) -> &'static str {
        match self {
            NodeError::Timeout => "timeout",
            NodeError::Unavailable(_) => "unavailable",
            NodeError::Server(_) => "server",
            NodeError::Protocol(_) => "protocol",
        }
    }
}

/// [`LockError::Contended`]'s message: "held" is not said of a resource
/// that only a lock-delay keeps (its holder vanished; nobody holds it now).
fn contended(votes: &Tally) -> String {
    if votes.delayed() > 0 && votes.delayed() == votes.no() {
        format!(
            "resource is free but kept by the lock_delay of a holder that did not release it \
             ({votes})"
        )
    } else if votes.delayed() > 0 {
        format!("resource is held by another owner, or kept by a lock_delay ({votes})")
    } else {
        format!("resource is held by another owner ({votes})")
    }
}
