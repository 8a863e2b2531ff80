//! `redlockd-cluster`: real masters and real `redlockd` processes for
//! tests written in other languages, started and stopped in one place.
//! Every client's tests (Python, Node, Go, Java), the conformance harness
//! and the four-runtime check start one of these and talk to it over its
//! stdin and stdout, instead of each starting valkey-server and redlockd
//! its own way.
//!
//! ```text
//! redlockd-cluster [--masters N] [DAEMON OPTIONS]
//! ```
//!
//! starts N (default 5) masters on free 127.0.0.1 ports (valkey-server:
//! `$REDLOCKD_VALKEY_BIN`, else `PATH`) and one daemon over them (the
//! workspace's `redlockd` beside this binary, or `$REDLOCKD_BIN`),
//! configured as operators configure it: `REDLOCKD__SECTION__KEY`
//! variables (every inherited one removed), listening on a free port,
//! metrics off, `server.shutdown_grace` 1 s (20 s by default would slow
//! every stop), logs at `warn` unless `RUST_LOG` says otherwise.
//!
//! DAEMON OPTIONS (for the first daemon here, for others after `daemon`):
//! - `--set KEY=VALUE`: a configuration key as in the file
//!   (`redlock.node_timeout=250ms`), applied last;
//! - `--toml TEXT`: a configuration file's text (`[[auth.clients]]`);
//! - `--http`: the HTTP gateway too, on a free port;
//! - `--tls`: TLS with a certificate from a fresh private CA, whose file
//!   the answer names (`ca`);
//! - `--probe-ca FILE [--probe-cert FILE --probe-key FILE]`: the daemon's
//!   TLS is the caller's (`--set server.tls.cert=...`): the readiness probe
//!   trusts this CA (and shows this client certificate: mutual TLS).
//!
//! Ready means the daemon's health says SERVING for the lock service (a
//! quorum of masters trusted), over TLS when it serves TLS. Then it prints
//! one JSON line on stdout:
//!
//! ```text
//! {"daemon":{"addr":"127.0.0.1:41007","index":0,"log":".../daemon-0.log","pid":4242},
//!  "dir":"/tmp/redlockd-cluster-...","masters":[{"port":41001},...],"ok":true}
//! ```
//!
//! (keys in any order; a daemon also has `http` with `--http`, `ca` with
//! `--tls`). It then
//! reads one command a line on stdin, a JSON array of strings (what
//! programs send: an argument may hold spaces) or words separated by
//! spaces, and answers each with one JSON line, `{"ok":true,...}` or
//! `{"ok":false,"error":"..."}`, in order, one command at a time:
//!
//! | command | does | answer |
//! | --- | --- | --- |
//! | `daemon [DAEMON OPTIONS]` | one more daemon over the same masters, waited for | `daemon` as above |
//! | `master I COMMAND [ARG...]` | sends the command to master I over RESP | `reply`: the reply's first line (`+OK`) |
//! | `stop-master I` | SIGKILL to master I: its keys are gone | |
//! | `signal D NAME` | signal NAME (`TERM`, `KILL`, `STOP`, `CONT`) to daemon D | |
//! | `slow-answers D MS` | a proxy to daemon D that delivers the daemon's bytes MS ms after it sent them, the client's at once (the kit's `proxy`): a grant made in time reaches the client after its deadline | `addr`: the proxy's |
//! | `wait-daemon D` | waits (30 s at most) until daemon D has exited | `exit`: how |
//!
//! At the end of stdin (the test closed it, or died), on SIGTERM or on
//! SIGINT, it closes the proxies, kills every daemon and master and
//! removes its directory.
//! If the first daemon or a master does not start, it prints
//! `{"ok":false,"error":...}` on stdout, the same error (with the last
//! lines of the log) on stderr, stops what it started and exits 1; bad
//! arguments exit 2. Every process listens on 127.0.0.1 only, and every
//! wait is bounded.

mod cluster;
mod options;

use cluster::Cluster;
use serde_json::{json, Value};
use std::io::{BufRead, Write};
use std::process::ExitCode;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc;

/// The command line's synopsis, for `--help` and bad arguments.
const USAGE: &str = "usage: redlockd-cluster [--masters N] [--set KEY=VALUE]... [--toml TEXT] \
     [--http] [--tls] [--probe-ca FILE [--probe-cert FILE --probe-key FILE]]\n\
     (the protocol: crates/redlockd-testkit/src/bin/redlockd-cluster/main.rs)";

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
    let launch = match options::launch(&args) {
        Ok(launch) => launch,
        Err(e) => {
            eprintln!("redlockd-cluster: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    // Installed before anything starts, so that a SIGTERM during the
    // start-up stops what was started instead of leaving it behind.
    let (Ok(mut terminate), Ok(mut interrupt)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        eprintln!("redlockd-cluster: cannot handle SIGTERM and SIGINT");
        return ExitCode::FAILURE;
    };
    let started = tokio::select! {
        started = Cluster::start(launch.masters, launch.daemon) => started,
        _ = terminate.recv() => return ExitCode::FAILURE,
        _ = interrupt.recv() => return ExitCode::FAILURE,
    };
    let mut cluster = match started {
        Ok((cluster, line)) => {
            if say(Ok(line)).is_err() {
                cluster.shutdown().await;
                return ExitCode::FAILURE;
            }
            cluster
        }
        Err(e) => {
            let _ = say(Err(e.to_string()));
            eprintln!("redlockd-cluster: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut lines = stdin_lines();
    tokio::select! {
        () = serve(&mut cluster, &mut lines) => {}
        _ = terminate.recv() => {}
        _ = interrupt.recv() => {}
    }
    cluster.shutdown().await;
    ExitCode::SUCCESS
}

/// Answers command lines until stdin ends or stdout is gone.
async fn serve(cluster: &mut Cluster, lines: &mut mpsc::Receiver<String>) {
    while let Some(line) = lines.recv().await {
        if line.trim().is_empty() {
            continue;
        }
        let answer = match options::words(&line) {
            Ok(words) => cluster.command(&words).await.map_err(|e| e.to_string()),
            Err(e) => Err(e),
        };
        if say(answer).is_err() {
            return;
        }
    }
}

/// Stdin's lines, read by a thread of their own: a read that blocks does
/// not hold up the end (tokio's stdin would keep the runtime from
/// shutting down until the next line).
fn stdin_lines() -> mpsc::Receiver<String> {
    let (sender, receiver) = mpsc::channel(16);
    std::thread::spawn(move || {
        for line in std::io::stdin().lock().lines() {
            let Ok(line) = line else { break };
            if sender.blocking_send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

/// Writes one answer line: `fields` with `"ok":true`, or the error.
fn say(answer: Result<Value, String>) -> std::io::Result<()> {
    let line = match answer {
        Ok(mut fields) => {
            fields["ok"] = json!(true);
            fields
        }
        Err(error) => json!({ "ok": false, "error": error }),
    };
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()
}
