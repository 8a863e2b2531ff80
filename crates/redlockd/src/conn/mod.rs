//! Client connections on the gRPC port and the HTTP gateway: how many may
//! be open ([`gate`]), how they are accepted ([`accept`]), their TLS
//! handshake ([`handshake`]), how idle ones are told apart from ones with
//! open streams ([`streams`]), when each last heard from its client
//! ([`heard`]), and how a gRPC connection's answers finishing
//! together share a write ([`write_turn`]).

pub(crate) mod accept;
pub(crate) mod gate;
pub(crate) mod handshake;
pub(crate) mod heard;
pub(crate) mod streams;
pub(crate) mod write_turn;

use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;

/// A log line at most once per period, for events a client can trigger at
/// will (refused connections, failed accepts): the log cannot be flooded.
#[derive(Debug)]
pub(crate) struct Throttled {
    period: Duration,
    state: Mutex<(Option<Instant>, u64)>,
}

impl Throttled {
    /// At most one line per `period`.
    pub(crate) fn new(period: Duration) -> Throttled {
        Throttled {
            period,
            state: Mutex::new((None, 0)),
        }
    }

    /// `Some(skipped)` when a line may be written now (`skipped`: events
    /// not logged since the last line); `None` otherwise.
    pub(crate) fn ready(&self) -> Option<u64> {
        let now = Instant::now();
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match state.0 {
            Some(last) if now.duration_since(last) < self.period => {
                state.1 += 1;
                None
            }
            _ => {
                let skipped = state.1;
                *state = (Some(now), 0);
                Some(skipped)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Throttled;
    use std::time::Duration;

    /// One line per period, with the count of the events in between.
    #[tokio::test(start_paused = true)]
    async fn throttled() {
        let log = Throttled::new(Duration::from_secs(10));
        assert_eq!(log.ready(), Some(0));
        assert_eq!(log.ready(), None);
        assert_eq!(log.ready(), None);
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(log.ready(), Some(2));
    }
}
