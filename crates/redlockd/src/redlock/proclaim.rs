//! An election leader's `Proclaim`: a new value for the owner recorded with
//! its grant, without giving up the lock.
//!
//! The value travels with a version, so that a read of a majority keeps
//! the newest value it finds (`admin::holding` keeps the record of the
//! highest version): a Proclaim first reads the leadership from a majority,
//! as `Leader` does, to learn the version now in force, then writes the
//! value with the next version on every master where the token still
//! holds the lock with that term's record (`Master::proclaim`), and succeeds
//! when a majority wrote it. Two majorities share a master, so every later
//! read and every later Proclaim sees the new version on at least one
//! master and ranks it above what the others still keep. Proclaims of one
//! leadership made one after another are thus seen in their order; two
//! made at once are ordered by whichever wrote last where they met.
//!
//! Nothing here touches the lock key, its expiry or the fence counter: a
//! Proclaim cannot grant, extend or end anything, so the model of the
//! lock scripts (`tools/model`) is unchanged by it.

use super::quorum::Vote;
use super::round::{Command, Reply};
use super::{Decision, LockError, Redlock, Tally, Token};
use std::sync::Arc;

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
        let version = held.owner_version + 1;
        let subject = self.subject_of(resource, token.clone(), None);
        let command = Command::Proclaim {
            term,
            version,
            value: Arc::from(value),
        };
        let votes = self
            .round(&subject, self.all(), command, |_, reply, tally| {
                tally.count(match reply {
                    Reply::Proclaimed(Some(true)) => Vote::Yes,
                    // Held, but with nothing to write to: not a refusal
                    // (the token does hold it there), and not a success.
                    Reply::Proclaimed(None) => Vote::Failed,
                    _ => Vote::No,
                });
            })
            .await;
        match votes.decision() {
            Decision::Reached => {
                // Observers on every replica read the election again.
                self.announce_leadership(resource);
                Ok(version)
            }
            _ if votes.refused_by_majority() => Err(LockError::NotHeld(votes)),
            _ => Err(LockError::no_quorum(votes)),
        }
    }
}
