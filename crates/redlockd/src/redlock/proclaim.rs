//! An election leader's `Proclaim`: a new value for the owner recorded with
//! its grant, without giving up the lock.
//!
//! The value travels with a version, and a read of a majority keeps the
//! record of the highest (`admin::holding`). A Proclaim first reads the
//! leadership from a majority, as `Leader` does, then writes the value on
//! every master where the token still holds the lock with that term's
//! record (`Master::proclaim`) with a version above the one it read and
//! not below the daemon's clock in microseconds, so that two Proclaims at
//! once (a retry of a slow one, two replicas) do not pick the same version;
//! a master keeps the higher of its version and the one sent. It succeeds
//! when a majority recorded the value and none keeps a higher version: a
//! master that does (a Proclaim that failed, or ran at once, wrote there
//! with a clock ahead of this daemon's) would make a read that meets it
//! answer that value, so the write goes again above it, a few times at
//! most. Two majorities share a master, so every read and every Proclaim
//! after a successful one sees its version on at least one master, and
//! nothing higher unless a later Proclaim wrote it.
//!
//! Nothing here touches the lock key, its expiry or the fence counter: a
//! Proclaim cannot grant, extend or end anything, so the model of the
//! lock scripts (`tools/model`) is unchanged by it.

use super::quorum::Vote;
use super::round::{Command, Reply, Until};
use super::{Decision, LockError, Redlock, Tally, Token};
use std::sync::Arc;
use tokio::time::Instant;

impl Redlock {
    /// Records `value` as the owner of `token`'s grant on `resource`, whose
    /// fence is `term`; answers the value's version. [`LockError::NotHeld`]
    /// when `token` does not hold the lock with that fence on a majority
    /// (the leadership is over: nothing is written where it is not the
    /// token's); [`LockError::NoQuorum`] when too few masters answered, or
    /// too few keep a record of the grant to write to (keys re-created
    /// after restarts): the value may then show on some reads and not
    /// others until a Proclaim succeeds.
    pub(crate) async fn proclaim(
        &self,
        resource: &str,
        token: &Token,
        term: u64,
        value: &str,
    ) -> Result<u64, LockError> {
        let not_held = || LockError::NotHeld(Tally::new(self.quorum));
        let held = self.inspect(resource).await?.ok_or_else(not_held)?;
        if held.token != *token || held.fence != term {
            return Err(not_held());
        }
        let mut version = (held.owner_version + 1).max(clock_micros());
        let subject = self.subject_of(resource, token.clone(), None);
        let value: Arc<str> = Arc::from(value);
        let mut writes = 0;
        loop {
            writes += 1;
            let command = Command::Proclaim {
                term,
                version,
                value: Arc::clone(&value),
            };
            let mut newer = None;
            // Every master's answer, not only a majority's: one keeping a
            // higher version must be known (see the module doc).
            let deadline = self.round_deadline(Instant::now());
            let mut pending = self.send_to(&subject, self.all(), &command);
            let mut votes = Tally::new(self.quorum);
            let silent = self.silent_vote();
            self.listen(
                &mut pending,
                deadline,
                silent,
                &mut votes,
                Until::AllAnswered,
                |_, reply, tally| {
                    tally.count(match reply {
                        Reply::Proclaimed(Some(kept)) if kept == version => Vote::Yes,
                        // Held, but with nothing to write to: not a
                        // refusal (the token does hold it there), and not
                        // a success.
                        Reply::Proclaimed(Some(0)) => Vote::Failed,
                        Reply::Proclaimed(Some(kept)) => {
                            newer = newer.max(Some(kept));
                            Vote::Failed
                        }
                        _ => Vote::No,
                    });
                },
            )
            .await;
            match (votes.decision(), newer) {
                (Decision::Reached, None) => {
                    // Observers on every replica read the election again.
                    self.announce_leadership(resource);
                    return Ok(version);
                }
                (_, Some(kept)) if writes < PROCLAIM_WRITES => version = kept + 1,
                _ if votes.refused_by_majority() => return Err(LockError::NotHeld(votes)),
                _ => return Err(LockError::no_quorum(votes)),
            }
        }
    }
}

/// Write rounds one Proclaim makes at most: the first, and again above a
/// version found higher on some master (see the module doc).
const PROCLAIM_WRITES: u32 = 3;

/// The daemon's clock in microseconds since the Unix epoch (0 before it).
fn clock_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| {
            u64::try_from(since.as_micros()).unwrap_or(u64::MAX)
        })
}
