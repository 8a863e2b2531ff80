//! Who holds one resource, as a quorum of the masters sees it: the read
//! behind `inspect`, `list` and `force_release` (see [`super`]).

use super::{HeldLock, SessionKind, ADMIN_ROUND_FACTOR};
use crate::redlock::keys::{LockKeys, SHARED_SENTINEL};
use crate::redlock::master::{Record, Seen};
use crate::redlock::quorum::Vote;
use crate::redlock::{validity, Decision, LockError, Redlock, Tally, Token};
use futures::stream::{FuturesUnordered, StreamExt};
use std::collections::HashMap;
use std::time::{Duration, UNIX_EPOCH};
use tokio::time::Instant;

/// What a quorum holds of one resource, and on which masters.
pub(super) struct Holding {
    pub(super) lock: HeldLock,
    /// The masters that answered with the holder's token, in index order.
    pub(super) masters: Vec<usize>,
}

impl Redlock {
    /// Reads the resource's keys on every master (one read-only script each,
    /// batched with the other operations) and decides who holds it. Waits
    /// for every master, up to [`ADMIN_ROUND_FACTOR`] `node_timeout`s, so
    /// that `list` knows every master holding the token. A master that does
    /// not answer in that time counts as not holding it, so `list` may then
    /// report a lock on a later master's page again, or (rarely) not at all.
    pub(super) async fn holding(&self, resource: &str) -> Result<Option<Holding>, LockError> {
        let keys = LockKeys::new(&self.settings.key_prefix, resource);
        let start = validity::Started::now();
        let deadline = Instant::now() + self.settings.node_timeout * ADMIN_ROUND_FACTOR;
        let mut pending: FuturesUnordered<_> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(index, node)| {
                let reply = node.inspect(&keys);
                async move { (index, reply.await) }
            })
            .collect();
        let mut seen: Vec<(usize, Option<Seen>)> = Vec::with_capacity(self.nodes.len());
        let mut failed = 0;
        loop {
            match tokio::time::timeout_at(deadline, pending.next()).await {
                Ok(Some((index, Ok(answer)))) if self.nodes[index].trusted() => {
                    seen.push((index, answer));
                }
                Ok(Some(_)) => failed += 1,
                Ok(None) => break,
                Err(_elapsed) => {
                    failed += pending.len();
                    break;
                }
            }
        }
        let elapsed = start.elapsed();
        // The token most masters hold: only it can hold a majority.
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for (_, answer) in &seen {
            if let Some(answer) = answer {
                *counts.entry(answer.token.as_str()).or_default() += 1;
            }
        }
        let leader = counts
            .into_iter()
            .max_by_key(|&(_, count)| count)
            .map(|(token, _)| token.to_owned());
        let mut tally = Tally::new(self.quorum);
        for _ in 0..failed {
            tally.count(Vote::Failed);
        }
        let mut masters = Vec::new();
        let mut pttls = Vec::new();
        let mut record = None;
        for (index, answer) in &seen {
            match answer {
                Some(answer) if Some(&answer.token) == leader.as_ref() => {
                    tally.count(Vote::Yes);
                    masters.push(*index);
                    pttls.push(answer.pttl);
                    // The grant's committed record (a master where only
                    // the one-round proposal landed keeps a lower fence
                    // for the same token), and of it the newest owner: a
                    // leader's Proclaim wrote it on a majority, which this
                    // read shares a master with (`crate::redlock::proclaim`).
                    // The owner breaks a tie, so that every read ranks the
                    // same records alike.
                    if let Some(r) = &answer.record {
                        if record.as_ref().is_none_or(|kept| rank(r) > rank(kept)) {
                            record = Some(r.clone());
                        }
                    }
                }
                _ => tally.count(Vote::No),
            }
        }
        match tally.decision() {
            Decision::Reached => {}
            _ if tally.refused_by_majority() => return Ok(None),
            _ => return Err(LockError::NoQuorum(tally)),
        }
        if leader.as_deref() == Some(SHARED_SENTINEL) {
            // Shared holders (`crate::redlock::kinds::rw`): not shown one by one.
            return Ok(None);
        }
        let Some(token) = leader.and_then(|t| Token::parse(&t).ok()) else {
            // A key written by hand, not a token of ours: not a lock.
            return Ok(None);
        };
        masters.sort_unstable();
        pttls.sort_unstable_by(|a, b| b.cmp(a));
        let quorum_th = pttls
            .get(self.quorum.needed() - 1)
            .copied()
            .unwrap_or_default();
        let Some(remaining) = validity::validity(quorum_th, elapsed, self.settings.drift_factor)
        else {
            return Ok(None);
        };
        let record = record.unwrap_or(Record {
            fence: 0,
            owner: String::new(),
            kind: String::new(),
            at_micros: 0,
            version: 0,
        });
        Ok(Some(Holding {
            lock: HeldLock {
                resource: resource.to_owned(),
                owner: record.owner,
                owner_version: record.version,
                fence: record.fence,
                acquired_at: (record.at_micros > 0)
                    .then(|| UNIX_EPOCH + Duration::from_micros(record.at_micros)),
                remaining,
                kind: SessionKind::parse(&record.kind),
                token,
            },
            masters,
        }))
    }
}

/// How a read ranks one token's records: by fence, then by the owner's
/// version, then by the owner itself.
fn rank(record: &Record) -> (u64, u64, &str) {
    (record.fence, record.version, record.owner.as_str())
}
