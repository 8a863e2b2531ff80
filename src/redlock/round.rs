//! One command of a round, as sent to one master on a task of its own.
//!
//! Each master's command runs on its own task so that a round can stop
//! *listening* once it is decided without *cancelling* the commands still in
//! flight: a straggler's SET or PEXPIRE still lands (and a lock held on more
//! masters than the quorum survives more master losses), and its reply is
//! simply ignored.

use super::node::{AcquireVote, ExtendVote, Node};
use super::{Decision, LockKeys, NodeError, Redlock, Tally, Token};
use crate::metrics;
use futures::future::join_all;
use futures::stream::{FuturesUnordered, Stream, StreamExt};
use std::sync::Arc;
use std::time::Duration;

/// One master's reply in a round, tagged with the master's index.
pub type Answer = (usize, Result<Reply, NodeError>);

/// What a round is about: the resource's keys and the token, shared by the
/// per-master tasks.
#[derive(Debug)]
pub struct Subject {
    /// The resource's keys.
    pub keys: LockKeys,
    /// The resource itself (for release notices).
    pub resource: String,
    /// The token the round acts for.
    pub token: Token,
}

/// The command a round sends to each master.
#[derive(Debug, Clone)]
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
    /// See [`Node::release`]; the encoded release notice to publish.
    Release(std::sync::Arc<str>),
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
    /// A short fixed name for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            Command::Acquire { .. } => "acquire",
            Command::CommitFence { .. } => "commit_fence",
            Command::Extend { .. } => "extend",
            Command::Release(_) => "release",
            Command::Check => "check",
        }
    }

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
            Command::Release(notice) => Reply::Released(node.release(keys, token, &notice).await?),
            Command::Check => Reply::Held(node.check(keys, token).await?),
        })
    }
}

impl Redlock {
    /// Sends `command` to the masters `targets` at once, feeding each reply to
    /// `on_answer` until the round is decided. Stragglers are not waited for,
    /// but not cancelled either (see the module doc). Failures are counted here.
    ///
    /// Every command is handed to its master's connection before the replies
    /// are looked at, so any later command for the same key (the release
    /// after a failed attempt, a client's Release) reaches each master after
    /// this round's, never before: a straggling SET cannot land after its
    /// own cleanup.
    pub(super) async fn round(
        &self,
        subject: &Arc<Subject>,
        targets: impl Iterator<Item = usize>,
        command: Command,
        on_answer: impl FnMut(usize, Reply, &mut Tally),
    ) -> Tally {
        self.round_with_stragglers(subject, targets, command, on_answer)
            .await
            .0
    }

    /// [`Redlock::round`], also handing back the replies still to come, for
    /// a caller that wants to act on them later (Extend re-creates lost keys).
    pub(super) async fn round_with_stragglers(
        &self,
        subject: &Arc<Subject>,
        targets: impl Iterator<Item = usize>,
        command: Command,
        mut on_answer: impl FnMut(usize, Reply, &mut Tally),
    ) -> (Tally, impl Stream<Item = Answer> + Send + 'static) {
        let (mut pending, submitted): (FuturesUnordered<_>, Vec<_>) = targets
            .map(|index| self.dispatch(index, subject, command.clone()))
            .unzip();
        join_all(submitted).await;
        let mut tally = Tally::new(self.quorum);
        while let Some((index, reply)) = pending.next().await {
            match reply {
                // An untrusted master's answer is no answer (see `Node::trusted`).
                Ok(_) if !self.nodes[index].trusted() => tally.failed += 1,
                Ok(reply) => on_answer(index, reply, &mut tally),
                Err(error) => self.count_failure(index, &error, &mut tally),
            }
            if tally.decision() != Decision::Pending {
                break;
            }
        }
        (tally, pending)
    }

    /// Runs one command against one master on its own task, bounded by
    /// `node_timeout`. Returns the reply, and a signal that completes once the
    /// command has been handed to the master's connection (or failed).
    /// Dropping the reply future detaches the task.
    pub(super) fn dispatch(
        &self,
        index: usize,
        subject: &Arc<Subject>,
        command: Command,
    ) -> (
        impl std::future::Future<Output = Answer> + Send + 'static,
        impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let node = Arc::clone(&self.nodes[index]);
        let subject = Arc::clone(subject);
        let timeout = self.settings.node_timeout;
        let (submitted, on_submitted) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let started = tokio::time::Instant::now();
            let label = command.label();
            let is_acquire = matches!(command, Command::Acquire { .. });
            let mut call = std::pin::pin!(tokio::time::timeout(
                timeout,
                command.send(node.as_ref(), &subject)
            ));
            // A node hands its command over within the first poll (see
            // [`Node`]); say so before waiting for the reply.
            let first = futures::poll!(call.as_mut());
            drop(submitted);
            let reply = match first {
                std::task::Poll::Ready(reply) => reply,
                std::task::Poll::Pending => call.await,
            }
            .unwrap_or(Err(NodeError::Timeout));
            metrics::node_command(node.name(), label, started.elapsed());
            if let Err(error) = &reply {
                metrics::node_error(node.name(), error.kind());
            }
            if is_acquire {
                metrics::acquire_vote(match &reply {
                    Ok(Reply::Acquire(AcquireVote::Granted(_))) => "granted",
                    Ok(_) => "refused",
                    Err(NodeError::Timeout) => "timeout",
                    Err(_) => "error",
                });
            }
            reply
        });
        let reply = async move {
            let reply = task
                .await
                .unwrap_or_else(|e| Err(NodeError::Protocol(format!("command task failed: {e}"))));
            (index, reply)
        };
        (reply, async move {
            let _ = on_submitted.await;
        })
    }

    pub(super) fn count_failure(&self, index: usize, error: &NodeError, tally: &mut Tally) {
        tally.failed += 1;
        tracing::debug!(node = self.nodes[index].name(), %error, "master did not answer");
    }
}
