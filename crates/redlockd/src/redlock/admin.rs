//! The operator's view of the locks: who holds a resource
//! (`inspect`), which locks are held under a prefix (`list`, by SCAN,
//! never KEYS), and releasing whatever holds a resource (`force_release`).
//!
//! A lock is held when one token holds the lock key on a majority of the
//! masters that answered, as for every other operation; its remaining
//! validity is the quorum-th largest PTTL among them, less the round's time
//! and the drift allowance (as `Validate` computes it). Owner, fence, kind
//! and acquisition time come from the fence hash's record of the grant's
//! commit (`crate::valkey::scripts::COMMIT_FENCE`), or of its acquire where a
//! one-round grant took the proposed fence (`ACQUIRE`, which writes the
//! same fields), read on the same masters.
//! The token never leaves the daemon.

use super::{LockError, Redlock, Token};
use crate::metrics;
use futures::stream::StreamExt;
use std::time::{Duration, SystemTime};

mod holding;

/// Most SCAN steps one `list` call takes: bounded work per call, whatever
/// the keyspace holds (a page may come back short, with a page token).
const MAX_SCAN_STEPS: usize = 16;

/// Inspections a `list` call has out at once: each is one operation per
/// master, batched with the lock traffic; a few at a time keep a page from
/// crowding out acquisitions, or its own rounds out of `node_timeout`.
const INSPECTIONS_AT_ONCE: usize = 8;

/// How many `node_timeout`s an operator's read waits for the masters.
/// Nothing is at stake in waiting longer: the read takes no lock, and the
/// remaining validity it reports has the round's whole time taken off. A
/// page of `List` sends hundreds of reads, and a short `node_timeout` (50
/// ms in the tests) on a busy host would fail pages for no good reason.
const ADMIN_ROUND_FACTOR: u32 = 10;

/// How often `list` asks about one resource whose read found too few
/// masters answering before it gives up on the page (UNAVAILABLE).
const LIST_READ_TRIES: usize = 3;

/// How a lock is held: a unary Acquire, or a `Hold` session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionKind {
    /// Acquired by a unary call (or recorded before owners were kept).
    Unary,
    /// A `Hold` session on the named replica (see `Redlock::replica`).
    Hold {
        /// The replica that runs the session.
        replica: String,
    },
}

impl SessionKind {
    /// The kind recorded with a grant: `unary` or `hold:<replica>`.
    fn parse(kind: &str) -> SessionKind {
        match kind.strip_prefix("hold:") {
            Some(replica) => SessionKind::Hold {
                replica: replica.to_owned(),
            },
            None => SessionKind::Unary,
        }
    }
}

/// A lock held on a quorum, as an operator sees it.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct HeldLock {
    /// The resource.
    pub resource: String,
    /// The holder's `owner` label (empty when none was given or recorded).
    pub owner: String,
    /// The owner's version: 0 as granted, higher after each `Proclaim` of
    /// an election's leader (`super::proclaim`).
    pub owner_version: u64,
    /// The grant's fence (0 when no master of the quorum keeps its record).
    pub fence: u64,
    /// When it was acquired, by the masters' wall clock, if recorded.
    pub acquired_at: Option<SystemTime>,
    /// How long it stays held at least, as a quorum sees it.
    pub remaining: Duration,
    /// Unary or session, and which replica runs the session.
    pub kind: SessionKind,
    /// The holder's token: for `force_release` and for finding the session
    /// to end; never shown, never logged.
    pub(crate) token: Token,
}

impl std::fmt::Debug for HeldLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HeldLock")
            .field("resource", &self.resource)
            .field("owner", &self.owner)
            .field("owner_version", &self.owner_version)
            .field("fence", &self.fence)
            .field("acquired_at", &self.acquired_at)
            .field("remaining", &self.remaining)
            .field("kind", &self.kind)
            .finish_non_exhaustive()
    }
}

/// One page of [`Redlock::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ListPage {
    /// The held locks found in this page's SCAN steps.
    pub locks: Vec<HeldLock>,
    /// Where the next page starts; `None` when every master was scanned.
    pub next: Option<ListCursor>,
}

/// Where a listing stands: the master being scanned and its SCAN cursor.
/// Travels to clients as an opaque page token (`Display`/[`ListCursor::parse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct ListCursor {
    /// The master (its index in the configuration) being scanned.
    pub master: usize,
    /// Its SCAN cursor.
    pub cursor: u64,
}

impl ListCursor {
    /// A page token as [`std::fmt::Display`] writes it, `master.cursor`.
    pub(crate) fn parse(text: &str) -> Option<ListCursor> {
        let (master, cursor) = text.split_once('.')?;
        Some(ListCursor {
            master: master.parse().ok()?,
            cursor: cursor.parse().ok()?,
        })
    }
}

impl std::fmt::Display for ListCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}", self.master, self.cursor)
    }
}

impl Redlock {
    /// Who holds `resource` now, as a quorum sees it; `None` when no token
    /// holds it on a majority. UNAVAILABLE-style [`LockError::NoQuorum`] when
    /// too few masters answered to tell.
    pub(crate) async fn inspect(&self, resource: &str) -> Result<Option<HeldLock>, LockError> {
        Ok(self.holding(resource).await?.map(|holding| holding.lock))
    }

