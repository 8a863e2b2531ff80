//! Where a resource's lock lives on each master.
//!
//! With the default prefix `redlock:`, resource `orders/42` uses:
//! - `redlock:lock:orders/42`: a string holding the lock token, with the
//!   lock's ttl as its expiry (`SET NX PX`);
//! - `redlock:fence:orders/42`: a hash with `max` (the largest fence committed
//!   for the resource on this master), `holder` and `fence` (the token and
//!   fence of the latest commit, so Extend can report the fence), expiring
//!   after `fence_ttl`. See [`super::fence`]. It also holds the grant's
//!   recorded owner, kind and time (`owner`, `kind`, `at`), its terms (`delay`,
//!   `nb`, `lu`), the writer-waiting marker (`ww`, see [`super::kinds::rw`]), a
//!   semaphore's limit (`lim`, see below), the waiter marker (`wm`, see
//!   below) and the `fence_ttl` the hash was last renewed to (`ft`, so that
//!   a replica with another setting renews rather than trust a renewal it
//!   did not make, see [`super::fence`]): every field an acquire or release must see is in the one hash it
//!   reads anyway (one `HMGET` per step).
//!
//! A semaphore of resource `orders/42` keeps its permits' keys beside it:
//! `redlock:lock:orders/42<0x1f><i>` and `redlock:fence:orders/42<0x1f><i>`
//! (see [`super::kinds::semaphore`]), and its limit in the resource's own fence
//! hash (`lim`), which lives at least as long as any permit key.
//!
//! A resource that has shared (read) holders also uses
//! `redlock:readers:orders/42`, a sorted set of the shared holders' tokens
//! scored by their expiry on the master's clock, and keeps the string
//! [`SHARED_SENTINEL`] in its lock key while they hold. See
//! [`super::kinds::rw`].
//!
//! Release notices (see [`super::notices`]) go to the pub/sub channel
//! `redlock:released`, only for resources with a waiter marker on the
//! master: the field `wm` of the resource's fence hash, the master's time
//! (ms) until which some replica has a waiter queued, which an acquire
//! that will wait in the queue sets where it is refused.
//!
//! Semaphore limits and waiter markers were separate keys
//! (`redlock:limit:R`, `redlock:waiters:R`) before any release had them
//! (0.1.0, untagged): no daemon reads those keys, and no rolling upgrade
//! from that layout is supported.
//!
//! One more key per master, not per resource: `redlock:horizon`, whose
//! remaining time to live is at least that of the longest lock written to
//! the master (see `crate::valkey::horizon`).

use super::token::Token;
use std::any::Any;
use std::sync::OnceLock;
use std::time::Duration;

/// The lock key's value while shared holders hold the resource on a master:
/// never a token (tokens are hex, or `s` and hex), so no exclusive
/// compare-and-anything matches it. See [`super::kinds::rw`].
pub(crate) const SHARED_SENTINEL: &str = "shared";

/// The keys of one resource, built once per request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockKeys {
    /// The lock key: its value is the holder's token.
    pub lock: String,
    /// The fence hash, see the module doc.
    pub fence: String,
    /// The pub/sub channel of release notices.
    pub channel: String,
    /// For a shared grant's token: the readers sorted set, see
    /// [`super::kinds::rw`]. `None`: an exclusive grant, today's lock.
    pub readers: Option<String>,
    /// For an exclusive acquisition: how long a master that refuses it
    /// because shared holders hold there refuses new shared grants (the
    /// writer-waiting marker, [`super::kinds::rw`]). Zero: sets none.
    pub writer_mark: Duration,
    /// The resource's own fence hash (for a plain lock: `fence`; for a
    /// permit: its resource's), which holds the semaphore's limit and the
    /// waiter marker (see the module doc): read by every acquisition and
    /// release, written by a permit's grant and by refused waiters.
    pub base_fence: String,
    /// The resource's plain lock key (for a plain lock: `lock`), whose
    /// permits' keys are it, 0x1f, the index.
    pub base: String,
    /// The semaphore's limit when acquiring one of its permits; 0 for a
    /// plain lock, and for any operation but an acquisition.
    pub limit: u32,
    /// How long the resource's fence hash lives after a permit's grant
    /// (the engine's `fence_ttl`); zero when `limit` is.
    pub limit_ttl: std::time::Duration,
    /// The keys as a master connection sends them, made by the first
    /// master's command of a round and reused by the others (see
    /// [`Encoded`]).
    pub(crate) encoded: Encoded,
}

/// A node's own encoding of a subject's keys (and token), made once by the
/// first of the round's commands and shared by the others: one copy of
/// each string per round instead of one per master (the
/// per-master copies were a quarter of the daemon's allocations per lock
/// cycle). Opaque to the engine, which never reads it; a clone starts
/// empty, and it is never compared. Its user checks each cached string
/// against the field it stands for before using it, so a field changed
/// after the cache was made can never be sent stale.
#[derive(Default)]
pub(crate) struct Encoded(OnceLock<Box<dyn Any + Send + Sync>>);

impl Encoded {
    /// The cached encoding, made by `make` on first use; `None` if it was
    /// made as another type (a different node kind in the same round).
    pub(crate) fn get_or_init<T: Any + Send + Sync>(&self, make: impl FnOnce() -> T) -> Option<&T> {
        self.0.get_or_init(|| Box::new(make())).downcast_ref()
    }
}

