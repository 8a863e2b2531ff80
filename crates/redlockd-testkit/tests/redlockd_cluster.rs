//! `redlockd-cluster`, the launcher every client's tests start, driven as
//! they drive it: its start-up line, each command's answer, and that the
//! end of its stdin leaves nothing behind. Needs the workspace's binaries
//! (`cargo build --workspace --bins`) and valkey-server
//! (`source .venv/redlockd-env`).

use redlockd_testkit::client;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longest wait for one line of the launcher: its own waits are bounded
/// (60 s for a daemon to serve), this one bounds the test.
const LINE_LIMIT: Duration = Duration::from_secs(90);

/// A launcher process with a thread reading its stdout's lines.
struct Launcher {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl Launcher {
    /// Starts `redlockd-cluster ARGS...` with `env` added.
    fn start(args: &[&str], env: &[(&str, &str)]) -> Launcher {
        let mut child = Command::new(env!("CARGO_BIN_EXE_redlockd-cluster"))
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn redlockd-cluster");
        let stdout = child.stdout.take().expect("stdout");
        let (sender, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = sender.send(line);
            }
        });
        Launcher {
            stdin: child.stdin.take(),
            child,
            lines,
        }
    }

    /// The next JSON line (None: stdout ended).
    fn line(&self) -> Option<Value> {
        match self.lines.recv_timeout(LINE_LIMIT) {
            Ok(line) => Some(serde_json::from_str(&line).expect("a JSON line")),
            Err(mpsc::RecvTimeoutError::Disconnected) => None,
            Err(mpsc::RecvTimeoutError::Timeout) => panic!("no line within {LINE_LIMIT:?}"),
        }
    }

    /// Sends one command line and returns its answer.
    fn ask(&mut self, command: &str) -> Value {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{command}").expect("write a command");
        self.line().expect("an answer")
    }

    /// Closes stdin and waits (bounded) for the exit code.
    fn finish(mut self) -> i32 {
        drop(self.stdin.take());
        for _ in 0..300 {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status.code().unwrap_or(-1);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        panic!("redlockd-cluster did not exit within 15 s of its stdin's end");
    }
}

/// Whether something accepts connections on 127.0.0.1:`port`.
fn listening(port: u64) -> bool {
    let addr = SocketAddr::from(([127, 0, 0, 1], u16::try_from(port).expect("a port")));
    TcpStream::connect_timeout(&addr, Duration::from_millis(500)).is_ok()
}

/// Start-up, every command, and the clean-up at stdin's end: the daemon
/// grants a lock, directly and late through a slow-answers proxy, a second
/// daemon serves TLS over the same masters, a stopped master refuses, a
/// SIGTERM'd daemon exits 0, and afterwards no port listens and the
/// directory is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_starts_answers_and_leaves_nothing_behind() {
    let mut launcher = Launcher::start(&["--masters", "3", "--http"], &[]);
    let started = launcher.line().expect("the start-up line");
    assert_eq!(started["ok"], true, "{started}");
    let ports: Vec<u64> = started["masters"]
        .as_array()
        .expect("masters")
        .iter()
        .map(|m| m["port"].as_u64().expect("a port"))
        .collect();
    assert_eq!(ports.len(), 3);
    let addr: SocketAddr = started["daemon"]["addr"]
        .as_str()
        .expect("addr")
        .parse()
        .expect("an address");
    assert!(started["daemon"]["http"].is_string(), "{started}");
    let mut lock_client = client::connect(addr).await.expect("connect");
    let granted = redlockd_testkit::harness::acquire(&mut lock_client, "launcher/a", 5_000, 0)
        .await
        .expect("the daemon grants");
    assert!(granted.fence > 0);

    let slow = launcher.ask("slow-answers 0 300");
    let proxied: SocketAddr = slow["addr"]
        .as_str()
        .expect("addr")
        .parse()
        .expect("an address");
    let mut slow_client = client::connect(proxied)
        .await
        .expect("connect through the proxy");
    let asked = Instant::now();
    redlockd_testkit::harness::acquire(&mut slow_client, "launcher/slow", 5_000, 0)
        .await
        .expect("granted through the proxy");
    assert!(
        asked.elapsed() >= Duration::from_millis(300),
        "{:?}",
        asked.elapsed()
    );

    let reply = launcher.ask(r#"["master", "0", "SET", "a key", "a value"]"#);
    assert_eq!(reply["reply"], "+OK", "{reply}");
    // A master's error is its reply, not the launcher's.
    let refused = launcher.ask("master 0 EXISTS");
    assert!(
        refused["reply"]
            .as_str()
            .is_some_and(|r| r.starts_with("-ERR")),
        "{refused}"
    );

    let tls = launcher.ask("daemon --tls");
    assert_eq!(tls["ok"], true, "{tls}");
    assert!(Path::new(tls["daemon"]["ca"].as_str().expect("ca")).is_file());
    assert_ne!(tls["daemon"]["addr"], started["daemon"]["addr"]);

    assert_eq!(launcher.ask("stop-master 2")["ok"], true);
    assert!(!listening(ports[2]));
    assert_eq!(launcher.ask("master 2 PING")["ok"], false);
    assert_eq!(launcher.ask("master 9 PING")["ok"], false);

    assert_eq!(launcher.ask("signal 0 TERM")["ok"], true);
    let exited = launcher.ask("wait-daemon 0");
    assert_eq!(exited["exit"], "exit status: 0", "{exited}");
    assert_eq!(launcher.ask("no-such-command")["ok"], false);

    let dir = started["dir"].as_str().expect("dir").to_owned();
    assert_eq!(launcher.finish(), 0);
    assert!(!Path::new(&dir).exists(), "{dir} left behind");
    assert!(
        ports.iter().all(|p| !listening(*p)),
        "a master still listens"
    );
}

/// A daemon that cannot start is an error on stdout and stderr, exit 1.
#[test]
fn a_failed_start_says_why_and_exits_1() {
    let launcher = Launcher::start(&["--masters", "1"], &[("REDLOCKD_BIN", "/nonexistent")]);
    let line = launcher.line().expect("the error line");
    assert_eq!(line["ok"], false);
    assert!(
        line["error"]
            .as_str()
            .expect("error")
            .contains("/nonexistent"),
        "{line}"
    );
    assert_eq!(launcher.finish(), 1);
}
