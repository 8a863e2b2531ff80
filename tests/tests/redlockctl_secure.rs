//! The `redlockctl` binary against secured daemons: TLS with a private CA
//! (`acquire`/`release`, `run` and `health`), mutual TLS (refused without
//! a client certificate), bearer tokens from a file and from
//! `REDLOCK_AUTH_TOKEN` (refused without, and never printed).

mod common;

use common::ctl::*;
use common::*;
use redlockd::config::{ClientConfig, Config};
use redlockd_testkit::bin;
use redlockd_testkit::masters::Flavor;
use redlockd_testkit::pki::{Pki, PkiFiles};
use std::process::Output;
use std::time::Duration;

/// A bearer token the token tests' daemon knows.
const TOKEN: &str = "ctl-secret-3f9a1c7e5b2d4f60a8c1e3b5d7f9a2c4";

/// Generous bound for one redlockctl call on a busy machine.
const CALL: Duration = Duration::from_secs(30);

/// A daemon over the harness's masters with `config`, and its https URL.
async fn secure_daemon(config: Config) -> (daemon::Daemon, String) {
    let config = config.validated().expect("valid config");
    let daemon = daemon::Daemon::start(config).await.expect("daemon");
    let url = format!("https://127.0.0.1:{}", daemon.addr.port());
    (daemon, url)
}

/// The harness's config with the daemon serving TLS from `server`.
fn tls_config(h: &Harness, server: &PkiFiles) -> Config {
    let mut config = h.config();
    config.metrics.enabled = false;
    config.server.tls.cert = Some(server.cert.clone());
    config.server.tls.key = Some(server.key.clone());
    config
}

/// `redlockctl ARGS...` against `url`.
fn ctl(url: &str, args: &[&str]) -> tokio::process::Command {
    let unused = "127.0.0.1:9".parse().expect("address");
    let mut command = redlockctl(unused, args);
    command.env("REDLOCK_ADDR", url);
    command
}

/// Runs `command` and returns its output (the test fails past [`CALL`]).
async fn output(command: tokio::process::Command) -> Output {
    output_within(command, CALL).await
}

/// Waits until `redlockctl health` with `flags` says SERVING.
async fn serving(url: &str, flags: &[&str]) {
    let what = format!("{url} SERVING through redlockctl health");
    eventually(Duration::from_secs(20), &what, || async {
        let mut args = flags.to_vec();
        args.push("health");
        output(ctl(url, &args)).await.status.code() == Some(0)
    })
    .await;
}

fn path(p: &std::path::Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// A daemon serving TLS with a certificate from a private CA: with
/// `--cacert` acquire, release, `run` (whose command reaches the daemon the
/// same way through the environment) and `health` work; without it (the
/// system's bundle, from SSL_CERT_FILE) the certificate is not trusted
/// (exit 89); a missing `--cacert` file exits 64 naming the flag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_private_ca() {
    let h = Harness::start(Flavor::Valkey).await;
    let dir = Scratch::new("ctl-tls");
    let server = Pki::new().write(&dir.path, "server");
    let (_daemon, url) = secure_daemon(tls_config(&h, &server)).await;
    let ca = path(&server.ca);
    serving(&url, &["--cacert", ca]).await;

    let out = output(ctl(
        &url,
        &["--cacert", ca, "acquire", "tls/1", "--ttl", "10s"],
    ))
    .await;
    assert_exit(&out, 0);
    let token = assignment(&out, "REDLOCK_TOKEN");
    let out = output(ctl(&url, &["release", "tls/1", &token, "--cacert", ca])).await;
    assert_exit(&out, 0);

    // The command validates its own lock with a bare `redlockctl validate`:
    // REDLOCK_ADDR and REDLOCK_CACERT came down from `run`.
    let script = r#"echo "fence=$REDLOCK_FENCE addr=$REDLOCK_ADDR"; "$CTL" validate"#;
    let mut command = ctl(
        &url,
        &["--cacert", ca, "run", "tls/2", "--", "sh", "-c", script],
    );
    command.env("CTL", bin::require("redlockctl"));
    let out = output(command).await;
    assert_exit(&out, 0);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(&format!("addr={url}")),
        "{}",
        describe(&out)
    );
    assert!(stdout.contains("REDLOCK_HELD=true"), "{}", describe(&out));
    assert!(h.keys("redlock:lock:tls/2").await.is_empty(), "released");

    // Without --cacert the system's bundle is trusted (SSL_CERT_FILE, here
    // another CA's): the daemon's certificate is not.
    let other = Pki::new().write(&dir.path, "other");
    let mut command = ctl(&url, &["acquire", "tls/3", "--ttl", "10s"]);
    command.env("SSL_CERT_FILE", &other.ca);
    let out = output(command).await;
    assert_exit(&out, 89);
    let missing = dir.file("missing-ca.pem");
    let out = output(ctl(&url, &["--cacert", &missing, "health"])).await;
    assert_exit(&out, 64);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--cacert"),
        "{}",
        describe(&out)
    );
    assert!(
        h.keys("redlock:lock:tls/3").await.is_empty(),
        "nothing granted"
    );
}

