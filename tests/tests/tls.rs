//! TLS on the gRPC port and to the masters, with certificates generated in
//! the test (rcgen): a TLS handshake and a call work; under mutual TLS a
//! client certificate from an unknown CA is refused; masters reached over
//! `rediss://` (Debian's `redis-server` 7 with `tls-port`) with a custom
//! CA; masters with an ACL user whose password comes from a file; client
//! identities from client certificates (`auth.clients.certificate_san`).

mod common;

use common::*;
use redlockd::config::{ClientConfig, Config};
use redlockd::pb::lock_service_client::LockServiceClient;
use redlockd_testkit::masters::{find_server, Flavor};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

/// A CA and a certificate for `localhost`/`127.0.0.1` it signed, in PEM.
struct Pki {
    ca: String,
    cert: String,
    key: String,
}

fn pki() -> Pki {
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate().expect("key");
    let params = rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
        .expect("params");
    let cert = params.signed_by(&key, &issuer).expect("signed");
    Pki {
        ca: ca.pem(),
        cert: cert.pem(),
        key: key.serialize_pem(),
    }
}

/// A client CA that issues certificates with chosen subjectAltNames.
struct ClientCa {
    ca: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

fn client_ca() -> ClientCa {
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    ClientCa {
        ca: ca.pem(),
        issuer: rcgen::Issuer::new(ca_params, ca_key),
    }
}

impl ClientCa {
    /// A client certificate and key carrying `sans` (DNS names or URIs).
    fn issue(&self, sans: &[&str]) -> Identity {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
        params.subject_alt_names = sans
            .iter()
            .map(|san| {
                if san.contains("://") {
                    rcgen::SanType::URI((*san).try_into().expect("uri"))
                } else {
                    rcgen::SanType::DnsName((*san).try_into().expect("dns"))
                }
            })
            .collect();
        let cert = params.signed_by(&key, &self.issuer).expect("signed");
        Identity::from_pem(cert.pem(), key.serialize_pem())
    }
}

/// A fresh directory for one test's files.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("redlockd-tls-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}

/// Serves `config` on a loopback port until the test ends (the test kit's
/// in-process daemon, left running: the runtime ends with the test).
async fn serve(config: Config) -> SocketAddr {
    let config = config.validated().expect("valid config");
    let daemon = common::daemon::Daemon::start(config).await.expect("daemon");
    let addr = daemon.addr;
    std::mem::forget(daemon);
    addr
}

async fn tls_client(addr: SocketAddr, tls: ClientTlsConfig) -> Result<LockClient, String> {
    let channel = Channel::from_shared(format!("https://{addr}"))
        .map_err(|e| e.to_string())?
        .tls_config(tls)
        .map_err(|e| e.to_string())?;
    for _ in 0..50 {
        match channel.connect().await {
            Ok(channel) => return Ok(LockServiceClient::new(channel)),
            Err(e) if e.to_string().contains("onnection refused") => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => return Err(format!("{e:?}")),
        }
    }
    Err("never accepted".into())
}

/// TLS on the gRPC port: a client trusting the CA calls; then mTLS: a
/// client certificate from the configured CA works, one from another CA
/// is refused in the handshake, and no certificate at all too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_and_mutual_tls() {
    let h = Harness::start(Flavor::Valkey).await;
    let dir = scratch("grpc");
    let server = pki();
    let clients = pki();
    let stranger = pki();
    let mut config = h.config();
    config.server.tls.cert = Some(write(&dir, "server.crt", &server.cert));
    config.server.tls.key = Some(write(&dir, "server.key", &server.key));
    let plain_tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&server.ca))
        .domain_name("localhost");

    let addr = serve(config.clone()).await;
    let mut c = tls_client(addr, plain_tls.clone()).await.expect("TLS");
    acquire(&mut c, "tls/1", 1_000, 0)
        .await
        .expect("a call over TLS");

    config.server.tls.client_ca = Some(write(&dir, "clients-ca.crt", &clients.ca));
    let addr = serve(config).await;
    let c = tls_client(
        addr,
        plain_tls
            .clone()
            .identity(Identity::from_pem(&clients.cert, &clients.key)),
    )
    .await
    .expect("mTLS with a known client certificate");
    // A daemon that meets masters younger than max_ttl with live horizons
    // (tls/1 above, 1 s) sits them out until those end (restart quarantine,
    // a newcomer's known limit): the call succeeds within that.
    eventually(Duration::from_secs(5), "a call over mTLS", || {
        let mut c = c.clone();
        async move { acquire(&mut c, "tls/2", 1_000, 0).await.is_ok() }
    })
    .await;

    for (what, tls) in [
        (
            "unknown client certificate",
            plain_tls
                .clone()
                .identity(Identity::from_pem(&stranger.cert, &stranger.key)),
        ),
        ("no client certificate", plain_tls.clone()),
    ] {
        // TLS 1.3 may report the rejection at the first call, not at connect.
        if let Ok(mut c) = tls_client(addr, tls).await {
            let status = acquire(&mut c, "tls/3", 1_000, 0).await;
            assert!(status.is_err(), "{what}: accepted");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Client identities from mutual-TLS certificates: a certificate whose
/// subjectAltName is configured (`certificate_san`, DNS or URI) locks in
/// its namespace without a bearer token and gets PERMISSION_DENIED outside
/// it; a certificate from the same CA that names no client gets
/// UNAUTHENTICATED; a token client still works over the same mTLS port;
/// nothing refused reaches the masters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_identities() {
    let h = Harness::start(Flavor::Valkey).await;
    let dir = scratch("identities");
    let server = pki();
    let ca = client_ca();
    let mut config = h.config();
    config.metrics.enabled = false;
    config.server.tls.cert = Some(write(&dir, "server.crt", &server.cert));
    config.server.tls.key = Some(write(&dir, "server.key", &server.key));
    config.server.tls.client_ca = Some(write(&dir, "clients-ca.crt", &ca.ca));
    let cert_client = |name: &str, san: &str| ClientConfig {
        max_sessions: None,
        max_waiters: None,
        name: name.into(),
        token_sha256: None,
        certificate_san: Some(san.into()),
        namespaces: vec![format!("{name}/")],
    };
    const ADMIN_TOKEN: &str = "admin-0c2e4a6c8e0b2d4f6a8c0e2b1b3d5f7a";
    config.auth.clients = vec![
        cert_client("orders", "orders.clients.test"),
        cert_client("jobs", "spiffe://example.test/jobs"),
        ClientConfig {
            max_sessions: None,
            max_waiters: None,
            name: "admin".into(),
            token_sha256: Some(redlockd::service::token_sha256(ADMIN_TOKEN)),
            certificate_san: None,
            namespaces: vec!["".into()],
        },
    ];
    let addr = serve(config).await;
    let tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(&server.ca))
        .domain_name("localhost");
    let as_client = |sans: &[&str]| tls.clone().identity(ca.issue(sans));

    let mut orders = tls_client(addr, as_client(&["orders.clients.test"]))
        .await
        .expect("mTLS");
    let lock = acquire(&mut orders, "orders/1", 5_000, 0)
        .await
        .expect("the certificate's identity locks in its namespace");
    let mut jobs = tls_client(addr, as_client(&["spiffe://example.test/jobs"]))
        .await
        .expect("mTLS");
    let jobs_lock = acquire(&mut jobs, "jobs/1", 5_000, 0)
        .await
        .expect("a URI SAN identity");
    let mut stranger = tls_client(addr, as_client(&["stranger.clients.test"]))
        .await
        .expect("the handshake passes: the CA signed it");
    // The grants are answered on a quorum; their last masters' commands
    // land before counting.
    h.held_everywhere(&lock.resource, &lock.token).await;
    h.held_everywhere(&jobs_lock.resource, &jobs_lock.token)
        .await;
    let before = lock_commands(&h).await;

    let status = acquire(&mut orders, "jobs/2", 5_000, 0).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    let status = acquire(&mut jobs, "orders/2", 5_000, 0).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    for resource in ["orders/3", "stranger/1"] {
        let status = acquire(&mut stranger, resource, 5_000, 0)
            .await
            .unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
    }
    let status = release(&mut stranger, &lock).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
    assert_eq!(
        lock_commands(&h).await,
        before,
        "refused calls reached a master"
    );

    // A bearer token still identifies its client over the same port, and
    // decides alone whatever the certificate.
    let mut request = tonic::Request::new(redlockd::pb::AcquireRequest {
        resource: "stranger/2".into(),
        ttl: ms(5_000),
        wait: None,
        owner: "tls-test".into(),
        request_id: String::new(),
        ..Default::default()
    });
    request.metadata_mut().insert(
        "authorization",
        format!("Bearer {ADMIN_TOKEN}").parse().expect("ascii"),
    );
    stranger
        .acquire(request)
        .await
        .expect("the admin token, with a certificate that names no client");

    assert!(release(&mut orders, &lock).await.expect("release"));
    let _ = std::fs::remove_dir_all(dir);
}

