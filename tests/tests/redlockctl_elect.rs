//! `redlockctl elect`, `leader` and `observe` against two daemon replicas:
//! the command runs on one candidate at a time, a standby on the other
//! replica takes over when the leader is SIGKILLed, and `leader` and
//! `observe` say who leads.

mod common;

use common::ctl::*;
use common::*;
use redlockd_testkit::masters::Flavor;
use std::process::Stdio;
use std::time::Duration;

/// Generous bound for one step on a busy machine.
const STEP: Duration = Duration::from_secs(30);

/// The command each candidate runs: its term and shell pid (the process
/// group's leader) into FILE, then sleeps until stopped.
const SCRIPT: &str = r#"echo "$REDLOCK_TERM $$ $REDLOCK_VALUE" > "$1"; exec sleep 60"#;

/// The term and group of the command that wrote `path`.
fn leader_of(path: &str) -> (u64, i32) {
    let line = read_lines(path).first().cloned().expect("a line");
    let mut words = line.split_whitespace();
    let term = words.next().and_then(|w| w.parse().ok()).expect("term");
    let group = words.next().and_then(|w| w.parse().ok()).expect("pid");
    (term, group)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_takes_over_from_a_killed_leader() {
    let mut h = Harness::start(Flavor::Valkey).await;
    h.start_daemon().await;
    let (a0, a1) = (h.daemons[0].addr, h.daemons[1].addr);
    let scratch = Scratch::new("elect");
    let (file_a, file_b) = (scratch.file("a"), scratch.file("b"));
    let candidate = |addr, value: &'static str, file: &str| {
        let args = [
            "elect", "jobs", "--value", value, "--ttl", "2s", "--", "sh", "-c", SCRIPT, "sh", file,
        ];
        redlockctl(addr, &args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn redlockctl elect")
    };
    let mut observer = redlockctl(a1, &["observe", "jobs"])
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn redlockctl observe");
    let mut observed = lines_of(observer.stdout.take().expect("stdout"), "observe");
    line_containing(&mut observed, "(no leader)", STEP).await;

    let mut a = candidate(a0, "host-a", &file_a);
    let _a_err = lines_of(a.stderr.take().expect("stderr"), "a");
    file_has_line(&file_a, "host-a", STEP).await;
    let (term_a, group_a) = leader_of(&file_a);
    let mut b = candidate(a1, "host-b", &file_b);
    let _b_err = lines_of(b.stderr.take().expect("stderr"), "b");
    line_containing(&mut observed, &format!("{term_a}\thost-a"), STEP).await;

    let out = output_within(redlockctl(a1, &["leader", "jobs"]), STEP).await;
    assert_exit(&out, 0);
    assert_eq!(assignment(&out, "REDLOCK_LEADER"), "host-a");
    assert_eq!(assignment(&out, "REDLOCK_TERM"), term_a.to_string());
    assert!(
        read_lines(&file_b).is_empty(),
        "the standby ran its command while another led"
    );

    // The leader's machine dies: redlockctl and its command, at once.
    a.start_kill().expect("SIGKILL redlockctl");
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(group_a),
        nix::sys::signal::Signal::SIGKILL,
    );
    file_has_line(&file_b, "host-b", STEP).await;
    let (term_b, group_b) = leader_of(&file_b);
    assert!(term_b > term_a, "terms go up: {term_a} then {term_b}");
    line_containing(&mut observed, &format!("{term_b}\thost-b"), STEP).await;

    // The command exits: the leader resigns and redlockctl exits with its
    // status; nobody leads.
    nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(group_b),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("stop b's command");
    let status = exit_within(&mut b, STEP).await;
    assert_eq!(status.code(), Some(128 + 15), "sleep's SIGTERM status");
    let out = output_within(redlockctl(a0, &["leader", "jobs", "--json"]), STEP).await;
    assert_exit(&out, 82);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        r#"{"has_leader":false}"#
    );
}
