//! The `redlockctl` binary against five real masters and a daemon:
//! `run` keeps commands mutually exclusive with growing fences, stops them
//! when the lock is lost, gives up on a busy lock without running them,
//! forwards signals to the whole process group; the single calls' outputs
//! and exit codes.

mod common;

use common::ctl::*;
use common::*;
use redlockd_testkit::masters::Flavor;
use std::time::{Duration, Instant};

against_both_servers!(
    concurrent_runs_never_overlap_and_fences_grow,
    lost_lock_stops_the_command,
    busy_lock_times_out_without_running_the_command,
    sigterm_reaches_the_whole_group_and_releases,
);

/// `run` with a fresh scratch file as the command's log.
const SECTION: &str = r#"echo "start $(date +%s%N) $REDLOCK_FENCE $$" >> "$LOG"; sleep 0.2; echo "end $(date +%s%N) $$" >> "$LOG""#;

/// Two workers, each running `redlockctl run` three times on one resource:
/// the six critical sections never overlap (timestamps the commands wrote)
/// and each sees a larger REDLOCK_FENCE than the one before.
async fn concurrent_runs_never_overlap_and_fences_grow(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let addr = h.daemons[0].addr;
    let dir = Scratch::new("overlap");
    let log = dir.file("log");
    let mut workers = Vec::new();
    for _ in 0..2 {
        let log = log.clone();
        workers.push(tokio::spawn(async move {
            for _ in 0..3 {
                let args = ["run", "shared", "--ttl", "2s", "--wait", "30s", "--"];
                let mut command = redlockctl(addr, &args);
                command.args(["sh", "-c", SECTION]).env("LOG", &log);
                let out = output_within(command, Duration::from_secs(30)).await;
                let stderr = String::from_utf8_lossy(&out.stderr);
                assert_eq!(out.status.code(), Some(0), "{stderr}");
            }
        }));
    }
    for worker in workers {
        worker.await.expect("worker");
    }
    let lines = read_lines(&log);
    assert_eq!(lines.len(), 12, "{lines:#?}");
    let (mut last_end, mut last_fence) = (0u128, 0u64);
    for pair in lines.chunks(2) {
        let start: Vec<&str> = pair[0].split(' ').collect();
        let end: Vec<&str> = pair[1].split(' ').collect();
        assert_eq!((start[0], end[0]), ("start", "end"), "overlap: {lines:#?}");
        assert_eq!(start[3], end[2], "one section's start and end: {lines:#?}");
        let (t0, t1): (u128, u128) = (parse(start[1]), parse(end[1]));
        let fence: u64 = parse(start[2]);
        assert!(t0 >= last_end && t1 >= t0, "sections overlap: {lines:#?}");
        assert!(fence > last_fence, "fences must grow: {lines:#?}");
        (last_end, last_fence) = (t1, fence);
    }
    assert!(h.keys("redlock:lock:shared").await.is_empty(), "released");
}

fn parse<T: std::str::FromStr>(text: &str) -> T {
    text.parse()
        .unwrap_or_else(|_| panic!("not a number: {text}"))
}

/// Three of five masters stopped while the command runs: the command's
/// group gets SIGTERM, and redlockctl exits 80 (the command itself exits 0).
async fn lost_lock_stops_the_command(flavor: Flavor) {
    let mut h = Harness::start(flavor).await;
    let dir = Scratch::new("lost");
    let log = dir.file("log");
    let script = r#"trap 'echo got-term >> "$LOG"; exit 0' TERM; echo ready >> "$LOG"; while :; do sleep 0.05; done"#;
    let args = ["run", "fragile", "--ttl", "1s", "--kill-after", "5s", "--"];
    let mut command = redlockctl(h.daemons[0].addr, &args);
    command.args(["sh", "-c", script]).env("LOG", &log);
    let mut child = command
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stderr = lines_of(child.stderr.take().expect("stderr"), "redlockctl");
    file_has_line(&log, "ready", Duration::from_secs(10)).await;
    let stopped = Instant::now();
    for i in 2..5 {
        h.masters.stop(i).expect("stop a master");
    }
    let status = exit_within(&mut child, Duration::from_secs(10)).await;
    println!(
        "{flavor}: redlockctl exited {:?} after the masters stopped",
        stopped.elapsed()
    );
    assert_eq!(status.code(), Some(80));
    assert!(read_lines(&log).contains(&"got-term".to_owned()));
    line_containing(
        &mut stderr,
        "lost the lock on fragile",
        Duration::from_secs(1),
    )
    .await;
}

