//! Which accepted connections may stay: at most `limits.max_connections`
//! open at once, and at most `limits.max_connections_per_peer` from one IP
//! address. Pure counting, no sockets, so it is unit-tested directly.

use super::heard::Heard;
use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use tokio::time::Instant;

/// Open streams of one connection, and when the last one ended: what the
/// idle timeout (`conn::streams`) looks at; and when its client was last
/// heard from, which a session whose stream ended looks at
/// ([`super::heard`]).
#[derive(Debug)]
pub(crate) struct Activity {
    state: Mutex<(usize, Instant)>,
    /// Moved by the connection's reads (`conn::accept::Conn`).
    pub(crate) heard: Heard,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            state: Mutex::new((0, Instant::now())),
            heard: Heard::new(),
        }
    }

    /// A stream (a gRPC call, a gateway request) starts on the connection:
    /// it counts as active until the returned guard is dropped.
    pub(crate) fn open_stream(self: &Arc<Self>) -> OpenStream {
        self.stream_opened();
        OpenStream(Arc::clone(self))
    }

    /// A stream (call) started on the connection.
    fn stream_opened(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.0 += 1;
        state.1 = Instant::now();
    }

    /// A stream ended.
    fn stream_closed(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.0 = state.0.saturating_sub(1);
        state.1 = Instant::now();
    }

    /// When the connection counts as idle since, or `None` while a stream
    /// is open.
    pub(crate) fn idle_since(&self) -> Option<Instant> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        (state.0 == 0).then_some(state.1)
    }
}

/// The connection a session's stream came on, as the session sees it:
/// when its client was last heard from ([`super::heard`]).
#[derive(Debug, Clone)]
pub(crate) struct ClientSocket(Arc<Activity>);

impl ClientSocket {
    /// The socket of the connection `activity` counts.
    pub(crate) fn of(activity: &Arc<Activity>) -> ClientSocket {
        ClientSocket(Arc::clone(activity))
    }

    /// How long ago its client was last heard from.
    pub(crate) fn silent_for(&self) -> std::time::Duration {
        self.0.heard.silent_for()
    }
}

/// One open stream of a connection ([`Activity::open_stream`]): while it
/// lives, the idle timeout (`server.idle_timeout`) never cuts the
/// connection, however long the call waits. The one guard of both the gRPC
/// calls (`conn::streams`) and the HTTP gateway's requests (`gateway`).
#[derive(Debug)]
pub(crate) struct OpenStream(Arc<Activity>);

impl Drop for OpenStream {
    fn drop(&mut self) {
        self.0.stream_closed();
    }
}

/// Why a connection was refused (the label of
/// `redlock_connections_refused_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// `limits.max_connections` reached.
    Total,
    /// `limits.max_connections_per_peer` reached for the peer's address.
    PerPeer,
}

impl Refused {
    /// The metric label.
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Refused::Total => "max_connections",
            Refused::PerPeer => "max_connections_per_peer",
        }
    }
}

#[derive(Debug, Default)]
struct Counts {
    total: usize,
    per_peer: HashMap<IpAddr, usize>,
    /// Every open connection by its peer address and port, for the stream
    /// layer to find the connection a request came on.
    open: HashMap<SocketAddr, Arc<Activity>>,
}

/// The connection counts, shared by the accept loop, every admitted
/// connection (which gives its place back when dropped) and the stream
/// layer.
#[derive(Debug, Clone)]
pub(crate) struct Gate {
    max: usize,
    max_per_peer: usize,
    counts: Arc<Mutex<Counts>>,
}

/// An admitted connection's place; given back on drop.
#[derive(Debug)]
pub(crate) struct Admitted {
    peer: SocketAddr,
    counts: Arc<Mutex<Counts>>,
    /// The connection's streams.
    pub(crate) activity: Arc<Activity>,
}

impl Gate {
    /// At most `max` connections, `max_per_peer` per peer IP address.
    pub(crate) fn new(max: usize, max_per_peer: usize) -> Gate {
        Gate {
            max,
            max_per_peer,
            counts: Arc::default(),
        }
    }

    /// Takes a place for a connection from `peer`, or says why not.
    pub(crate) fn admit(&self, peer: SocketAddr) -> Result<Admitted, Refused> {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        if counts.total >= self.max {
            return Err(Refused::Total);
        }
        let from_peer = counts.per_peer.get(&peer.ip()).copied().unwrap_or(0);
        if from_peer >= self.max_per_peer {
            return Err(Refused::PerPeer);
        }
        counts.total += 1;
        *counts.per_peer.entry(peer.ip()).or_insert(0) += 1;
        let activity = Arc::new(Activity::new());
        counts.open.insert(peer, Arc::clone(&activity));
        Ok(Admitted {
            peer,
            counts: Arc::clone(&self.counts),
            activity,
        })
    }

    /// The streams of the open connection from `peer` (address and port).
    pub(crate) fn activity(&self, peer: SocketAddr) -> Option<Arc<Activity>> {
        let counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        counts.open.get(&peer).cloned()
    }

    /// Connections open now.
    #[cfg(test)]
    pub(crate) fn open(&self) -> usize {
        self.counts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .total
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        counts.total = counts.total.saturating_sub(1);
        let ip = self.peer.ip();
        if let Some(n) = counts.per_peer.get_mut(&ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.per_peer.remove(&ip);
            }
        }
        counts.open.remove(&self.peer);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    /// The per-peer cap refuses one address while others still get in; the
    /// global cap refuses everyone; places come back on drop.
    #[test]
    fn caps_and_release() {
        let gate = Gate::new(3, 2);
        let a1 = gate.admit(addr("10.0.0.1:1")).unwrap();
        let _a2 = gate.admit(addr("10.0.0.1:2")).unwrap();
        assert_eq!(
            gate.admit(addr("10.0.0.1:3")).unwrap_err(),
            Refused::PerPeer
        );
        let _b1 = gate.admit(addr("10.0.0.2:1")).unwrap();
        assert_eq!(gate.admit(addr("10.0.0.3:1")).unwrap_err(), Refused::Total);
        assert_eq!(gate.open(), 3);
        assert!(gate.activity(addr("10.0.0.1:1")).is_some());
        drop(a1);
        assert!(gate.activity(addr("10.0.0.1:1")).is_none());
        assert_eq!(gate.open(), 2);
        assert!(gate.admit(addr("10.0.0.1:4")).is_ok());
    }

    /// A connection is idle only while no stream is open.
    #[test]
    fn idle_only_without_streams() {
        let gate = Gate::new(1, 1);
        let a = gate.admit(addr("10.0.0.1:1")).unwrap();
        assert!(a.activity.idle_since().is_some());
        let first = a.activity.open_stream();
        let second = a.activity.open_stream();
        assert!(a.activity.idle_since().is_none());
        drop(first);
        assert!(a.activity.idle_since().is_none());
        drop(second);
        assert!(a.activity.idle_since().is_some());
    }
}
