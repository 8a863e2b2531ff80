//! One command of a round, as sent to one master on a task of its own.
//!
//! Each master's command runs on its own task so that a round can stop
//! *listening* once it is decided without *cancelling* the commands still in
//! flight: a straggler's SET or PEXPIRE still lands (and a lock held on more
//! masters than the quorum survives more master losses), and its reply is
//! simply ignored.

use super::node::{AcquireVote, ExtendVote, Node};
use super::{LockKeys, NodeError, Token};
use std::time::Duration;

/// What a round is about: the resource's keys and the token, shared by the
/// per-master tasks.
#[derive(Debug)]
pub struct Subject {
    /// The resource's keys.
    pub keys: LockKeys,
    /// The token the round acts for.
    pub token: Token,
}

/// The command a round sends to each master.
#[derive(Debug, Clone, Copy)]
pub enum Command {
    /// See [`Node::acquire`].
    Acquire {
        /// Lease length.
        ttl: Duration,
    },
    /// See [`Node::commit_fence`].
    CommitFence {
        /// The grant's fence.
        fence: u64,
        /// Fence hash expiry.
        fence_ttl: Duration,
    },
    /// See [`Node::extend`].
    Extend {
        /// New lease length.
        ttl: Duration,
        /// Fence hash expiry.
        fence_ttl: Duration,
    },
    /// See [`Node::release`].
    Release,
    /// See [`Node::check`].
    Check,
}

/// A master's reply, one variant per [`Command`].
#[derive(Debug, Clone, Copy)]
pub enum Reply {
    /// To [`Command::Acquire`].
    Acquire(AcquireVote),
    /// To [`Command::CommitFence`].
    Committed(bool),
    /// To [`Command::Extend`].
    Extend(ExtendVote),
    /// To [`Command::Release`].
    Released(bool),
    /// To [`Command::Check`]: remaining PTTL if held.
    Held(Option<Duration>),
}

impl Command {
    /// Sends the command to `node` and waits for its reply.
    pub async fn send(self, node: &dyn Node, subject: &Subject) -> Result<Reply, NodeError> {
        let (keys, token) = (&subject.keys, &subject.token);
        Ok(match self {
            Command::Acquire { ttl } => Reply::Acquire(node.acquire(keys, token, ttl).await?),
            Command::CommitFence { fence, fence_ttl } => {
                Reply::Committed(node.commit_fence(keys, token, fence, fence_ttl).await?)
            }
            Command::Extend { ttl, fence_ttl } => {
                Reply::Extend(node.extend(keys, token, ttl, fence_ttl).await?)
            }
            Command::Release => Reply::Released(node.release(keys, token).await?),
            Command::Check => Reply::Held(node.check(keys, token).await?),
        })
    }
}
