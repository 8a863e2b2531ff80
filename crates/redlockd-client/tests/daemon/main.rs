//! The client against real masters and a real daemon: the test kit's
//! harness (five Valkey masters on free loopback ports, a daemon served in
//! process by `redlockd::run`), its fault proxy and its certificates. One
//! test binary (one link), a module per subject.
//!
//! Run with `source .venv/redlockd-env` first: the tests fail, never skip,
//! when `valkey-server` is missing.

mod example;
mod kinds;
mod lifecycle;
mod reattach;
mod security;
mod sessions;
mod slow;
mod unanswered;

use redlockd_client::{Client, Error};
use redlockd_testkit::harness::Harness;
use redlockd_testkit::masters::Flavor;
use std::time::{Duration, Instant};

/// Five Valkey masters, one daemon, and a client of it.
async fn start() -> (Harness, Client) {
    let h = Harness::start(Flavor::Valkey).await;
    let c = client_of(&h, 0).await;
    (h, c)
}

/// A client of the harness's daemon `i`.
async fn client_of(h: &Harness, i: usize) -> Client {
    Client::connect(h.daemons[i].addr.to_string())
        .await
        .expect("connect to the test daemon")
}

/// Acquires `resource` at once (no wait), trying again every 10 ms while it
/// is held, and releases it; fails the test after `limit`. Returns how long
/// it took. A lock left behind for its (much longer) ttl fails it.
async fn acquirable_within(c: &Client, resource: &str, limit: Duration) -> Duration {
    let started = Instant::now();
    loop {
        match c.acquire(resource, Duration::from_secs(5)).await {
            Ok(lock) => {
                c.release(&lock).await.expect("release");
                return started.elapsed();
            }
            Err(Error::Held(_)) if started.elapsed() < limit => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("{resource} not acquirable within {limit:?}: {e}"),
        }
    }
}