async fn lock_commands(h: &Harness) -> u64 {
    let mut n = 0;
    for i in 0..5 {
        n += h.lock_commands(i).await;
    }
    n
}

/// A `redis-server` with only a TLS port, certificates from `pki`.
struct TlsRedis {
    child: std::process::Child,
    port: u16,
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn tls_redis(dir: &Path, pki: &Pki) -> TlsRedis {
    let binary = find_server(Flavor::Redis).unwrap_or_else(|e| panic!("redis: {e}"));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let child = std::process::Command::new(binary)
        .args(["--port", "0", "--tls-port", &port.to_string()])
        .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .arg("--tls-cert-file")
        .arg(write(dir, "redis.crt", &pki.cert))
        .arg("--tls-key-file")
        .arg(write(dir, "redis.key", &pki.key))
        .arg("--tls-ca-cert-file")
        .arg(write(dir, "redis-ca.crt", &pki.ca))
        .args(["--tls-auth-clients", "no", "--dir"])
        .arg(dir)
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start redis-server with TLS");
    eventually(Duration::from_secs(5), "redis-server listens", || async {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
    })
    .await;
    TlsRedis { child, port }
}

/// Masters over `rediss://` trusting a private CA (`masters.tls_ca`): locks
/// work; without the CA the certificate is not trusted and nothing is
/// granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn masters_over_tls() {
    let dir = scratch("masters");
    let pki = pki();
    let redis = tls_redis(&dir, &pki).await;
    let mut config = Config::default();
    config.redlock.nodes = vec![format!("rediss://127.0.0.1:{}", redis.port)];
    config.metrics.enabled = false;
    config.masters.tls_ca = Some(dir.join("redis-ca.crt"));
    let addr = serve(config.clone()).await;
    let c = connect(addr).await;
    eventually(Duration::from_secs(5), "a lock over rediss://", || {
        let mut c = c.clone();
        async move { acquire(&mut c, "tls/m", 1_000, 0).await.is_ok() }
    })
    .await;

