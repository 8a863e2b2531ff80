//! TLS with a private CA, mutual TLS, and bearer tokens (with namespaces),
//! against daemons configured for each; certificates from the test kit.

use redlockd::config::ClientConfig;
use redlockd_client::{Client, Error};
use redlockd_proto::pb;
use redlockd_proto::pb::lock_admin_service_client::LockAdminServiceClient;
use redlockd_testkit::daemon::Daemon;
use redlockd_testkit::harness::Harness;
use redlockd_testkit::masters::Flavor;
use redlockd_testkit::pki::Pki;
use sha2::{Digest, Sha256};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const TTL: Duration = Duration::from_secs(30);
const APP_TOKEN: &str = "app-token-0123456789abcdef0123456789";

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("redlockd-client-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// A second daemon over the harness's masters, serving TLS with `pki`'s
/// certificate; with `client_ca`, mutual TLS.
async fn tls_daemon(h: &Harness, pki: &Pki, mutual: bool, name: &str) -> Daemon {
    let files = pki.write(&scratch(name), "server");
    let mut config = h.config();
    config.server.tls.cert = Some(files.cert);
    config.server.tls.key = Some(files.key);
    if mutual {
        config.server.tls.client_ca = Some(files.ca);
    }
    Daemon::start(config.validated().expect("valid config"))
        .await
        .expect("start the TLS daemon")
}

/// The first successful acquire (and release) through `client`, retried
/// while the daemon starts; the last error after 10 s.
async fn works(client: &Client) -> Result<(), Error> {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        match client.acquire("secure/r", TTL).await {
            Ok(lock) => {
                client.release(&lock).await?;
                return Ok(());
            }
            Err(Error::Unavailable(_)) if Instant::now() < until => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

fn https(addr: SocketAddr) -> String {
    format!("https://{addr}")
}

/// TLS with a private CA: a client trusting it acquires; one trusting
/// another CA, or speaking plaintext to the TLS port, cannot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_a_private_ca() {
    let h = Harness::start(Flavor::Valkey).await;
    let pki = Pki::new();
    let daemon = tls_daemon(&h, &pki, false, "tls").await;
    let trusted = Client::builder(https(daemon.addr))
        .ca_certificate(pki.ca.clone())
        .connect_lazy()
        .expect("client");
    works(&trusted).await.expect("a call over TLS");
    let lease = trusted
        .hold("secure/session", TTL)
        .await
        .expect("a session over TLS");
    assert!(lease.release().await.expect("release"));
    // A bare HOST:PORT with a CA is TLS too.
    let bare = Client::builder(daemon.addr.to_string())
        .ca_certificate(pki.ca.clone())
        .connect()
        .await
        .expect("connect");
    works(&bare).await.expect("a call over TLS");
    let stranger = Client::builder(https(daemon.addr))
        .ca_certificate(Pki::new().ca)
        .connect()
        .await
        .expect_err("another CA");
    assert!(matches!(stranger, Error::Unavailable(_)), "{stranger}");
    let plaintext = Client::builder(format!("http://{}", daemon.addr))
        .connect_lazy()
        .expect("client");
    let e = plaintext
        .acquire("secure/r", TTL)
        .await
        .expect_err("plaintext to TLS");
    // The TLS alert the daemon answers ends the connection, or reads as
    // an HTTP/2 protocol error (INTERNAL): either way, no lock outcome.
    assert!(matches!(e, Error::Unavailable(_) | Error::Other(_)), "{e}");
}

/// Mutual TLS: with a client certificate the CA signed, calls work;
/// without one the handshake is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls() {
    let h = Harness::start(Flavor::Valkey).await;
    let pki = Pki::new();
    let daemon = tls_daemon(&h, &pki, true, "mtls").await;
    let with = Client::builder(https(daemon.addr))
        .ca_certificate(pki.ca.clone())
        .client_identity(pki.cert.clone(), pki.key.clone())
        .connect_lazy()
        .expect("client");
    works(&with)
        .await
        .expect("a call with a client certificate");
    let without = Client::builder(https(daemon.addr))
        .ca_certificate(pki.ca.clone())
        .connect_lazy()
        .expect("client");
    let e = without
        .acquire("secure/r", TTL)
        .await
        .expect_err("no client certificate");
    // The handshake's refusal ends the connection (TLS 1.3 reports it
    // after the client's first flight: the call may be under way).
    assert!(matches!(e, Error::Unavailable(_)), "{e}");
}

/// The daemon's clients: one app whose token may lock `orders/`.
fn app_client(config: &mut redlockd::config::Config) {
    config.auth.clients = vec![ClientConfig {
        name: "app".into(),
        token_sha256: Some(hex::encode(Sha256::digest(APP_TOKEN.as_bytes()))),
        certificate_san: None,
        namespaces: vec!["orders/".into()],
        max_sessions: None,
        max_waiters: None,
    }];
}

/// A bearer token goes with every call and session: the right token works
/// in its namespace, is refused outside it (PermissionDenied); no token
/// or a wrong one is Unauthenticated.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bearer_tokens() {
    let h = Harness::start_with(Flavor::Valkey, app_client).await;
    let addr = h.daemons[0].addr.to_string();
    let app = Client::builder(&addr)
        .bearer_token(APP_TOKEN)
        .connect()
        .await
        .expect("connect");
    let lock = app
        .acquire("orders/1", TTL)
        .await
        .expect("in its namespace");
    assert!(app.validate(&lock).await.expect("validate").held);
    let lock = app.extend(&lock, TTL).await.expect("extend");
    assert!(app.release(&lock).await.expect("release"));
    let lease = app
        .hold("orders/2", TTL)
        .await
        .expect("a session with the token");
    assert!(lease.release().await.expect("release"));
    let outside = app.acquire("billing/1", TTL).await.expect_err("outside");
    assert!(matches!(outside, Error::PermissionDenied(_)), "{outside}");
    let anonymous = Client::connect(&addr).await.expect("connect");
    let e = anonymous
        .acquire("orders/1", TTL)
        .await
        .expect_err("no token");
    assert!(matches!(e, Error::Unauthenticated(_)), "{e}");
    let e = anonymous.hold("orders/1", TTL).await.expect_err("no token");
    assert!(matches!(e, Error::Unauthenticated(_)), "{e}");
    let wrong = Client::builder(&addr)
        .bearer_token("not-the-token")
        .connect()
        .await
        .expect("connect");
    let e = wrong
        .acquire("orders/1", TTL)
        .await
        .expect_err("wrong token");
    assert!(matches!(e, Error::Unauthenticated(_)), "{e}");
    assert!(!e.to_string().contains("not-the-token"), "{e}");
    // The daemon's other services through `channel()` get the token too:
    // the admin service knows the caller (not an admin), and refuses a
    // caller without a token as unknown.
    let inspect = |client: &Client| {
        let mut admin = LockAdminServiceClient::new(client.channel());
        async move {
            admin
                .inspect(pb::InspectRequest {
                    resource: "orders/1".into(),
                    ..Default::default()
                })
                .await
                .map(drop)
                .expect_err("not an admin")
                .code()
        }
    };
    assert_eq!(inspect(&app).await, tonic::Code::PermissionDenied);
    assert_eq!(inspect(&anonymous).await, tonic::Code::Unauthenticated);
}
