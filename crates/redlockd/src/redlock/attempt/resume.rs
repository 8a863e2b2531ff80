//! An attempt with a request id that finds the key held by its own token
//! (an earlier acquisition of the request id): that lock is taken over, or,
//! not held on a majority after all, cleaned up and attempted once more.

use super::Failure;
use crate::redlock::admission::Admitted;
use crate::redlock::quorum::Vote;
use crate::redlock::round::Subject;
use crate::redlock::{Claim, Ending, Epoch, Holder, Lock, LockError, Redlock, WakeWaiters};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

impl Redlock {
    /// [`Redlock::attempt_once`] of a plain or shared lock's `subject`, as
    /// a [`Lock`]; when the attempt, with a request id, found the key held
    /// by its own token ([`Failure::own`]), the earlier acquisition's lock
    /// is taken over ([`Redlock::resume_own`]), or, not held on a majority
    /// after all (what was left of it is cleaned up), attempted once more.
    pub(super) async fn attempt_plain(
        &self,
        subject: &Arc<Subject>,
        ttl: Duration,
        waiter_marker: Duration,
        holder: &Arc<Holder>,
        admitted: &Admitted<'_>,
        cleanup: WakeWaiters,
    ) -> Result<Lock, Failure> {
        let once = || self.attempt_once(subject, ttl, waiter_marker, holder, admitted, cleanup);
        let mut result = once().await;
        if let (Err(failure), Some(epoch)) = (&result, holder.epoch) {
            if failure.own {
                match self.resume_own(subject, epoch, ttl, cleanup).await {
                    Ok(Some(lock)) => return Ok(lock),
                    Ok(None) => {
                        result = once().await;
                        if let Err(failure) = &mut result {
                            if failure.own {
                                // Another acquisition of the request id is
                                // at work at the same moment: leave it the
                                // lock; this attempt's keys go.
                                self.release_everywhere(
                                    subject,
                                    cleanup,
                                    Ending::Forced,
                                    self.round_deadline(Instant::now()),
                                    Vote::Failed,
                                )
                                .await;
                                failure.own = false;
                            }
                        }
                    }
                    Err(error) => return Err(error.into()),
                }
            }
        }
        result.map(|(fence, (validity, deadline))| Lock {
            resource: subject.resource.clone(),
            token: subject.token.clone(),
            fence,
            validity,
            deadline,
            members: Vec::new(),
            epoch: holder.epoch,
        })
    }

    /// After an attempt with a request id found the key held by its own
    /// token on some masters (an earlier acquisition of the request id,
    /// [`Failure::own`]): take that lock over ([`Claim::Take`], with the
    /// keys this attempt set beside it). `Some(lock)`: held on a majority,
    /// the answer. `None`: not held on a majority; what is left of it and
    /// of this attempt is released, and the caller attempts anew. An error:
    /// too few masters answered to tell; nothing is released (an attempt's
    /// clean-up could delete that lock if it were held).
    ///
    /// This is the lazy form of [`Redlock::resume`]: an acquisition with a
    /// request id costs no Extend round before its first attempt, only
    /// when an earlier acquisition's key is actually found.
    async fn resume_own(
        &self,
        subject: &Arc<Subject>,
        epoch: Epoch,
        ttl: Duration,
        cleanup: WakeWaiters,
    ) -> Result<Option<Lock>, LockError> {
        let take = Claim::Take(epoch);
        match self
            .extend_claiming(&subject.resource, &subject.token, ttl, take)
            .await
        {
            Ok(lock) => Ok(Some(lock)),
            Err(LockError::NotHeld(_) | LockError::Superseded(_)) => {
                self.release_everywhere(
                    subject,
                    cleanup,
                    Ending::Forced,
                    self.round_deadline(Instant::now()),
                    Vote::Failed,
                )
                .await;
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }
}
