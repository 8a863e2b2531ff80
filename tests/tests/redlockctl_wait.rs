//! `redlockctl --wait forever`: it outlasts the daemon's `max_wait`
//! (waiting in rounds of it), rides out an unavailable or unreachable
//! daemon with growing pauses, and stops cleanly on SIGINT or SIGTERM.

mod common;

use common::ctl::*;
use common::*;
use redlockd::config::Config;
use redlockd_testkit::masters::Flavor;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

/// Generous bound for one redlockctl call on a busy machine.
const CALL: Duration = Duration::from_secs(30);

/// Runs `command` and returns its output (the test fails past [`CALL`]).
async fn output(command: tokio::process::Command) -> Output {
    output_within(command, CALL).await
}

/// A daemon with `redlock.max_wait` = 1 s.
fn short_max_wait(config: &mut Config) {
    config.redlock.max_wait = Duration::from_secs(1);
}

/// `run --wait forever` while another client holds the lock for well over
/// the daemon's max_wait: redlockctl keeps waiting in rounds of max_wait,
/// and runs the command once the holder releases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_forever_outlasts_max_wait() {
    let h = Harness::start_with(Flavor::Valkey, short_max_wait).await;
    let addr = h.daemons[0].addr;
    let out = output(redlockctl(addr, &["acquire", "forever/1", "--ttl", "60s"])).await;
    assert_exit(&out, 0);
    let token = assignment(&out, "REDLOCK_TOKEN");

    let script = r#"echo "granted $REDLOCK_FENCE""#;
    let args = [
        "run",
        "forever/1",
        "--wait",
        "forever",
        "--",
        "sh",
        "-c",
        script,
    ];
    let started = Instant::now();
    let mut waiter = redlockctl(addr, &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdout = lines_of(waiter.stdout.take().expect("stdout"), "waiter");
    let mut stderr = lines_of(waiter.stderr.take().expect("stderr"), "waiter");
    line_containing(
        &mut stderr,
        "waiting in rounds of 1s",
        Duration::from_secs(20),
    )
    .await;
    // Held for three rounds of max_wait after the waiter learnt it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        waiter.try_wait().expect("try_wait").is_none(),
        "the waiter gave up"
    );
    assert!(
        stdout.try_recv().is_err(),
        "the command ran while the lock was held"
    );

    let held_for = started.elapsed();
    let out = output(redlockctl(addr, &["release", "forever/1", &token])).await;
    assert_exit(&out, 0);
    let released = Instant::now();
    line_containing(&mut stdout, "granted", Duration::from_secs(20)).await;
    let status = exit_within(&mut waiter, CALL).await;
    assert_eq!(status.code(), Some(0));
    println!(
        "waited {:?} (max_wait 1s); granted {:?} after the release",
        held_for,
        released.elapsed()
    );
}

/// SIGINT while `acquire --wait forever` waits: exit 130 at once, and the
/// waiter leaves nothing locked (the holder's lock is intact, and once it
/// is released the resource can be taken, well before the 60 s ttl the
/// waiter asked for would run out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_stops_a_forever_wait() {
    let h = Harness::start_with(Flavor::Valkey, short_max_wait).await;
    let addr = h.daemons[0].addr;
    let out = output(redlockctl(addr, &["acquire", "forever/2", "--ttl", "60s"])).await;
    assert_exit(&out, 0);
    let token = assignment(&out, "REDLOCK_TOKEN");

    let args = ["acquire", "forever/2", "--ttl", "60s", "--wait", "forever"];
    let mut waiter = redlockctl(addr, &args)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stderr = lines_of(waiter.stderr.take().expect("stderr"), "waiter");
    line_containing(
        &mut stderr,
        "waiting in rounds of 1s",
        Duration::from_secs(20),
    )
    .await;
    let pid = nix::unistd::Pid::from_raw(waiter.id().expect("pid") as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).expect("SIGINT");
    let status = exit_within(&mut waiter, Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(130));
    line_containing(&mut stderr, "interrupted by SIGINT", Duration::from_secs(5)).await;

    let out = output(redlockctl(addr, &["validate", "forever/2", &token])).await;
    assert_exit(&out, 0);
    let out = output(redlockctl(addr, &["release", "forever/2", &token])).await;
    assert_exit(&out, 0);
    // The daemon may still be dropping the cancelled waiter (which, woken
    // by the release, could take and at once give back the lock): a short
    // wait covers that; a lock the waiter left behind would last 60 s.
    let args = ["acquire", "forever/2", "--ttl", "1s", "--wait", "5s"];
    let out = output(redlockctl(addr, &args)).await;
    assert_exit(&out, 0);
}

/// `--wait forever` with three of five masters down: each round ends
/// UNAVAILABLE and redlockctl tries again after a pause; once the masters
/// are back it is granted the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_forever_outlasts_unavailable() {
    let mut h = Harness::start_with(Flavor::Valkey, short_max_wait).await;
    let addr = h.daemons[0].addr;
    for i in 2..5 {
        h.masters.stop(i).expect("stop a master");
    }
    let args = ["acquire", "forever/3", "--ttl", "10s", "--wait", "forever"];
    let mut waiter = redlockctl(addr, &args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stdout = lines_of(waiter.stdout.take().expect("stdout"), "waiter");
    let mut stderr = lines_of(waiter.stderr.take().expect("stderr"), "waiter");
    for _ in 0..2 {
        line_containing(&mut stderr, "UNAVAILABLE", Duration::from_secs(20)).await;
    }
    for i in 2..5 {
        h.masters.restart(i).expect("restart a master");
    }
    line_containing(&mut stdout, "REDLOCK_TOKEN=", Duration::from_secs(30)).await;
    let status = exit_within(&mut waiter, CALL).await;
    assert_eq!(status.code(), Some(0));
}

/// `--wait forever` with no daemon listening: the pauses between attempts
/// grow (50-100 ms, then doubling up to 5 s), so redlockctl does not spin;
/// SIGTERM ends it with 143.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_forever_backs_off_from_an_unreachable_daemon() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a port nobody listens on once released");
    let args = ["acquire", "nobody/1", "--ttl", "1s", "--wait", "forever"];
    let started = Instant::now();
    let mut waiter = redlockctl(closed, &args)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stderr = lines_of(waiter.stderr.take().expect("stderr"), "waiter");
    let mut pauses = Vec::new();
    while pauses.len() < 5 {
        let seen = line_containing(&mut stderr, "trying again in", Duration::from_secs(20)).await;
        let line = seen.last().expect("a line");
        let ms: u64 = line
            .rsplit_once("trying again in ")
            .and_then(|(_, rest)| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no pause in {line}"));
        pauses.push(ms);
    }
    let elapsed = started.elapsed();
    let pid = nix::unistd::Pid::from_raw(waiter.id().expect("pid") as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let status = exit_within(&mut waiter, Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(143));
    println!("pauses after 5 refused connections: {pauses:?} ms ({elapsed:?})");
    for (i, ms) in pauses.iter().enumerate() {
        let ceiling = 100u64 << i;
        assert!(
            (ceiling / 2..=ceiling).contains(ms),
            "pause {i}: {ms} ms, expected {}..={ceiling}",
            ceiling / 2
        );
    }
    assert!(
        elapsed >= Duration::from_millis(750),
        "five pauses take >= 750 ms: {elapsed:?}"
    );
}