/// A daemon that asks for client certificates: with `--cert`/`--key` from
/// its client CA the calls work; without a certificate, or with one from
/// another CA, the connection is refused (exit 89) and nothing is locked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls() {
    let h = Harness::start(Flavor::Valkey).await;
    let dir = Scratch::new("ctl-mtls");
    let server = Pki::new().write(&dir.path, "server");
    let client = Pki::new().write(&dir.path, "client");
    let stranger = Pki::new().write(&dir.path, "stranger");
    let mut config = tls_config(&h, &server);
    config.server.tls.client_ca = Some(client.ca.clone());
    let (_daemon, url) = secure_daemon(config).await;
    let ca = path(&server.ca);
    let me = [
        "--cacert",
        ca,
        "--cert",
        path(&client.cert),
        "--key",
        path(&client.key),
    ];
    serving(&url, &me).await;

    let mut args = me.to_vec();
    args.extend(["acquire", "mtls/1", "--ttl", "10s"]);
    let out = output(ctl(&url, &args)).await;
    assert_exit(&out, 0);
    let token = assignment(&out, "REDLOCK_TOKEN");

    let others: [&[&str]; 2] = [
        &["--cacert", ca],
        &[
            "--cacert",
            ca,
            "--cert",
            path(&stranger.cert),
            "--key",
            path(&stranger.key),
        ],
    ];
    for flags in others {
        let mut args = flags.to_vec();
        args.extend(["acquire", "mtls/2", "--ttl", "10s"]);
        let out = output(ctl(&url, &args)).await;
        assert_exit(&out, 89);
        let mut args = flags.to_vec();
        args.push("health");
        assert_exit(&output(ctl(&url, &args)).await, 89);
    }
    assert!(
        h.keys("redlock:lock:mtls/2").await.is_empty(),
        "nothing granted"
    );

    let mut args = me.to_vec();
    args.extend(["release", "mtls/1", &token]);
    assert_exit(&output(ctl(&url, &args)).await, 0);
}

/// A TLS daemon that wants bearer tokens: without one, or with a wrong
/// one, calls exit 87 (UNAUTHENTICATED) and nothing is locked; the token
/// from `--token-file` (trailing newline and all) or from
/// `REDLOCK_AUTH_TOKEN` works, `run` passes the file on to its command, an
/// empty token file exits 64; no output ever contains a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_tokens() {
    let h = Harness::start(Flavor::Valkey).await;
    let dir = Scratch::new("ctl-token");
    let server = Pki::new().write(&dir.path, "server");
    let mut config = tls_config(&h, &server);
    config.auth.clients = vec![ClientConfig {
        max_sessions: None,
        max_waiters: None,
        name: "ops".into(),
        token_sha256: Some(redlockd::service::token_sha256(TOKEN)),
        certificate_san: None,
        namespaces: vec!["".into()],
    }];
    let (_daemon, url) = secure_daemon(config).await;
    let ca = path(&server.ca);
    let token_file = dir.file("token");
    std::fs::write(&token_file, format!("{TOKEN}\n")).expect("token file");
    serving(&url, &["--cacert", ca, "--token-file", &token_file]).await;
    let mut outputs = Vec::new();

    let out = output(ctl(
        &url,
        &["--cacert", ca, "acquire", "auth/1", "--ttl", "10s"],
    ))
    .await;
    assert_exit(&out, 87);
    outputs.push(out);
    let wrong = "ctl-wrong-token-0000";
    let mut command = ctl(&url, &["--cacert", ca, "acquire", "auth/1", "--ttl", "10s"]);
    command.env("REDLOCK_AUTH_TOKEN", wrong);
    let out = output(command).await;
    assert_exit(&out, 87);
    assert!(!describe(&out).contains(wrong), "{}", describe(&out));
    outputs.push(out);
    assert!(
        h.keys("redlock:lock:auth/1").await.is_empty(),
        "nothing granted"
    );

    let args = [
        "--cacert",
        ca,
        "--token-file",
        &token_file,
        "acquire",
        "auth/1",
        "--ttl",
        "10s",
    ];
    let out = output(ctl(&url, &args)).await;
    assert_exit(&out, 0);
    let lock_token = assignment(&out, "REDLOCK_TOKEN");
    outputs.push(out);
    let mut command = ctl(
        &url,
        &["--cacert", ca, "--json", "release", "auth/1", &lock_token],
    );
    command.env("REDLOCK_AUTH_TOKEN", TOKEN);
    let out = output(command).await;
    assert_exit(&out, 0);
    outputs.push(out);

    let script = r#""$CTL" validate"#;
    let args = [
        "--cacert",
        ca,
        "--token-file",
        &token_file,
        "run",
        "auth/2",
        "--",
        "sh",
        "-c",
        script,
    ];
    let mut command = ctl(&url, &args);
    command.env("CTL", bin::require("redlockctl"));
    let out = output(command).await;
    assert_exit(&out, 0);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("REDLOCK_HELD=true"),
        "{}",
        describe(&out)
    );
    outputs.push(out);

    let empty = dir.file("empty");
    std::fs::write(&empty, "\n").expect("empty token file");
    let out = output(ctl(
        &url,
        &["--cacert", ca, "--token-file", &empty, "health"],
    ))
    .await;
    assert_exit(&out, 64);
    assert!(
        describe(&out).contains("--token-file"),
        "{}",
        describe(&out)
    );
    outputs.push(out);

    for out in &outputs {
        assert!(
            !describe(out).contains(TOKEN),
            "the token leaked: {}",
            describe(out)
        );
    }
}
