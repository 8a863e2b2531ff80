//! What every `Hold` session shares ([`Sessions`]: settings, caps,
//! quotas), the sessions by their lock's token ([`SessionRegistry`], for
//! `LockAdmin.ForceRelease`), and a session's place among the open ones
//! ([`Slot`], watched by the draining stop through [`OpenSessions`]).

use super::SessionError;
use crate::config::Config;
use crate::redlock::Token;
use crate::service::auth::Identity;
use crate::service::denied::Denied;
use crate::service::drain::Drain;
use crate::service::quota::{Quota, QuotaSlot};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{watch, Notify, OwnedSemaphorePermit, Semaphore};

/// What every session shares: its settings, the cap on open sessions, the
/// count of open ones, and the daemon's phase.
pub(crate) struct Sessions {
    pub(super) extend_at: f64,
    pub(super) first_message: Duration,
    /// `session.min_ttl`.
    pub(super) min_ttl: Duration,
    /// Half of `server.keepalive_timeout`: a session's client heard from
    /// within this when its stream broke ended the stream itself; one
    /// silent for longer may be frozen (`crate::conn::heard`). Unbounded
    /// under the counterfactual `release-silent-sessions` (`[testing]`).
    pub(super) heard_within: Duration,
    /// How long a session's client may go unheard and still have its lock
    /// extended: `server.keepalive_timeout`, or the keepalive interval plus
    /// half the timeout if that is longer (a healthy idle client is heard
    /// at least each interval, when it answers the daemon's PING). A
    /// frozen client's lock is then last extended within this of the
    /// freeze and passes on at most this plus its ttl after it.
    pub(super) silent_at_most: Duration,
    slots: Arc<Semaphore>,
    max: usize,
    open: Arc<watch::Sender<usize>>,
    pub(super) drain: Drain,
    registry: SessionRegistry,
    /// `limits.max_sessions_per_identity`.
    pub(super) per_identity: Quota,
    /// `limits.max_waiters_per_identity`, for Acquire and Hold alike.
    waiters: Quota,
}

/// The clients of `[auth]` that set their own quota (`pick`), by name: the
/// quota key of an authenticated caller (`auth::QuotaKey`).
fn own_quotas(
    config: &Config,
    pick: impl Fn(&crate::config::ClientConfig) -> Option<usize>,
) -> std::collections::HashMap<Arc<str>, usize> {
    config
        .auth
        .clients
        .iter()
        .filter_map(|c| Some((Arc::from(c.name.as_str()), pick(c)?)))
        .collect()
}

/// This replica's Hold sessions by their lock's token, so that
/// `LockAdmin.ForceRelease` can end the ones holding a lock at once.
///
/// Several sessions can hold one token: a `Hold` retried with its
/// request id on a new connection resumes the lock while the first
/// session's stream lingers (`crate::redlock::claim`). Each entry is
/// therefore the session's own, and a session that ends removes only its
/// own entry, never its successor's.
#[derive(Clone, Default)]
pub(crate) struct SessionRegistry {
    inner: Arc<Mutex<Entries>>,
}

/// The registry's entries, and the next session's id.
#[derive(Default)]
struct Entries {
    by_token: HashMap<String, Vec<(u64, Arc<Notify>)>>,
    next: u64,
}

impl SessionRegistry {
    /// Ends every session holding `token` here: each tells its client
    /// `lost` ("released by an operator"). Returns whether one did.
    pub(crate) fn end(&self, token: &Token) -> bool {
        let entries = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match entries.by_token.get(token.expose()) {
            Some(sessions) if !sessions.is_empty() => {
                for (_, ending) in sessions {
                    ending.notify_one();
                }
                true
            }
            _ => false,
        }
    }

    pub(super) fn register(&self, token: &Token) -> Registered {
        let ending = Arc::new(Notify::new());
        let mut entries = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let id = entries.next;
        entries.next += 1;
        entries
            .by_token
            .entry(token.expose().to_owned())
            .or_default()
            .push((id, Arc::clone(&ending)));
        Registered {
            registry: self.clone(),
            token: token.expose().to_owned(),
            id,
            ending,
        }
    }

    /// Sessions registered for `token` now.
    #[cfg(test)]
    fn count(&self, token: &Token) -> usize {
        let entries = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        entries.by_token.get(token.expose()).map_or(0, Vec::len)
    }
}

