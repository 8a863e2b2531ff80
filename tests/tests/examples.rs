//! The Python and Node examples run to success against a real daemon, and
//! stop their work when their session's lock is lost. Each installs its own
//! dependencies inside the repository (examples/python/.venv,
//! examples/node/node_modules; download caches under target/).

mod common;

use common::ctl::*;
use common::*;
use redlockd_testkit::masters::Flavor;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

/// Longest a dependency install may take (downloads on a fresh machine).
const INSTALL_LIMIT: Duration = Duration::from_secs(300);
/// Longest one run of an example may take.
const RUN_LIMIT: Duration = Duration::from_secs(60);

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples")
        .join(name)
}

fn cache(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../target/example-caches")
        .join(name)
}

/// Runs `command` with the daemon's address; asserts exit 0 and prints its
/// output.
async fn succeeds(mut command: Command, addr: std::net::SocketAddr, limit: Duration) -> String {
    command
        .env("REDLOCK_ADDR", addr.to_string())
        .kill_on_drop(true);
    let out = output_within(command, limit).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}{stderr}");
    assert!(out.status.success(), "{:?}\n{stdout}\n{stderr}", out.status);
    stdout
}

/// Starts the example's session for 30 s, stops three masters once it
/// holds the lock, and expects the example to abandon its work (exit 3).
async fn abandons_work_when_lost(h: &mut Harness, mut command: Command) {
    command
        .env("REDLOCK_ADDR", h.daemons[0].addr.to_string())
        .stdout(Stdio::piped())
        .kill_on_drop(true);
    let mut child = command.spawn().expect("start the example");
    let mut stdout = lines_of(child.stdout.take().expect("stdout"), "example");
    line_containing(&mut stdout, "3. holding", RUN_LIMIT).await;
    for i in 2..5 {
        h.masters.stop(i).expect("stop a master");
    }
    let status = exit_within(&mut child, Duration::from_secs(10)).await;
    assert_eq!(status.code(), Some(3), "the example reports the lost lock");
    line_containing(&mut stdout, "work abandoned", Duration::from_secs(1)).await;
}

/// examples/python (on the clients/python package, installed by run.sh):
/// acquire/release, the stale fence refused, a session; then `lost`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_example_runs_against_the_daemon() {
    let mut h = Harness::start(Flavor::Valkey).await;
    let dir = example("python");
    let mut run = Command::new("bash");
    run.arg(dir.join("run.sh"))
        .env("PIP_CACHE_DIR", cache("pip"));
    let stdout = succeeds(run, h.daemons[0].addr, INSTALL_LIMIT + RUN_LIMIT).await;
    assert!(
        stdout.contains("stale holder's write was refused"),
        "{stdout}"
    );
    assert!(stdout.ends_with("ok\n"), "{stdout}");
    let mut lost = Command::new(dir.join(".venv/bin/python"));
    lost.arg(dir.join("lock_example.py"))
        .args(["--hold-seconds", "30"]);
    abandons_work_when_lost(&mut h, lost).await;
}

/// examples/node (on clients/node, the redlockd-client package): the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_example_runs_against_the_daemon() {
    let mut h = Harness::start(Flavor::Valkey).await;
    let dir = example("node");
    let mut install = Command::new("npm");
    install
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&dir)
        .env("npm_config_cache", cache("npm"));
    succeeds(install, h.daemons[0].addr, INSTALL_LIMIT).await;
    let mut run = Command::new("node");
    run.arg(dir.join("lock_example.js"));
    let stdout = succeeds(run, h.daemons[0].addr, RUN_LIMIT).await;
    assert!(
        stdout.contains("stale holder's write was refused"),
        "{stdout}"
    );
    assert!(stdout.ends_with("ok\n"), "{stdout}");
    let mut lost = Command::new("node");
    lost.arg(dir.join("lock_example.js"))
        .args(["--hold-seconds", "30"]);
    abandons_work_when_lost(&mut h, lost).await;
}