/// The resource held elsewhere for longer than --wait: exit 81, and the
/// command never ran; `acquire` exits 81 as well.
async fn busy_lock_times_out_without_running_the_command(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let mut c = h.client().await;
    let held = acquire(&mut c, "busy", 10_000, 0).await.expect("granted");
    let dir = Scratch::new("busy");
    let marker = dir.file("ran");
    let mut command = redlockctl(h.daemons[0].addr, &["run", "busy", "--wait", "300ms", "--"]);
    command.args(["touch", &marker]);
    let began = Instant::now();
    let out = output_within(command, Duration::from_secs(10)).await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(81), "{stderr}");
    assert!(began.elapsed() >= Duration::from_millis(300));
    assert!(stderr.contains("ABORTED"), "{stderr}");
    assert!(!std::path::Path::new(&marker).exists(), "the command ran");
    let args = ["acquire", "busy", "--ttl", "1s", "--wait", "100ms"];
    let out = output_within(
        redlockctl(h.daemons[0].addr, &args),
        Duration::from_secs(10),
    )
    .await;
    assert_eq!(out.status.code(), Some(81));
    assert!(release(&mut c, &held).await.expect("release"), "still ours");
}

/// SIGTERM to redlockctl reaches the whole process group (an inner shell
/// behind the outer one traps it), the outer shell's death by SIGTERM is
/// passed on as 143, and the lock is released.
async fn sigterm_reaches_the_whole_group_and_releases(flavor: Flavor) {
    let h = Harness::start(flavor).await;
    let dir = Scratch::new("sigterm");
    let log = dir.file("log");
    let inner = r#"trap 'echo inner-term >> "$LOG"; exit 0' TERM; echo ready >> "$LOG"; while :; do sleep 0.05; done"#;
    let outer = r#"sh -c "$INNER"; echo outer-survived >> "$LOG""#;
    let mut command = redlockctl(h.daemons[0].addr, &["run", "signalled", "--"]);
    command
        .args(["sh", "-c", outer])
        .env("LOG", &log)
        .env("INNER", inner);
    let mut child = command.spawn().expect("spawn");
    file_has_line(&log, "ready", Duration::from_secs(10)).await;
    assert!(h.keys("redlock:lock:signalled").await.len() >= 3, "held");
    let pid = child.id().expect("running").to_string();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = exit_within(&mut child, Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(143), "the outer shell died of SIGTERM");
    let lines = read_lines(&log);
    assert!(lines.contains(&"inner-term".to_owned()), "{lines:?}");
    assert!(!lines.contains(&"outer-survived".to_owned()), "{lines:?}");
    assert!(
        h.keys("redlock:lock:signalled").await.is_empty(),
        "released"
    );
}

