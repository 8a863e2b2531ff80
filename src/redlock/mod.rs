//! The Redlock algorithm over N independent masters, with no gRPC and no
//! Valkey client in it: masters are reached through the [`Node`] trait.
//!
//! Every operation sends one round of commands to all masters at once, each
//! bounded by `node_timeout`, and stops listening as soon as the round is
//! decided ([`quorum`]). Time is measured on tokio's monotonic clock from
//! before the first send, and the answer's validity is
//! `ttl - elapsed - drift` ([`validity`]). An acquisition that does not end in
//! a grant is released on every master, including those that refused or timed
//! out (a timed-out SET may still have landed).

pub mod error;
pub mod fence;
pub mod keys;
pub mod node;
pub mod quorum;
pub mod retry;
pub mod round;
#[cfg(test)]
mod tests;
pub mod token;
pub mod validity;

pub use error::{LockError, NodeError};
pub use keys::LockKeys;
pub use node::{AcquireVote, ExtendVote, Node};
pub use quorum::{Decision, Quorum, Tally};
pub use retry::RetryPolicy;
pub use token::{Token, TokenError};

use fence::FenceRead;
use futures::future::join_all;
use futures::stream::{FuturesUnordered, StreamExt};
use round::{Command, Reply, Subject};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// The engine's tunables, taken from the `redlock` section of the configuration.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Prefix of every key the engine writes (see [`keys`]).
    pub key_prefix: String,
    /// The longest one master may take to answer one command.
    pub node_timeout: Duration,
    /// Clock-rate allowance, part of every validity.
    pub drift_factor: f64,
    /// Pause between acquisition attempts while waiting.
    pub retry: RetryPolicy,
    /// Expiry of the fence hashes (see [`fence`]).
    pub fence_ttl: Duration,
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
    /// How long the lock is guaranteed to stay held, from now.
    pub validity: Duration,
}

/// The engine refuses to exist without masters.
#[derive(Debug, thiserror::Error)]
#[error("at least one master is required")]
pub struct NoMasters;

/// The Redlock engine: cheap to share behind an `Arc`, safe to call
/// concurrently.
pub struct Redlock {
    nodes: Vec<Arc<dyn Node>>,
    quorum: Quorum,
    settings: Settings,
}

impl Redlock {
    /// An engine over `nodes`; the quorum is a majority of them.
    pub fn new(nodes: Vec<Arc<dyn Node>>, settings: Settings) -> Result<Redlock, NoMasters> {
        let quorum = Quorum::majority(nodes.len()).ok_or(NoMasters)?;
        Ok(Redlock {
            nodes,
            quorum,
            settings,
        })
    }

    /// The quorum this engine needs.
    pub fn quorum(&self) -> Quorum {
        self.quorum
    }

    /// The engine's tunables.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Takes the lock on `resource` for `ttl`, trying again after a jittered
    /// pause while it is held elsewhere or masters are unreachable, until
    /// `wait` has elapsed (zero: one attempt).
    pub async fn acquire(
        &self,
        resource: &str,
        ttl: Duration,
        wait: Duration,
    ) -> Result<Lock, LockError> {
        self.acquire_until_stopped(resource, ttl, wait, std::future::pending())
            .await
    }

