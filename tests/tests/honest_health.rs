//! Honest health: a master counts as up only while it answers.
//! Three of five masters hung with SIGSTOP keep their TCP connections open,
//! yet the daemon's health turns NOT_SERVING within about a second and
//! `redlock_node_up` says which masters are gone; resumed with SIGCONT,
//! they count again.

mod common;

use common::process::{free_addr, DaemonCommand};
use common::*;
use redlockd_testkit::masters::Flavor;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

against_both_servers!(hung_masters_turn_health_not_serving);

/// Generous bound for each change to show (the goal is about a second; the
/// machine is shared, so the figure is printed, not asserted tightly).
const LIMIT: Duration = Duration::from_secs(5);

/// SIGCONTs the stopped masters when dropped, so that a failing assertion
/// leaves no hung process behind.
struct Resume(Vec<u32>);

impl Drop for Resume {
    fn drop(&mut self) {
        for &pid in &self.0 {
            signal("-CONT", pid);
        }
    }
}

fn signal(which: &str, pid: u32) {
    let status = std::process::Command::new("kill")
        .args([which, &pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success(), "kill {which} {pid}");
}

/// `redlock_node_up` of each master, in the order of `ports` (`None`: not
/// exported yet).
fn node_up(metrics: SocketAddr, ports: &[u16]) -> Vec<Option<f64>> {
    let text = redlockd_testkit::metrics::scrape(metrics).unwrap_or_default();
    ports
        .iter()
        .map(|port| {
            let label = format!("node=\"127.0.0.1:{port}\"");
            text.lines()
                .filter(|line| line.starts_with("redlock_node_up{") && line.contains(&label))
                .find_map(|line| line.rsplit(' ').next()?.parse().ok())
        })
        .collect()
}

/// Polls every 20 ms until `condition` holds; how long it took, or a
/// failure naming `what` after [`LIMIT`].
async fn within<F, Fut>(what: &str, mut condition: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !condition().await {
        assert!(started.elapsed() < LIMIT, "{what}: not within {LIMIT:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    started.elapsed()
}

/// Three masters SIGSTOPped (connections open, no answers): health
/// NOT_SERVING and their `redlock_node_up` 0; SIGCONT: SERVING and 1 again.
async fn hung_masters_turn_health_not_serving(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let metrics = free_addr().expect("a free port");
    let daemon = DaemonCommand::workspace(&h.masters.urls())
        .expect("redlockd binary")
        .set("redlock.node_timeout", "50ms")
        .set("metrics.enabled", true)
        .set("metrics.listen", metrics)
        .spawn()
        .expect("start redlockd");
    let channel = client::endpoint(daemon.addr)
        .expect("endpoint")
        .connect_lazy();
    client::wait_serving(channel.clone(), Duration::from_secs(10))
        .await
        .expect("SERVING at start");
    let ports: Vec<u16> = (0..5).map(|i| h.masters.port(i)).collect();
    let all_up = vec![Some(1.0); 5];
    within("every master up in redlock_node_up", || async {
        node_up(metrics, &ports) == all_up
    })
    .await;

    let stopped: Vec<u32> = (0..3).map(|i| h.masters.pid(i).expect("running")).collect();
    for &pid in &stopped {
        signal("-STOP", pid);
    }
    let resume = Resume(stopped);
    let not_serving = within("NOT_SERVING with three masters hung", || {
        let channel = channel.clone();
        async move { !client::serving(channel, client::LOCK_SERVICE).await }
    })
    .await;
    let expected = vec![Some(0.0), Some(0.0), Some(0.0), Some(1.0), Some(1.0)];
    let gauge = within("redlock_node_up 0 for the hung masters only", || async {
        node_up(metrics, &ports) == expected
    })
    .await;
    // And it stays so while they are hung (not a momentary blip).
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!client::serving(channel.clone(), client::LOCK_SERVICE).await);
    assert_eq!(node_up(metrics, &ports), expected);

    drop(resume);
    let serving = within("SERVING again once resumed", || {
        let channel = channel.clone();
        async move { client::serving(channel, client::LOCK_SERVICE).await }
    })
    .await;
    within("every master up again", || async {
        node_up(metrics, &ports) == all_up
    })
    .await;
    println!(
        "{flavor}: three masters SIGSTOPped: NOT_SERVING after {not_serving:?}, \
         redlock_node_up 0 {gauge:?} later; SIGCONT: SERVING after {serving:?}"
    );
    daemon.stop(Duration::from_secs(5)).await.expect("stops");
}