/// The single calls: acquire prints assignments `eval` reads, validate and
/// extend accept the token, release twice says the second time that it was
/// not held, and each outcome has its exit code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_calls_and_their_exit_codes() {
    let h = Harness::start(Flavor::Valkey).await;
    let addr = h.daemons[0].addr;
    let run = |args: &'static [&'static str]| async move {
        let out = output_within(redlockctl(addr, args), Duration::from_secs(10)).await;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status.code(), text)
    };
    let (code, text) = run(&["acquire", "calls", "--ttl", "30s"]).await;
    assert_eq!(code, Some(0), "{text}");
    let value = |key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{key}=")))
            .unwrap_or_else(|| panic!("no {key} in {text}"))
            .to_owned()
    };
    let token = value("REDLOCK_TOKEN");
    assert!(value("REDLOCK_FENCE").parse::<u64>().expect("fence") > 0);
    let with_token = |args: &[&str]| {
        let mut command = redlockctl(addr, args);
        command.arg(&token);
        output_within(command, Duration::from_secs(10))
    };
    assert_eq!(
        with_token(&["validate", "calls"]).await.status.code(),
        Some(0)
    );
    let extended = with_token(&["--json", "extend", "calls", "--ttl", "5s"]).await;
    assert_eq!(extended.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&extended.stdout).contains("\"validity_ms\":"));
    assert_eq!(run(&["acquire", "calls", "--ttl", "1s"]).await.0, Some(81));
    assert_eq!(
        with_token(&["release", "calls"]).await.status.code(),
        Some(0)
    );
    assert_eq!(
        with_token(&["release", "calls"]).await.status.code(),
        Some(82)
    );
    assert_eq!(
        with_token(&["validate", "calls"]).await.status.code(),
        Some(82)
    );
    assert_eq!(run(&["acquire", "calls", "--ttl", "0s"]).await.0, Some(86));
    assert_eq!(
        run(&["acquire", "calls", "--ttl", "soon"]).await.0,
        Some(64)
    );
    let unreachable = run(&["--addr", "127.0.0.1:1", "acquire", "calls", "--ttl", "1s"]);
    assert_eq!(unreachable.await.0, Some(89));
    assert_eq!(
        run(&["run", "calls", "--", "/nonexistent/x"]).await.0,
        Some(127)
    );
}

/// The lock taken away under a running command (its keys deleted): the
/// daemon says `lost`, the group gets SIGTERM within 100 ms, and a command
/// that survives it gets SIGKILL --kill-after later; exit 80.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_lock_kills_a_command_that_ignores_sigterm() {
    let h = Harness::start(Flavor::Valkey).await;
    let dir = Scratch::new("stubborn");
    let log = dir.file("log");
    let script = r#"trap 'echo "term $(date +%s%N)" >> "$LOG"' TERM; echo ready >> "$LOG"; while :; do sleep 0.05; done"#;
    let args = [
        "run",
        "stubborn",
        "--ttl",
        "3s",
        "--kill-after",
        "500ms",
        "--",
    ];
    let mut command = redlockctl(h.daemons[0].addr, &args);
    command.args(["sh", "-c", script]).env("LOG", &log);
    let mut child = command
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stderr = lines_of(child.stderr.take().expect("stderr"), "redlockctl");
    file_has_line(&log, "ready", Duration::from_secs(10)).await;
    for i in 0..5 {
        h.raw(i, "DEL", vec!["redlock:lock:stubborn".into()]).await;
    }
    line_containing(
        &mut stderr,
        "the daemon reports it lost",
        Duration::from_secs(5),
    )
    .await;
    let (told, terminated) = (unix_nanos(), Instant::now());
    let status = exit_within(&mut child, Duration::from_secs(5)).await;
    let waited = terminated.elapsed();
    assert_eq!(status.code(), Some(80));
    let term: u128 = read_lines(&log)
        .iter()
        .find_map(|l| l.strip_prefix("term ").map(parse))
        .expect("the command got SIGTERM");
    let term_ms = term.saturating_sub(told) / 1_000_000;
    println!("SIGTERM {term_ms} ms after the `lost` line was read; exit {waited:?} after it");
    assert!(term_ms < 100, "SIGTERM came {term_ms} ms after `lost`");
    assert!(waited >= Duration::from_millis(400), "{waited:?}");
    line_containing(
        &mut stderr,
        "SIGKILL to process group",
        Duration::from_secs(1),
    )
    .await;
}

