//! The `redlockd` binary itself: configuration errors exit with status 2
//! naming the key, and `--dev` serves a working lock service and stops its
//! masters on SIGTERM.

use redlockd::pb;
use redlockd::pb::lock_service_client::LockServiceClient;
use redlockd_testkit::masters::{find_server, Flavor};
use redlockd_testkit::process::DaemonCommand;
use std::process::{Command, Stdio};
use std::time::Duration;
use tokio::io::AsyncBufReadExt;

/// The daemon binary under test.
fn bin() -> std::path::PathBuf {
    redlockd_testkit::bin::require("redlockd")
}

/// An invalid value exits 2 and the message names the key.
#[test]
fn invalid_config_exits_2_naming_the_key() {
    let output = Command::new(bin())
        .env("REDLOCKD__REDLOCK__NODES", "redis://127.0.0.1:1")
        .env("REDLOCKD__REDLOCK__NODE_TIMEOUT", "fast")
        .output()
        .expect("run redlockd");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("node_timeout"), "{stderr}");

    let output = Command::new(bin())
        .env_remove("REDLOCKD__REDLOCK__NODES")
        .output()
        .expect("run");
    assert_eq!(output.status.code(), Some(2), "no masters configured");
    assert!(String::from_utf8_lossy(&output.stderr).contains("redlock.nodes"));
}

