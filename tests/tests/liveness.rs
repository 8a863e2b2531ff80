//! A client that stops showing signs of life loses its session's lock: the
//! daemon's HTTP/2 keepalive PINGs go unanswered by a frozen process (its
//! kernel still answers TCP), the connection is closed, and the session's
//! lock is released, within `keepalive_interval + keepalive_timeout`.

mod common;

use common::ctl::*;
use common::*;
use redlockd_testkit::masters::Flavor;
use std::process::Stdio;
use std::time::Duration;
use tokio::time::Instant;

/// A `redlockctl run` holding a lock through Hold is frozen with SIGSTOP:
/// a waiter gets the lock within the keepalive bound, not never.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frozen_client_loses_its_session_lock() {
    let h = Harness::start(Flavor::Valkey).await;
    let frozen = FrozenHolder::start(&h).await;
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
    let frozen = FrozenHolder::start(&h).await;
    let mut client = h.client().await;
    let refused = acquire(&mut client, "frozen/job", 2_000, 8_000).await;
    frozen.end().await;
    let status = refused.expect_err("the frozen holder kept its lock");
    assert_eq!(status.code(), tonic::Code::Aborted, "{status:?}");
}

/// A `redlockctl run` holding `frozen/job` (ttl 2 s) through Hold, frozen
/// with SIGSTOP once the lock is on a majority of masters.
struct FrozenHolder {
    process: tokio::process::Child,
    pid: nix::unistd::Pid,
    since: Instant,
}

impl FrozenHolder {
    async fn start(h: &Harness) -> FrozenHolder {
        let mut holder = redlockctl(
            h.daemons[0].addr,
            &["run", "frozen/job", "--ttl", "2s", "--", "sleep", "30"],
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
