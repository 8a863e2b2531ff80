//! A client that stops showing signs of life loses its session's lock: the
//! daemon's HTTP/2 keepalive PINGs go unanswered by a frozen process (its
//! kernel still answers TCP), the connection is closed, and the session's
//! lock is no longer extended. It passes on once the validity the client
//! was last told has run out, and no earlier: after
//! `keepalive_interval + keepalive_timeout` when that validity was shorter.

mod common;

use common::ctl::*;
use common::*;
use fred::prelude::Value;
use redlockd_testkit::masters::Flavor;
use std::process::Stdio;
use std::time::Duration;
use tokio::time::Instant;

/// A `redlockctl run` holding a lock through Hold is frozen with SIGSTOP:
/// a waiter gets the lock within the keepalive bound, not never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_client_loses_its_session_lock() {
    let h = Harness::start(Flavor::Valkey).await;
    let frozen = FrozenHolder::start(&h, "2s").await;
    let mut client = h.client().await;
    // Without client liveness the daemon would extend the frozen holder's
    // lock forever, and this wait would end ABORTED (the test below).
    let granted = acquire(&mut client, "frozen/job", 2_000, 20_000).await;
    let passed_on = frozen.since.elapsed();
    frozen.end().await;
    let lock = granted.expect("the frozen client's lock passed on");
    println!("frozen client's lock passed on {passed_on:?} after SIGSTOP (keepalive 1 s + 2 s)");
    release(&mut client, &lock).await.expect("release");
}

/// The counterfactual: with the keepalive PINGs 10 minutes apart, the same
/// frozen holder keeps its lock (the daemon extends it, as it cannot tell a
/// frozen client from a busy one) through a wait of 8 s, well past the 3 s
/// the default keepalive takes. So the keepalive is what passes the lock on
/// above, not the ttl.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_keepalive_a_frozen_client_keeps_its_lock() {
    let h = Harness::start_with(Flavor::Valkey, |c| {
        c.server.keepalive_interval = Duration::from_secs(600);
        c.server.keepalive_timeout = Duration::from_secs(600);
    })
    .await;
    let frozen = FrozenHolder::start(&h, "2s").await;
    let mut client = h.client().await;
    let refused = acquire(&mut client, "frozen/job", 2_000, 8_000).await;
    frozen.end().await;
    let status = refused.expect_err("the frozen holder kept its lock");
    assert_eq!(status.code(), tonic::Code::Aborted, "{status:?}");
}

/// A frozen client whose lock's validity outlasts the keepalive bound: the
/// daemon closes its connection after 3 s, but the validity its last
/// `acquired` or `extended` told it still runs, and a paused process that
/// resumes may act on it without hearing from the daemon first. So the
/// lock passes on only after its keys, as last extended, expired on a
/// quorum of masters (the told validity ends before that, by the drift
/// allowance and the extension's round trip), not at 3 s.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_clients_lock_outlives_the_keepalive_bound() {
    let h = Harness::start(Flavor::Valkey).await;
    let frozen = FrozenHolder::start(&h, "9s").await;
    // The lock's expiry on each master at the freeze; no extension comes
    // after it (the frozen client's connection is closed unanswered).
    let mut expiries = Vec::new();
    for i in 0..5 {
        let key = "redlock:lock:frozen/job";
        if let Value::Integer(ms) = h.raw(i, "PTTL", vec![key.into()]).await {
            if ms > 0 {
                expiries.push(frozen.since + Duration::from_millis(ms as u64));
            }
        }
    }
    expiries.sort();
    expiries.reverse();
    assert!(expiries.len() >= 3, "held on a quorum: {expiries:?}");
    // The told validity ends no earlier than the third-latest expiry less
    // the drift allowance (1% of 9 s + 2 ms) and a margin for the PTTLs'
    // own round trips.
    let told_end = expiries[2] - Duration::from_millis(92 + 50);
    let mut client = h.client().await;
    let granted = acquire(&mut client, "frozen/job", 2_000, 20_000).await;
    let (at, since) = (Instant::now(), frozen.since);
    frozen.end().await;
    let lock = granted.expect("the frozen client's lock passed on");
    println!(
        "frozen client's lock passed on {:?} after SIGSTOP; its told validity ended \
         {:?} after it at the earliest",
        at - since,
        told_end.saturating_duration_since(since)
    );
    assert!(
        at >= told_end,
        "granted {:?} before the frozen holder's told validity ended",
        told_end - at
    );
    release(&mut client, &lock).await.expect("release");
}

/// A client cut off by a partition (a proxy between it and the daemon
/// stops passing anything, both ways): the daemon closes the silent
/// connection after its keepalive bound, and the lock passes on once the
/// validity the client was last told has run out, as for a frozen client:
/// the client does not know yet that its connection is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partitioned_clients_lock_lasts_its_told_validity() {
    let h = Harness::start(Flavor::Valkey).await;
    let proxy = ctl::Proxy::start(h.daemons[0].addr).await.expect("proxy");
    let mut cut = redlockd_testkit::client::connect(proxy.addr())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let (_requests, _events, lock) = hold(&mut cut, "partitioned", 6_000, 0).await;
    let told_end = Instant::now()
        + Duration::from_millis(lock.validity.map_or(0, |v| {
            u64::try_from(v.seconds * 1_000 + i64::from(v.nanos) / 1_000_000).unwrap_or(0)
        }));
    proxy.freeze_existing();
    let mut other = h.client().await;
    let granted = acquire(&mut other, "partitioned", 1_000, 20_000)
        .await
        .expect("the lock passed on");
    let at = Instant::now();
    println!(
        "partitioned client's lock passed on {:?} after its first validity ended",
        at - told_end
    );
    assert!(
        at >= told_end,
        "granted {:?} inside the told validity",
        told_end - at
    );
    release(&mut other, &granted).await.expect("release");
}

/// A `redlockctl run` holding `frozen/job` (with `ttl`) through Hold,
/// frozen with SIGSTOP once the lock is on a majority of masters.
struct FrozenHolder {
    process: tokio::process::Child,
    pid: nix::unistd::Pid,
    since: Instant,
}

impl FrozenHolder {
    async fn start(h: &Harness, ttl: &str) -> FrozenHolder {
        let mut holder = redlockctl(
            h.daemons[0].addr,
            &["run", "frozen/job", "--ttl", ttl, "--", "sleep", "30"],
        );
        holder.stdout(Stdio::null()).stderr(Stdio::null());
        let process = holder.spawn().expect("start redlockctl run");
        // Looked at on the masters, so that the probe never takes the lock itself.
        eventually(
            Duration::from_secs(10),
            "redlockctl holds the lock",
            || async {
                let mut on = 0;
                for i in 0..5 {
                    on += usize::from(h.lock_value(i, "frozen/job").await.is_some());
                }
                on >= 3
            },
        )
        .await;
        let pid = nix::unistd::Pid::from_raw(process.id().expect("running") as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).expect("SIGSTOP");
        FrozenHolder {
            process,
            pid,
            since: Instant::now(),
        }
    }

    /// Kills the frozen holder.
    async fn end(mut self) {
        let _ = nix::sys::signal::kill(self.pid, nix::sys::signal::Signal::SIGKILL);
        let _ = nix::sys::signal::kill(self.pid, nix::sys::signal::Signal::SIGCONT);
        let _ = self.process.wait().await;
    }
}