/// The Hold stream black-holed (a partition; the daemon sees nothing):
/// redlockctl re-attaches through Extend on a new connection and the
/// command runs on past the lock's first validity, then exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn quiet_session_is_kept_through_extend() {
    let h = Harness::start(Flavor::Valkey).await;
    let proxy = Proxy::start(h.daemons[0].addr).await.expect("proxy");
    let dir = Scratch::new("reattach");
    let (log, done) = (dir.file("log"), dir.file("done"));
    let script =
        r#"echo "ready $REDLOCK_TOKEN" >> "$LOG"; while [ ! -e "$DONE" ]; do sleep 0.02; done"#;
    let mut command = redlockctl(proxy.addr(), &["run", "partitioned", "--ttl", "1s", "--"]);
    command
        .args(["sh", "-c", script])
        .env("LOG", &log)
        .env("DONE", &done);
    let mut child = command
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stderr = lines_of(child.stderr.take().expect("stderr"), "redlockctl");
    file_has_line(&log, "ready", Duration::from_secs(10)).await;
    let frozen = Instant::now();
    proxy.freeze_existing();
    line_containing(
        &mut stderr,
        "extending through Extend",
        Duration::from_secs(2),
    )
    .await;
    // Without an Extend of its own, redlockctl would stop the command within
    // one ttl of the partition.
    eventually(
        Duration::from_secs(10),
        "three ttls after the partition",
        || async { frozen.elapsed() >= Duration::from_secs(3) },
    )
    .await;
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "still running"
    );
    std::fs::write(&done, b"").expect("done");
    let status = exit_within(&mut child, Duration::from_secs(5)).await;
    assert_eq!(status.code(), Some(0));
    assert!(
        h.keys("redlock:lock:partitioned").await.is_empty(),
        "released"
    );
}

/// No way to reach the daemon (existing and new connections black-holed):
/// the command is stopped before the lock's last known validity ends, i.e.
/// within one ttl of the partition, and redlockctl exits 80.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_daemon_stops_the_command_before_validity_ends() {
    let h = Harness::start(Flavor::Valkey).await;
    let proxy = Proxy::start(h.daemons[0].addr).await.expect("proxy");
    let dir = Scratch::new("cutoff");
    let log = dir.file("log");
    let script = r#"trap 'echo "term $(date +%s%N)" >> "$LOG"; exit 0' TERM; echo ready >> "$LOG"; while :; do sleep 0.02; done"#;
    let mut command = redlockctl(proxy.addr(), &["run", "cutoff", "--ttl", "2s", "--"]);
    command.args(["sh", "-c", script]).env("LOG", &log);
    let mut child = command.spawn().expect("spawn");
    file_has_line(&log, "ready", Duration::from_secs(10)).await;
    let frozen = unix_nanos();
    proxy.set(Mode::Blackhole);
    let status = exit_within(&mut child, Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(80));
    let term = read_lines(&log)
        .iter()
        .find_map(|l| l.strip_prefix("term ").map(parse::<u128>))
        .expect("the command got SIGTERM");
    let after_ms = (term.saturating_sub(frozen)) / 1_000_000;
    println!("command stopped {after_ms} ms after the partition (ttl 2000 ms)");
    assert!(
        after_ms < 2_000,
        "stopped {after_ms} ms after the partition"
    );
}

/// The Hold connection reset (the daemon sees it and releases the lock):
/// redlockctl's Extend finds the lock gone, stops the command, exits 80.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_connection_means_lost() {
    let h = Harness::start(Flavor::Valkey).await;
    let proxy = Proxy::start(h.daemons[0].addr).await.expect("proxy");
    let dir = Scratch::new("reset");
    let log = dir.file("log");
    let script = r#"trap 'echo got-term >> "$LOG"; exit 0' TERM; echo ready >> "$LOG"; while :; do sleep 0.02; done"#;
    let mut command = redlockctl(proxy.addr(), &["run", "reset", "--ttl", "2s", "--"]);
    command.args(["sh", "-c", script]).env("LOG", &log);
    let mut child = command
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut stderr = lines_of(child.stderr.take().expect("stderr"), "redlockctl");
    file_has_line(&log, "ready", Duration::from_secs(10)).await;
    proxy.close_existing();
    line_containing(
        &mut stderr,
        "re-attaching through Extend",
        Duration::from_secs(2),
    )
    .await;
    let status = exit_within(&mut child, Duration::from_secs(5)).await;
    assert_eq!(status.code(), Some(80));
    assert!(read_lines(&log).contains(&"got-term".to_owned()));
    line_containing(&mut stderr, "no longer held", Duration::from_secs(1)).await;
}