    config.masters.tls_ca = None;
    let addr = serve(config).await;
    let mut c = connect(addr).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = acquire(&mut c, "tls/n", 1_000, 0).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    drop(redis);
    let _ = std::fs::remove_dir_all(dir);
}

async fn connect(addr: SocketAddr) -> LockClient {
    for _ in 0..100 {
        if let Ok(c) = LockServiceClient::connect(format!("http://{addr}")).await {
            return c;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("daemon at {addr} never accepted");
}

/// Masters with an ACL user (`masters.username`, password from
/// `masters.password_file`): the daemon's connections log in as that user
/// and locks work; with a wrong password nothing is granted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn masters_with_an_acl_user() {
    let h = Harness::start(Flavor::Valkey).await;
    for i in 0..5 {
        h.raw(
            i,
            "ACL",
            vec![
                "SETUSER".into(),
                "redlockd".into(),
                "on".into(),
                ">acl-pass-1".into(),
                "~*".into(),
                "&*".into(),
                "+@all".into(),
            ],
        )
        .await;
    }
    let dir = scratch("acl");
    let mut config = h.config();
    config.metrics.enabled = false;
    config.masters.username = Some("redlockd".into());
    config.masters.password_file = Some(write(&dir, "password", "acl-pass-1\n"));
    let addr = serve(config.clone()).await;
    let c = connect(addr).await;
    eventually(Duration::from_secs(5), "a lock as the ACL user", || {
        let mut c = c.clone();
        async move { acquire(&mut c, "acl/1", 1_000, 0).await.is_ok() }
    })
    .await;
    let clients = h.raw(0, "CLIENT", vec!["LIST".into()]).await;
    let clients = clients.as_string().unwrap_or_default();
    assert!(clients.contains("user=redlockd"), "{clients}");
    assert!(!clients.contains("acl-pass-1"));

    config.masters.password_file = Some(write(&dir, "wrong", "not-the-password"));
    let addr = serve(config).await;
    let mut c = connect(addr).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let status = acquire(&mut c, "acl/2", 1_000, 0).await.unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unavailable, "{status:?}");
    let _ = std::fs::remove_dir_all(dir);
}
