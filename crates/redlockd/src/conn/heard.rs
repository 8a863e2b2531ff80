//! When a client connection last heard from its client, for a session
//! whose stream ended to tell a client that ended it from one that went
//! silent.
//!
//! Every byte a client sends and the end of its stream (FIN) reach the
//! daemon as a read of its socket; so does a `RST_STREAM` that cancels one
//! call, and the acknowledgement of each keepalive PING. A reset (RST) is
//! not counted: a NAT or load balancer may send one for a client cut off
//! behind it.
//! A client process that exits, is killed, or cancels its stream is heard
//! at the moment it ends the stream (unless its kernel resets the
//! connection, with data it never read: then it counts as silent, and its
//! lock runs out its validity). A frozen process (SIGSTOP, a
//! stop-the-world pause, a suspended VM) or one cut off by a partition
//! sends nothing, and its connection ends when the daemon closes it for a
//! PING unanswered for `server.keepalive_timeout` (or TCP keepalive gives
//! up): by then it has not been heard from for that long. Such a client
//! may resume and act on the validity it was last told
//! (`service::hold`, through `super::gate::ClientSocket`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// The last time a connection's socket gave a read: nanoseconds after the
/// connection was admitted.
#[derive(Debug)]
pub(crate) struct Heard {
    admitted: Instant,
    last_ns: AtomicU64,
}

impl Heard {
    /// Heard from now (the connection was just admitted).
    pub(crate) fn new() -> Heard {
        Heard {
            admitted: Instant::now(),
            last_ns: AtomicU64::new(0),
        }
    }

    /// The client was heard from now: a read gave data or the end of the
    /// stream.
    pub(crate) fn now(&self) {
        let ns = self.admitted.elapsed().as_nanos();
        self.last_ns
            .fetch_max(u64::try_from(ns).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    /// How long ago the client was last heard from.
    pub(crate) fn silent_for(&self) -> Duration {
        let last = Duration::from_nanos(self.last_ns.load(Ordering::Relaxed));
        self.admitted.elapsed().saturating_sub(last)
    }
}

#[cfg(test)]
mod tests {
    use super::Heard;
    use std::time::Duration;

    /// Silence counts from the last read, and a read resets it.
    #[tokio::test(start_paused = true)]
    async fn silence_counts_from_the_last_read() {
        let heard = Heard::new();
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(heard.silent_for(), Duration::from_secs(3));
        heard.now();
        assert_eq!(heard.silent_for(), Duration::ZERO);
        tokio::time::advance(Duration::from_millis(250)).await;
        assert_eq!(heard.silent_for(), Duration::from_millis(250));
    }
}
