//! The crate's example program, run as a user runs it, against a real
//! daemon: it prints a fence.

use crate::start;
use std::path::PathBuf;
use std::time::Duration;

/// `examples/first_call` (built as a program by `cargo build --examples`,
/// which scripts/test.sh's build step runs: `cargo test` builds examples
/// only as test harnesses) connects to the address given, acquires, prints `fence N valid for ...`
/// and exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_call_prints_a_fence() {
    let (h, _) = start().await;
    let exe = std::env::current_exe().expect("this test's path");
    // target/<profile>/deps/<test> -> target/<profile>/examples/first_call
    let example: PathBuf = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the profile directory")
        .join("examples")
        .join(format!("first_call{}", std::env::consts::EXE_SUFFIX));
    assert!(
        example.is_file(),
        "{} is not built: cargo build -p redlockd-client --examples \
         (scripts/test.sh's build step builds the workspace's examples)",
        example.display()
    );
    let mut command = tokio::process::Command::new(&example);
    command
        .arg(h.daemons[0].addr.to_string())
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(30), command.output())
        .await
        .expect("the example ends within 30 s")
        .expect("the example runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}: {stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let fence: u64 = stdout
        .strip_prefix("fence ")
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no fence in {stdout:?}"));
    assert!(fence > 0, "{stdout}");
}