    /// Releases whatever token holds `resource` on a quorum (through the
    /// ordinary release: waiters are woken, re-creations cancelled). The
    /// lock it released, or `None` when nothing was held (or it was
    /// released by its holder meanwhile). The session holding it, if any,
    /// learns it at its next extension; the caller ends a local one at once.
    pub(crate) async fn force_release(
        &self,
        resource: &str,
    ) -> Result<Option<HeldLock>, LockError> {
        let Some(held) = self.inspect(resource).await? else {
            return Ok(None);
        };
        if !self.release_now(resource, &held.token).await? {
            return Ok(None);
        }
        metrics::force_release();
        Ok(Some(held))
    }

    /// One page of the locks held under `prefix` (a plain prefix of the
    /// resource name; glob characters in it match themselves), from `from`
    /// (the start: `ListCursor::default()`). Every master is scanned in
    /// turn, a lock being reported by the first master, in index order,
    /// among those that answered with its token, so a page never repeats
    /// another's lock. Bounded work: at most [`MAX_SCAN_STEPS`] SCAN steps
    /// of `page_size` keys each, stopping once `page_size` keys were found;
    /// the keys of one step are never split between pages, so a page may
    /// hold a few more than `page_size` locks (SCAN's COUNT is a hint), or
    /// fewer (keys of locks held by a minority, or already reported), and
    /// may be empty with a `next` to follow.
    pub(crate) async fn list(
        &self,
        prefix: &str,
        page_size: usize,
        from: ListCursor,
    ) -> Result<ListPage, LockError> {
        let lock_prefix = format!("{}lock:", self.settings.key_prefix);
        let pattern = format!("{}{}*", glob_escape(&lock_prefix), glob_escape(prefix));
        let mut at = from;
        let mut found: Vec<(usize, String)> = Vec::new();
        let mut steps = 0;
        while at.master < self.nodes.len() && found.len() < page_size && steps < MAX_SCAN_STEPS {
            steps += 1;
            let node = &self.nodes[at.master];
            let step = tokio::time::timeout(
                self.settings.node_timeout,
                node.scan(&pattern, at.cursor, page_size),
            )
            .await
            .unwrap_or(Err(super::NodeError::Timeout));
            let (next, keys) = match step {
                Ok(step) => step,
                Err(error) => {
                    // A master that cannot be scanned is skipped: every lock
                    // held on a majority is on another master as well.
                    tracing::debug!(node = node.name(), %error, "list: scan failed; skipping master");
                    (0, Vec::new())
                }
            };
            for key in keys {
                if let Some(resource) = key.strip_prefix(&lock_prefix) {
                    found.push((at.master, resource.to_owned()));
                }
            }
            at = match next {
                0 => ListCursor {
                    master: at.master + 1,
                    cursor: 0,
                },
                cursor => ListCursor { cursor, ..at },
            };
        }
        let mut inspections = futures::stream::iter(found)
            .map(|(master, resource)| async move {
                // One slow batch on a busy master should not fail a page
                // of hundreds of reads: a read that could not decide is
                // asked again, a few times; so is one where the master
                // whose SCAN found the key was not among those answering
                // with the holder's token (it may only have been slow:
                // then the lock would be reported by no page at all).
                let mut holding = self.holding(&resource).await;
                for _ in 1..LIST_READ_TRIES {
                    let unsure = match &holding {
                        Err(LockError::NoQuorum(_)) => true,
                        Ok(Some(held)) => !held.masters.contains(&master),
                        _ => false,
                    };
                    if !unsure {
                        break;
                    }
                    holding = self.holding(&resource).await;
                }
                (master, holding)
            })
            .buffer_unordered(INSPECTIONS_AT_ONCE);
        let mut locks = Vec::new();
        while let Some((master, holding)) = inspections.next().await {
            match holding {
                Ok(Some(holding)) if holding.masters.first() == Some(&master) => {
                    locks.push(holding.lock);
                }
                Ok(_) => {}
                Err(error) => return Err(error),
            }
        }
        locks.sort_by(|a, b| a.resource.cmp(&b.resource));
        Ok(ListPage {
            locks,
            next: (at.master < self.nodes.len()).then_some(at),
        })
    }
}

/// `text` with SCAN's glob characters escaped, so it matches itself.
fn glob_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Glob characters in a prefix match themselves.
    #[test]
    fn escapes_globs() {
        assert_eq!(glob_escape("a*b?[c]\\"), "a\\*b\\?\\[c\\]\\\\");
        assert_eq!(glob_escape("jobs/"), "jobs/");
    }

    /// Page tokens round-trip; anything else is refused.
    #[test]
    fn cursor_round_trip() {
        let at = ListCursor {
            master: 3,
            cursor: 917,
        };
        assert_eq!(ListCursor::parse(&at.to_string()), Some(at));
        assert_eq!(ListCursor::parse("x.1"), None);
        assert_eq!(ListCursor::parse("17"), None);
    }

    /// The recorded kind reads back as the session kind.
    #[test]
    fn kinds() {
        assert_eq!(SessionKind::parse("unary"), SessionKind::Unary);
        assert_eq!(SessionKind::parse(""), SessionKind::Unary);
        assert_eq!(
            SessionKind::parse("hold:host/42"),
            SessionKind::Hold {
                replica: "host/42".into()
            }
        );
    }
}