impl Clone for Encoded {
    fn clone(&self) -> Encoded {
        Encoded::default()
    }
}

impl PartialEq for Encoded {
    fn eq(&self, _: &Encoded) -> bool {
        true
    }
}

impl Eq for Encoded {}

impl std::fmt::Debug for Encoded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Encoded")
    }
}

impl LockKeys {
    /// Keys for `resource` under `prefix`.
    pub fn new(prefix: &str, resource: &str) -> LockKeys {
        let lock = format!("{prefix}lock:{resource}");
        let fence = format!("{prefix}fence:{resource}");
        LockKeys {
            base: lock.clone(),
            lock,
            base_fence: fence.clone(),
            fence,
            channel: release_channel(prefix),
            readers: None,
            writer_mark: Duration::ZERO,
            limit: 0,
            limit_ttl: std::time::Duration::ZERO,
            encoded: Encoded::default(),
        }
    }

    /// Keys of permit `index` of the semaphore on `resource`, acquired
    /// under `limit` with the resource's fence hash living `limit_ttl` (`(0, 0)`
    /// when not acquiring).
    pub fn permit(
        prefix: &str,
        resource: &str,
        index: u32,
        (limit, limit_ttl): (u32, std::time::Duration),
    ) -> LockKeys {
        let plain = LockKeys::new(prefix, resource);
        LockKeys {
            lock: format!("{}{PERMIT_SEPARATOR}{index}", plain.lock),
            fence: format!("{}{PERMIT_SEPARATOR}{index}", plain.fence),
            limit,
            limit_ttl,
            ..plain
        }
    }

    /// Keys for `token`'s grant of `resource`: a shared token's reach the
    /// readers set; an exclusive one's carry `writer_mark`.
    pub(crate) fn for_token(
        prefix: &str,
        resource: &str,
        token: &Token,
        writer_mark: Duration,
    ) -> LockKeys {
        let mut keys = LockKeys::new(prefix, resource);
        if token.is_shared() {
            keys.readers = Some(format!("{prefix}readers:{resource}"));
        } else {
            keys.writer_mark = writer_mark;
        }
        keys
    }
}

/// Between a resource's key and a permit's index: a control character, which
/// resource names cannot contain. The scripts spell it `'\31'`.
pub(crate) const PERMIT_SEPARATOR: char = '\u{1f}';

/// The first character of every election's resource: a control
/// character no resource a client names may hold, so an election and a
/// lock never share keys whatever their names (`crate::service::election`).
pub(crate) const ELECTION_MARK: char = '\u{1e}';

/// The resource an election's leadership is the lock of.
pub(crate) fn election_resource(name: &str) -> String {
    format!("{ELECTION_MARK}election/{name}")
}

/// The election a resource is the leadership of, if it is one.
pub(crate) fn election_name(resource: &str) -> Option<&str> {
    resource
        .strip_prefix(ELECTION_MARK)
        .and_then(|rest| rest.strip_prefix("election/"))
}

/// Whether a resource is an election's leadership.
pub(crate) fn is_election(resource: &str) -> bool {
    election_name(resource).is_some()
}

/// The pub/sub channel on which releases are announced under `prefix`.
pub(crate) fn release_channel(prefix: &str) -> String {
    format!("{prefix}released")
}

/// The master's horizon key under `prefix`: its expiry covers every lock
/// written to the master (see `crate::valkey::horizon`).
pub(crate) fn horizon_key(prefix: &str) -> String {
    format!("{prefix}horizon")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The documented layout.
    #[test]
    fn layout() {
        let k = LockKeys::new("redlock:", "orders/42");
        assert_eq!(k.lock, "redlock:lock:orders/42");
        assert_eq!(k.fence, "redlock:fence:orders/42");
        assert_eq!(k.channel, "redlock:released");
        assert_eq!(k.base_fence, k.fence);
        assert_eq!(horizon_key("redlock:"), "redlock:horizon");
        let p = LockKeys::permit("redlock:", "orders/42", 2, (3, std::time::Duration::ZERO));
        assert_eq!(p.lock, "redlock:lock:orders/42\u{1f}2");
        assert_eq!(p.fence, "redlock:fence:orders/42\u{1f}2");
        assert_eq!(p.base, "redlock:lock:orders/42");
        assert_eq!(p.base_fence, k.fence);
        assert_eq!(p.limit, 3);
        assert_eq!(k.readers, None);
    }

    /// A shared token's keys reach the readers set and set no marker; an
    /// exclusive one's carry the marker's duration.
    #[test]
    fn shared_layout() {
        let mark = Duration::from_secs(2);
        let token = Token::generate().expect("OS RNG");
        let k = LockKeys::for_token("redlock:", "orders/42", &token, mark);
        assert_eq!((k.readers, k.writer_mark), (None, mark));
        let k = LockKeys::for_token("redlock:", "orders/42", &token.into_shared(), mark);
        assert_eq!(k.readers.as_deref(), Some("redlock:readers:orders/42"));
        assert_eq!(k.writer_mark, Duration::ZERO);
        assert_eq!(k.lock, "redlock:lock:orders/42");
    }
}