/// A session's entry in the [`SessionRegistry`], removed when dropped.
pub(super) struct Registered {
    registry: SessionRegistry,
    token: String,
    id: u64,
    pub(super) ending: Arc<Notify>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut entries = self
            .registry
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(sessions) = entries.by_token.get_mut(&self.token) {
            sessions.retain(|(id, _)| *id != self.id);
            if sessions.is_empty() {
                entries.by_token.remove(&self.token);
            }
        }
    }
}

impl Sessions {
    /// Sessions as configured; `drain` tells them when the daemon drains
    /// and stops.
    pub(crate) fn new(config: &Config, drain: Drain) -> Sessions {
        Sessions {
            extend_at: config.session.extend_at,
            first_message: config.session.first_message_timeout,
            min_ttl: config.session.min_ttl,
            heard_within: match config.testing.counterfactuals.release_silent_sessions {
                true => Duration::MAX,
                false => config.server.keepalive_timeout / 2,
            },
            silent_at_most: config
                .server
                .keepalive_timeout
                .max(config.server.keepalive_interval + config.server.keepalive_timeout / 2),
            slots: Arc::new(Semaphore::new(config.limits.max_sessions)),
            max: config.limits.max_sessions,
            open: Arc::new(watch::channel(0).0),
            drain,
            per_identity: Quota::with_own(
                config.limits.max_sessions_per_identity,
                own_quotas(config, |c| c.max_sessions),
            ),
            waiters: Quota::with_own(
                config.limits.max_waiters_per_identity,
                own_quotas(config, |c| c.max_waiters),
            ),
            registry: SessionRegistry::default(),
        }
    }

    /// The sessions of this replica, for `LockAdmin.ForceRelease`.
    pub(crate) fn registry(&self) -> SessionRegistry {
        self.registry.clone()
    }

    /// A place among `key`'s waiters when the acquisition may wait
    /// (`wait` > 0); none is needed otherwise.
    pub(in crate::service) fn waiter_slot(
        &self,
        key: &Arc<str>,
        identity: &Identity,
        wait: Duration,
    ) -> Result<Option<QuotaSlot>, Denied> {
        if wait.is_zero() {
            return Ok(None);
        }
        self.waiters.take(key).map(Some).map_err(|max| {
            Denied::IdentityQuota {
                client: identity.name.to_string(),
                what: "waiters",
                max,
            }
            .counted()
        })
    }

    /// The daemon's phase, for the handlers.
    pub(in crate::service) fn drain(&self) -> &Drain {
        &self.drain
    }

    /// A handle that completes [`OpenSessions::all_ended`] once no session
    /// is open.
    pub(crate) fn open(&self) -> OpenSessions {
        OpenSessions {
            open: self.open.subscribe(),
        }
    }
}

/// The number of open sessions, watched by the draining stop.
#[derive(Debug)]
pub(crate) struct OpenSessions {
    open: watch::Receiver<usize>,
}

impl OpenSessions {
    /// Completes once no session is open (new ones are refused by then).
    pub(crate) async fn all_ended(&mut self) {
        let _ = self.open.wait_for(|open| *open == 0).await;
    }
}

/// A session's place: its slot under `limits.max_sessions`, and its count
/// among the open sessions, both given back when the session ends.
pub(super) struct Slot {
    _permit: OwnedSemaphorePermit,
    open: Arc<watch::Sender<usize>>,
}

impl Slot {
    pub(super) fn take(sessions: &Sessions) -> Result<Slot, SessionError> {
        let permit = Arc::clone(&sessions.slots)
            .try_acquire_owned()
            .map_err(|_| SessionError::TooMany { max: sessions.max })?;
        sessions.open.send_modify(|open| *open += 1);
        Ok(Slot {
            _permit: permit,
            open: Arc::clone(&sessions.open),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open.send_modify(|open| *open = open.saturating_sub(1));
    }
}

#[cfg(test)]
mod tests {
    use super::SessionRegistry;
    use crate::redlock::Token;

    /// Two sessions of one token (a Hold retried with its request id while
    /// the first stream lingers): the first one's end removes only its own
    /// entry, so ForceRelease still reaches the second.
    #[test]
    fn a_sessions_end_keeps_its_successors_entry() {
        let registry = SessionRegistry::default();
        let token = Token::generate().expect("OS RNG");
        let first = registry.register(&token);
        let second = registry.register(&token);
        assert_eq!(registry.count(&token), 2);
        drop(first);
        assert_eq!(registry.count(&token), 1);
        assert!(registry.end(&token), "the successor is still reachable");
        drop(second);
        assert_eq!(registry.count(&token), 0);
        assert!(!registry.end(&token));
    }
}
