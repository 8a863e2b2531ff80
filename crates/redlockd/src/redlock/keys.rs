//! Where a resource's lock lives on each master.
//!
//! With the default prefix `redlock:`, resource `orders/42` uses:
//! - `redlock:lock:orders/42`: a string holding the lock token, with the
//!   lock's ttl as its expiry (`SET NX PX`);
//! - `redlock:fence:orders/42`: a hash with `max` (the largest fence committed
//!   for the resource on this master), `holder` and `fence` (the token and
//!   fence of the latest commit, so Extend can report the fence), expiring
//!   after `fence_ttl`. See [`super::fence`].
//!
//! Release notices (see [`super::notices`]) go to the pub/sub channel
//! `redlock:released`, only for resources with a waiter marker
//! `redlock:waiters:orders/42` on the master: a key with a ttl that an
//! acquire which will wait in the queue sets where it is refused.
//!
//! One more key per master, not per resource: `redlock:horizon`, whose
//! remaining time to live is at least that of the longest lock written to
//! the master (see `crate::node::horizon`).

/// The two keys of one resource, built once per request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockKeys {
    /// The lock key: its value is the holder's token.
    pub lock: String,
    /// The fence hash, see the module doc.
    pub fence: String,
    /// The pub/sub channel of release notices.
    pub channel: String,
    /// The waiter marker: present while some replica has a waiter queued
    /// for the resource (set by its refused attempts, expiring by itself).
    pub waiters: String,
}

impl LockKeys {
    /// Keys for `resource` under `prefix`.
    pub fn new(prefix: &str, resource: &str) -> LockKeys {
        LockKeys {
            lock: format!("{prefix}lock:{resource}"),
            fence: format!("{prefix}fence:{resource}"),
            channel: release_channel(prefix),
            waiters: format!("{prefix}waiters:{resource}"),
        }
    }
}

/// The pub/sub channel on which releases are announced under `prefix`.
pub(crate) fn release_channel(prefix: &str) -> String {
    format!("{prefix}released")
}

/// The master's horizon key under `prefix`: its expiry covers every lock
/// written to the master (see `crate::node::horizon`).
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
        assert_eq!(k.waiters, "redlock:waiters:orders/42");
        assert_eq!(horizon_key("redlock:"), "redlock:horizon");
    }
}