    /// [`Redlock::acquire`] on a task of its own, so that dropping the returned
    /// future (the caller cancelled, or its deadline passed) never leaves a
    /// lock behind: the task stops retrying, and a grant that completes after
    /// the caller has gone is released at once.
    pub fn acquire_detached(
        self: &Arc<Self>,
        resource: String,
        ttl: Duration,
        wait: Duration,
    ) -> DetachedAcquire {
        let engine = Arc::clone(self);
        let (mut answer, answered) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let result = engine
                .acquire_until_stopped(&resource, ttl, wait, answer.closed())
                .await;
            if let Err(Ok(orphan)) = answer.send(result) {
                engine.release_orphan(orphan);
            }
        });
        DetachedAcquire {
            answered,
            engine: Arc::clone(self),
        }
    }

    /// Releases a grant nobody will receive, in the background. Best effort:
    /// if this fails too, the lock expires with its ttl.
    fn release_orphan(self: &Arc<Self>, orphan: Lock) {
        tracing::debug!(resource = %orphan.resource, "caller left during acquire; releasing");
        let engine = Arc::clone(self);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = engine.release(&orphan.resource, &orphan.token).await;
            });
        }
    }

    /// The wait loop: attempts until a grant, until `wait` elapses, or until
    /// `stop` completes. `stop` is only heeded between attempts: an attempt
    /// always runs to its end, which cleans up after itself.
    async fn acquire_until_stopped(
        &self,
        resource: &str,
        ttl: Duration,
        wait: Duration,
        stop: impl std::future::Future<Output = ()>,
    ) -> Result<Lock, LockError> {
        let subject = self.subject(resource, Token::generate()?);
        let give_up_at = Instant::now() + wait;
        tokio::pin!(stop);
        loop {
            let error = match self.attempt(&subject, ttl).await {
                Ok((fence, validity)) => {
                    return Ok(Lock {
                        resource: resource.to_owned(),
                        token: subject.token.clone(),
                        fence,
                        validity,
                    })
                }
                Err(error) => error,
            };
            let remaining = give_up_at.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                return Err(error);
            }
            let pause = self.settings.retry.delay(&mut rand::rng(), remaining);
            tokio::select! {
                () = tokio::time::sleep(pause) => {}
                () = &mut stop => return Err(LockError::Cancelled),
            }
        }
    }

    /// One acquisition attempt: the acquire round, then the fence commit
    /// round. On any failure the token is released everywhere before
    /// returning.
    async fn attempt(
        &self,
        subject: &Arc<Subject>,
        ttl: Duration,
    ) -> Result<(u64, Duration), LockError> {
        let start = Instant::now();
        let mut granted: Vec<(usize, FenceRead)> = Vec::with_capacity(self.nodes.len());
        let votes = self
            .round(
                subject,
                self.all(),
                Command::Acquire { ttl },
                |index, reply, tally| match reply {
                    Reply::Acquire(AcquireVote::Granted(read)) => {
                        tally.yes += 1;
                        granted.push((index, read));
                    }
                    _ => tally.no += 1,
                },
            )
            .await;
        if votes.decision() != Decision::Reached {
            self.release_everywhere(subject).await;
            return Err(if votes.refused_by_majority() {
                LockError::Contended(votes)
            } else {
                LockError::NoQuorum(votes)
            });
        }

        let fence = fence::next_fence(granted.iter().map(|&(_, read)| read));
        let commit = Command::CommitFence {
            fence,
            fence_ttl: self.settings.fence_ttl,
        };
        let granting = granted.iter().map(|&(index, _)| index);
        let commits = self
            .round(subject, granting, commit, |_, reply, tally| match reply {
                Reply::Committed(true) => tally.yes += 1,
                _ => tally.no += 1,
            })
            .await;
        let validity = validity::validity(ttl, start.elapsed(), self.settings.drift_factor);
        match (commits.decision(), validity) {
            (Decision::Reached, Some(validity)) => Ok((fence, validity)),
            (decision, _) => {
                self.release_everywhere(subject).await;
                Err(match decision {
                    Decision::Reached => LockError::Expired(commits),
                    _ => LockError::NoQuorum(commits),
                })
            }
        }
    }

    /// Resets the lock's time to live to `ttl` if `token` still holds it on a
    /// majority; the new validity counts from before the round.
    pub async fn extend(
        &self,
        resource: &str,
        token: &Token,
        ttl: Duration,
    ) -> Result<Lock, LockError> {
        let subject = self.subject(resource, token.clone());
        let start = Instant::now();
        let command = Command::Extend {
            ttl,
            fence_ttl: self.settings.fence_ttl,
        };
        let mut fence = None;
        let votes = self
            .round(
                &subject,
                self.all(),
                command,
                |_, reply, tally| match reply {
                    Reply::Extend(ExtendVote::Extended { fence: seen }) => {
                        tally.yes += 1;
                        fence = fence.max(seen);
                    }
                    _ => tally.no += 1,
                },
            )
            .await;
        match votes.decision() {
            Decision::Reached => {
                let validity = validity::validity(ttl, start.elapsed(), self.settings.drift_factor)
                    .ok_or(LockError::Expired(votes))?;
                Ok(Lock {
                    resource: resource.to_owned(),
                    token: token.clone(),
                    // Any two majorities intersect, so a master of this round
                    // took part in the grant's commit and reported its fence.
                    fence: fence.unwrap_or_default(),
                    validity,
                })
            }
            _ if votes.refused_by_majority() => Err(LockError::NotHeld(votes)),
            _ => Err(LockError::NoQuorum(votes)),
        }
    }

    /// Deletes the lock on every master where `token` holds it. Returns
    /// whether it was still held on a majority; an error when too few masters
    /// answered to tell (the release was still sent to all of them).
    pub async fn release(&self, resource: &str, token: &Token) -> Result<bool, LockError> {
        let tally = self
            .release_everywhere(&self.subject(resource, token.clone()))
            .await;
        match tally.decision() {
            Decision::Reached => Ok(true),
            _ if tally.refused_by_majority() => Ok(false),
            _ => Err(LockError::NoQuorum(tally)),
        }
    }

    /// Whether `token` holds the lock on a majority, and for how much longer
    /// at least (the quorum-th largest remaining PTTL, less the time the round
    /// took and drift).
    pub async fn validate(
        &self,
        resource: &str,
        token: &Token,
    ) -> Result<Option<Duration>, LockError> {
        let subject = self.subject(resource, token.clone());
        let start = Instant::now();
        let mut remaining: Vec<Duration> = Vec::with_capacity(self.nodes.len());
        let votes = self
            .round(
                &subject,
                self.all(),
                Command::Check,
                |_, reply, tally| match reply {
                    Reply::Held(Some(pttl)) => {
                        tally.yes += 1;
                        remaining.push(pttl);
                    }
                    _ => tally.no += 1,
                },
            )
            .await;
        match votes.decision() {
            Decision::Reached => {
                remaining.sort_unstable_by(|a, b| b.cmp(a));
                let quorum_th = remaining
                    .get(self.quorum.needed() - 1)
                    .copied()
                    .unwrap_or_default();
                Ok(validity::validity(
                    quorum_th,
                    start.elapsed(),
                    self.settings.drift_factor,
                ))
            }
            _ if votes.refused_by_majority() => Ok(None),
            _ => Err(LockError::NoQuorum(votes)),
        }
    }

    /// Sends a compare-and-delete to every master and waits for all of them
    /// (each bounded by `node_timeout`), so that when it returns nothing of
    /// this token is left on a master that answered.
    async fn release_everywhere(&self, subject: &Arc<Subject>) -> Tally {
        let replies = join_all(
            self.all()
                .map(|index| self.dispatch(index, subject, Command::Release).0),
        )
        .await;
        let mut tally = Tally::new(self.quorum);
        for (index, reply) in replies {
            match reply {
                Ok(Reply::Released(true)) => tally.yes += 1,
                Ok(_) => tally.no += 1,
                Err(error) => self.count_failure(index, &error, &mut tally),
            }
        }
        tally
    }

    /// Sends `command` to the masters `targets` at once, feeding each reply to
    /// `on_answer` until the round is decided. Stragglers are not waited for,
    /// but not cancelled either (see [`round`]). Failures are counted here.
    ///
    /// Every command is handed to its master's connection before the replies
    /// are looked at, so any later command for the same key (the release
    /// after a failed attempt, a client's Release) reaches each master after
    /// this round's, never before: a straggling SET cannot land after its
    /// own cleanup.
    async fn round(
        &self,
        subject: &Arc<Subject>,
        targets: impl Iterator<Item = usize>,
        command: Command,
        mut on_answer: impl FnMut(usize, Reply, &mut Tally),
    ) -> Tally {
        let (mut pending, submitted): (FuturesUnordered<_>, Vec<_>) = targets
            .map(|index| self.dispatch(index, subject, command))
            .unzip();
        join_all(submitted).await;
        let mut tally = Tally::new(self.quorum);
        while let Some((index, reply)) = pending.next().await {
            match reply {
                Ok(reply) => on_answer(index, reply, &mut tally),
                Err(error) => self.count_failure(index, &error, &mut tally),
            }
            if tally.decision() != Decision::Pending {
                break;
            }
        }
        tally
    }

    /// Runs one command against one master on its own task, bounded by
    /// `node_timeout`. Returns the reply, and a signal that completes once the
    /// command has been handed to the master's connection (or failed).
    /// Dropping the reply future detaches the task.
    fn dispatch(
        &self,
        index: usize,
        subject: &Arc<Subject>,
        command: Command,
    ) -> (
        impl std::future::Future<Output = (usize, Result<Reply, NodeError>)> + Send + 'static,
        impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let node = Arc::clone(&self.nodes[index]);
        let subject = Arc::clone(subject);
        let timeout = self.settings.node_timeout;
        let (submitted, on_submitted) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
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
            };
            reply.unwrap_or(Err(NodeError::Timeout))
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

    fn subject(&self, resource: &str, token: Token) -> Arc<Subject> {
        Arc::new(Subject {
            keys: LockKeys::new(&self.settings.key_prefix, resource),
            token,
        })
    }

    fn count_failure(&self, index: usize, error: &NodeError, tally: &mut Tally) {
        tally.failed += 1;
        tracing::debug!(node = self.nodes[index].name(), %error, "master did not answer");
    }

    fn all(&self) -> std::ops::Range<usize> {
        0..self.nodes.len()
    }
}

/// The answer of [`Redlock::acquire_detached`]. Dropping it before it
/// completes releases whatever the acquisition still grants: a grant already
/// handed over but not yet received included.
pub struct DetachedAcquire {
    answered: tokio::sync::oneshot::Receiver<Result<Lock, LockError>>,
    engine: Arc<Redlock>,
}

impl std::future::Future for DetachedAcquire {
    type Output = Result<Lock, LockError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.answered)
            .poll(cx)
            .map(|answer| {
                answer.unwrap_or(Err(LockError::Internal(
                    "the acquisition task ended without an answer",
                )))
            })
    }
}

impl Drop for DetachedAcquire {
    fn drop(&mut self) {
        // After `close`, the task's send fails (and it releases by itself),
        // or its answer is already here and is released now.
        self.answered.close();
        if let Ok(Ok(orphan)) = self.answered.try_recv() {
            self.engine.release_orphan(orphan);
        }
    }
}
