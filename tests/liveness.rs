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
    let mut holder = redlockctl(
        h.daemons[0].addr,
        &["run", "frozen/job", "--ttl", "2s", "--", "sleep", "20"],
    );
    holder.stdout(Stdio::null()).stderr(Stdio::null());
    let mut holder = holder.spawn().expect("start redlockctl run");
    let mut client = h.client().await;
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
    let pid = nix::unistd::Pid::from_raw(holder.id().expect("running") as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).expect("SIGSTOP");
    let frozen = Instant::now();
    // Without client liveness the daemon would extend the frozen holder's
    // lock forever, and this wait would end ABORTED.
    let granted = acquire(&mut client, "frozen/job", 2_000, 20_000).await;
    let passed_on = frozen.elapsed();
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT);
    let _ = holder.wait().await;
    let lock = granted.expect("the frozen client's lock passed on");
    println!("frozen client's lock passed on {passed_on:?} after SIGSTOP (keepalive 1 s + 2 s)");
    release(&mut client, &lock).await.expect("release");
}