/// TLS files that cannot be used are configuration errors too: exit 2,
/// naming the key, before any master is contacted.
#[test]
fn unusable_tls_files_exit_2_naming_the_key() {
    let dir = std::env::temp_dir().join(format!("redlockd-tls-exit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch dir");
    let not_pem = dir.join("not-a-certificate.pem");
    std::fs::write(&not_pem, "not a certificate\n").expect("write");
    let missing = dir.join("missing.pem");
    let signed = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).expect("cert");
    let (good_cert, good_key) = (dir.join("cert.pem"), dir.join("key.pem"));
    std::fs::write(&good_cert, signed.cert.pem()).expect("write");
    std::fs::write(&good_key, signed.signing_key.serialize_pem()).expect("write");
    let cases = [
        ("server.tls.cert", &missing, &good_key, None),
        ("server.tls.cert", &not_pem, &good_key, None),
        ("server.tls.key", &good_cert, &not_pem, None),
        (
            "server.tls.client_ca",
            &good_cert,
            &good_key,
            Some(&missing),
        ),
        (
            "server.tls.client_ca",
            &good_cert,
            &good_key,
            Some(&not_pem),
        ),
    ];
    for (key, cert, tls_key, client_ca) in cases {
        let mut command = Command::new(bin());
        command
            .env("REDLOCKD__REDLOCK__NODES", "redis://127.0.0.1:1")
            .env("REDLOCKD__SERVER__TLS__CERT", cert)
            .env("REDLOCKD__SERVER__TLS__KEY", tls_key)
            .env("REDLOCKD__METRICS__ENABLED", "false");
        if let Some(ca) = client_ca {
            command.env("REDLOCKD__SERVER__TLS__CLIENT_CA", ca);
        }
        let output = command.output().expect("run redlockd");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{key}: {stderr}");
        assert!(stderr.contains(key), "{key} not named: {stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `--version` prints the crate version.
#[test]
fn version_flag() {
    let output = Command::new(bin()).arg("--version").output().expect("run");
    assert!(output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains(env!("CARGO_PKG_VERSION")));
}

/// `redlockd --dev` on a free port; returns the child, a connected client
/// and the addresses of the masters it started.
async fn start_dev() -> (
    tokio::process::Child,
    LockServiceClient<tonic::transport::Channel>,
    Vec<String>,
) {
    let server = find_server(Flavor::Valkey).expect("valkey-server (scripts/setup.sh)");
    let listen = redlockd_testkit::process::free_addr().expect("free port");
    let port = listen.port();
    let mut command = DaemonCommand::new(bin(), &[])
        .set("server.listen", listen)
        .set("metrics.enabled", true)
        .set("metrics.listen", "127.0.0.1:0")
        // --dev serves HTTP on 8080 unless placed: tests run side by side.
        .set("http.listen", "127.0.0.1:0")
        .set("server.shutdown_grace", "1s")
        .arg("--dev")
        .command()
        .expect("command");
    let mut child = command
        .env_remove("REDLOCKD__REDLOCK__NODES")
        .env("REDLOCKD_SERVER_BIN", &server)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("start redlockd --dev");
    // The banner names the masters it started.
    let mut stdout = tokio::io::BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut masters = Vec::new();
    while let Some(line) = stdout.next_line().await.expect("read stdout") {
        if let Some(list) = line.trim().strip_prefix("masters: ") {
            masters = list
                .split(' ')
                .map(|u| u.trim_start_matches("redis://").to_owned())
                .collect();
            break;
        }
    }
    assert_eq!(masters.len(), 5, "{masters:?}");
    let url = format!("http://127.0.0.1:{port}");
    for _ in 0..300 {
        if let Ok(client) = LockServiceClient::connect(url.clone()).await {
            return (child, client, masters);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("--dev daemon never accepted a connection");
}

/// Sends SIGTERM and waits for a successful exit within the shutdown grace.
async fn terminate(mut child: tokio::process::Child) {
    let pid = child.id().expect("running").to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = tokio::time::timeout(Duration::from_secs(15), child.wait())
        .await
        .expect("exits within the shutdown grace")
        .expect("wait");
    assert!(status.success(), "{status:?}");
}

/// `redlockd --dev` grants a lock, then SIGTERM stops it and its masters.
#[tokio::test]
async fn dev_mode_serves_and_stops_on_sigterm() {
    let (child, mut client, masters) = start_dev().await;
    let lock = client
        .acquire(pb::AcquireRequest {
            resource: "dev".into(),
            ttl: Some(prost_types::Duration {
                seconds: 10,
                nanos: 0,
            }),
            wait: None,
            owner: String::new(),
            request_id: String::new(),
            ..Default::default()
        })
        .await
        .expect("granted")
        .into_inner()
        .lock
        .expect("lock");
    assert!(lock.fence > 0);
    for addr in &masters {
        std::net::TcpStream::connect(addr).expect("master is up while the daemon runs");
    }
    terminate(child).await;
    for addr in &masters {
        assert!(
            std::net::TcpStream::connect(addr).is_err(),
            "master {addr} stopped with the daemon"
        );
    }
}

/// SIGTERM with open sessions: every session is told `draining`, then,
/// when the grace (1 s here) runs out, `lost` (its lock is left to expire
/// with its ttl: the validity it was told stands), every stream ends, and
/// the daemon exits.
#[tokio::test]
async fn sigterm_tells_every_session() {
    use pb::hold_event::Event;
    let (child, client, _masters) = start_dev().await;
    let mut sessions = Vec::new();
    for i in 0..3 {
        let mut client = client.clone();
        let (requests, outgoing) = tokio::sync::mpsc::channel(1);
        requests
            .send(pb::HoldRequest {
                request: Some(pb::hold_request::Request::Acquire(pb::AcquireRequest {
                    resource: format!("session-{i}"),
                    ttl: Some(prost_types::Duration {
                        seconds: 30,
                        nanos: 0,
                    }),
                    wait: None,
                    owner: String::new(),
                    request_id: String::new(),
                    ..Default::default()
                })),
            })
            .await
            .expect("send acquire");
        let mut events = client
            .hold(tokio_stream::wrappers::ReceiverStream::new(outgoing))
            .await
            .expect("Hold opens")
            .into_inner();
        let first = events.message().await.expect("event").and_then(|e| e.event);
        assert!(matches!(first, Some(Event::Acquired(_))), "{first:?}");
        sessions.push((requests, events));
    }
    terminate(child).await;
    for (_requests, mut events) in sessions {
        let draining = events.message().await.expect("stream ok");
        assert!(
            matches!(draining.and_then(|e| e.event), Some(Event::Draining(_))),
            "told `draining` first"
        );
        let last = events
            .message()
            .await
            .expect("stream ok")
            .and_then(|e| e.event);
        assert!(
            matches!(&last, Some(Event::Lost(lost)) if lost.reason.contains("shutdown grace")),
            "{last:?}"
        );
        assert!(events.message().await.expect("clean end").is_none());
    }
}
