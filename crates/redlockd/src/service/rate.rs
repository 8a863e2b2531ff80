//! Flood protection: a token bucket per identity ([`RateLimits`]) and a cap
//! on calls in progress per client connection ([`ConnectionCalls`]). Both
//! answer at once (RESOURCE_EXHAUSTED) instead of queueing, so a flooding
//! client slows nobody else down.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use tokio::time::Instant;

/// Identities remembered at most; past it, full buckets are forgotten
/// (a forgotten bucket is a full one, so nothing is lost).
const MAX_BUCKETS: usize = 10_000;

/// One identity's bucket.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// Token buckets, one per identity: `rate` tokens per second, at most
/// `burst` saved up; a call takes one.
#[derive(Debug)]
pub(crate) struct RateLimits {
    rate: u32,
    burst: u32,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl RateLimits {
    /// `rate` calls per second with bursts of `burst`; rate 0: no limit.
    pub(crate) fn new(rate: u32, burst: u32) -> RateLimits {
        RateLimits {
            rate,
            burst,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes a token from `key`'s bucket; `Err(rate)` when it is empty.
    pub(crate) fn take(&self, key: &str) -> Result<(), u32> {
        if self.rate == 0 {
            return Ok(());
        }
        let now = Instant::now();
        let burst = f64::from(self.burst);
        let rate = f64::from(self.rate);
        // A poisoned lock only means another call panicked mid-update; the
        // map of numbers is still usable.
        let mut buckets = self.buckets.lock().unwrap_or_else(PoisonError::into_inner);
        if buckets.len() >= MAX_BUCKETS && !buckets.contains_key(key) {
            buckets.retain(|_, b| {
                b.tokens + now.duration_since(b.updated).as_secs_f64() * rate < burst
            });
        }
        let bucket = buckets.entry(key.to_owned()).or_insert(Bucket {
            tokens: burst,
            updated: now,
        });
        let refill = now.duration_since(bucket.updated).as_secs_f64() * rate;
        bucket.tokens = (bucket.tokens + refill).min(burst);
        bucket.updated = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(self.rate)
        }
    }
}

/// Calls in progress per client connection (told apart by the peer's
/// address and port).
#[derive(Debug, Default)]
pub(crate) struct ConnectionCalls {
    max: usize,
    open: Arc<Mutex<HashMap<SocketAddr, usize>>>,
}

/// One call in progress; counted until dropped.
#[derive(Debug)]
pub(crate) struct CallSlot {
    peer: Option<SocketAddr>,
    open: Arc<Mutex<HashMap<SocketAddr, usize>>>,
}

impl ConnectionCalls {
    /// At most `max` calls at once per connection; 0: no limit.
    pub(crate) fn new(max: usize) -> ConnectionCalls {
        ConnectionCalls {
            max,
            open: Arc::default(),
        }
    }

    /// Counts one more call on `peer`'s connection; `Err(max)` when full.
    /// A call without a known peer (a handler called directly) is not
    /// limited.
    ///
    /// `max` is also announced as HTTP/2's concurrent-stream limit, which
    /// bounds the calls whose streams are open (a well-behaved client
    /// queues the rest; h2 refuses a stream past it). A call is counted
    /// here until its work is done, which can outlast its stream: a `Hold`
    /// session still releasing its lock after the client closed the stream.
    /// A client that opens its next stream at that moment is within its
    /// limit, so the refusal here comes only at twice `max`: for calls that
    /// pile up winding down, not for a client that respects the limit.
    pub(crate) fn enter(&self, peer: Option<SocketAddr>) -> Result<CallSlot, usize> {
        let peer = peer.filter(|_| self.max > 0);
        if let Some(peer) = peer {
            let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
            let count = open.entry(peer).or_insert(0);
            if *count >= self.max.saturating_mul(2) {
                // Counted here, where the refusal is decided, like the
                // other refusals (`Denied::counted`).
                crate::metrics::auth_denied(
                    super::denied::Denied::TooManyCalls { max: self.max }.reason(),
                );
                return Err(self.max);
            }
            *count += 1;
        }
        Ok(CallSlot {
            peer,
            open: Arc::clone(&self.open),
        })
    }
}

impl Drop for CallSlot {
    fn drop(&mut self) {
        let Some(peer) = self.peer else { return };
        let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&peer) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&peer);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A burst passes, the next call is refused, and time refills.
    #[tokio::test(start_paused = true)]
    async fn token_bucket() {
        let limits = RateLimits::new(10, 3);
        for _ in 0..3 {
            assert!(limits.take("a").is_ok());
        }
        assert_eq!(limits.take("a"), Err(10));
        assert!(limits.take("b").is_ok(), "buckets are per identity");
        tokio::time::advance(Duration::from_millis(100)).await;
        assert!(limits.take("a").is_ok());
        assert!(limits.take("a").is_err());
        assert!(RateLimits::new(0, 0).take("a").is_ok(), "0 is off");
    }

    /// Slots are per connection and given back on drop; past the stream
    /// limit, calls winding down are tolerated up to twice it.
    #[test]
    fn connection_slots() {
        let calls = ConnectionCalls::new(2);
        let peer: SocketAddr = "127.0.0.1:1000".parse().unwrap();
        let other: SocketAddr = "127.0.0.1:1001".parse().unwrap();
        let a = calls.enter(Some(peer)).unwrap();
        let _b = calls.enter(Some(peer)).unwrap();
        let _c = calls.enter(Some(peer)).unwrap();
        let _d = calls.enter(Some(peer)).unwrap();
        assert_eq!(calls.enter(Some(peer)).unwrap_err(), 2);
        assert!(calls.enter(Some(other)).is_ok());
        drop(a);
        assert!(calls.enter(Some(peer)).is_ok());
        assert!(calls.enter(None).is_ok());
    }
}
