//! The HTTP/JSON gateway (`[http] listen`) of the real `redlockd` binary
//! over five real masters, called with a real HTTP client (hyper) and once
//! with `curl` over TLS: every call, every error code of the gRPC-to-HTTP
//! mapping, bearer tokens and namespaces, oversized and malformed bodies,
//! and the same locks seen through gRPC.

mod common;

use common::ctl::Scratch;
use common::masters::{find_server, Flavor, LocalMasters};
use common::process::{free_addr, DaemonCommand, DaemonProcess};
use common::*;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use redlockd::pb;
use redlockd::pb::lock_service_client::LockServiceClient;
use redlockd::service::token_sha256;
use redlockd_testkit::pki::Pki;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;

const ORDERS_TOKEN: &str = "http-orders-5c1e9a7f3b2d4e6a8c0f1b3d5e7a9c2e";
const JOBS_TOKEN: &str = "http-jobs-8d2f4a6c8e0b1d3f5a7c9e2b4d6f8a0c";

/// Generous bound for start-up and for one call on a busy machine.
const LIMIT: Duration = Duration::from_secs(30);

/// A daemon process with its gateway on `http`.
struct Gateway {
    _daemon: DaemonProcess,
    grpc: SocketAddr,
    http: SocketAddr,
    _dir: Scratch,
}

/// An HTTP answer: status and JSON body.
#[derive(Debug)]
struct Answer {
    status: u16,
    body: Value,
}

/// Starts the binary over `nodes` with `toml` as its configuration file,
/// its gateway on a free port, and waits until the gateway answers.
async fn start(nodes: &[String], toml: &str, settings: &[(&str, &str)]) -> Gateway {
    let dir = Scratch::new("http-gateway");
    let file = dir.path.join("redlockd.toml");
    std::fs::write(&file, toml).expect("config file");
    let http = free_addr().expect("port");
    let mut command = DaemonCommand::workspace(nodes)
        .expect("redlockd binary")
        .arg("--config")
        .arg(file.to_str().expect("UTF-8 path"))
        .set("http.listen", http)
        .log_to(&dir.path.join("daemon.log"));
    for (key, value) in settings {
        command = command.set(key, value);
    }
    let daemon = command.spawn().expect("start redlockd");
    let grpc = daemon.addr;
    eventually(LIMIT, "the HTTP gateway accepts connections", || async {
        tokio::net::TcpStream::connect(http).await.is_ok()
    })
    .await;
    Gateway {
        _daemon: daemon,
        grpc,
        http,
        _dir: dir,
    }
}

/// `method path` with `headers` and `body` on a new connection.
async fn call(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> (u16, http::HeaderMap, Bytes) {
    let stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .expect("HTTP handshake");
    tokio::spawn(connection);
    let mut request = http::Request::builder()
        .method(method)
        .uri(path)
        .header("host", addr.to_string())
        .header("content-type", "application/json");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = request.body(Full::new(Bytes::from(body))).expect("request");
    let response = tokio::time::timeout(LIMIT, sender.send_request(request))
        .await
        .expect("answered in time")
        .expect("HTTP response");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response
        .into_body()
        .collect()
        .await
        .expect("body")
        .to_bytes();
    (status, headers, body)
}

/// `POST /v1/locks:<rpc>` with `body`, as `token` if any.
async fn post(g: &Gateway, rpc: &str, token: Option<&str>, body: Value) -> Answer {
    post_with(g, rpc, token, &[], body.to_string().into_bytes()).await
}

/// [`post`] with raw bytes and more headers.
async fn post_with(
    g: &Gateway,
    rpc: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> Answer {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut all: Vec<(&str, &str)> = headers.to_vec();
    if let Some(bearer) = &bearer {
        all.push(("authorization", bearer));
    }
    let (status, headers, body) =
        call(g.http, "POST", &format!("/v1/locks:{rpc}"), &all, body).await;
    assert_eq!(headers["content-type"], "application/json", "{rpc}");
    let body = serde_json::from_slice(&body).expect("a JSON answer");
    Answer { status, body }
}

/// Asserts an error answer: HTTP status, gRPC code, and never a token.
fn assert_error(answer: &Answer, http: u16, code: i64, what: &str) {
    assert_eq!(answer.status, http, "{what}: {answer:?}");
    assert_eq!(answer.body["code"], code, "{what}: {answer:?}");
    let message = answer.body["message"].as_str().expect("a message");
    assert!(!message.is_empty(), "{what}");
    for token in [ORDERS_TOKEN, JOBS_TOKEN] {
        assert!(
            !message.contains(token),
            "{what}: the message shows a token"
        );
    }
}

/// Two clients, `orders` (namespace `orders/`) and `jobs` (`jobs/`).
fn token_config() -> String {
    format!(
        "[[auth.clients]]\nname = \"orders\"\ntoken_sha256 = \"{}\"\nnamespaces = [\"orders/\"]\n\n\
         [[auth.clients]]\nname = \"jobs\"\ntoken_sha256 = \"{}\"\nnamespaces = [\"jobs/\"]\n",
        token_sha256(ORDERS_TOKEN),
        token_sha256(JOBS_TOKEN)
    )
}

fn start_masters() -> LocalMasters {
    let binary = find_server(Flavor::Valkey).expect("valkey-server (scripts/setup.sh)");
    LocalMasters::start(&binary, 5).expect("five masters")
}

/// Every call over HTTP, with the locks they make seen through gRPC, and
/// the errors of the lock's life: ABORTED 409, DEADLINE_EXCEEDED 504,
/// FAILED_PRECONDITION 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call() {
    let masters = start_masters();
    let metrics = free_addr().expect("port").to_string();
    let g = start(
        &masters.urls(),
        &token_config(),
        &[("metrics.enabled", "true"), ("metrics.listen", &metrics)],
    )
    .await;
    let orders = Some(ORDERS_TOKEN);

    let acquired = post(
        &g,
        "acquire",
        orders,
        json!({"resource": "orders/42", "ttl": "10s", "wait": "1s", "owner": "http-test"}),
    )
    .await;
    assert_eq!(acquired.status, 200, "{acquired:?}");
    let lock = &acquired.body["lock"];
    assert_eq!(lock["resource"], "orders/42");
    let fence = lock["fence"].as_str().expect("the fence is a string");
    assert!(fence.parse::<u64>().expect("a number") > 0);
    let validity = lock["validity"].as_str().expect("validity as a duration");
    assert!(validity.ends_with('s'), "{validity}");
    let token = lock["token"].as_str().expect("a token").to_owned();
    let held = json!({"resource": "orders/42", "token": token});

    // The same lock, through gRPC: one service behind both doors.
    let channel = client::endpoint(g.grpc).expect("endpoint");
    let channel = channel.connect().await.expect("gRPC connect");
    let mut grpc = LockServiceClient::new(channel);
    let mut seen = tonic::Request::new(pb::ValidateRequest {
        resource: "orders/42".into(),
        token: token.clone(),
    });
    seen.metadata_mut().insert(
        "authorization",
        format!("Bearer {ORDERS_TOKEN}").parse().expect("ascii"),
    );
    assert!(
        grpc.validate(seen)
            .await
            .expect("gRPC validate")
            .get_ref()
            .held
    );

    let valid = post(&g, "validate", orders, held.clone()).await;
    assert_eq!(valid.status, 200, "{valid:?}");
    assert_eq!(valid.body["held"], true);
    assert!(valid.body["validity"].as_str().is_some(), "{valid:?}");

    let extended = post(
        &g,
        "extend",
        orders,
        json!({"resource": "orders/42", "token": token, "ttl": "20s"}),
    )
    .await;
    assert_eq!(extended.status, 200, "{extended:?}");
    assert_eq!(
        extended.body["lock"]["fence"], fence,
        "extend keeps the fence"
    );

    let contended = post(
        &g,
        "acquire",
        orders,
        json!({"resource": "orders/42", "ttl": "5s"}),
    )
    .await;
    assert_error(&contended, 409, 10, "acquiring a held lock");

    // A caller deadline shorter than the wait, from `grpc-timeout`.
    let late = post_with(
        &g,
        "acquire",
        orders,
        &[("grpc-timeout", "300m")],
        json!({"resource": "orders/42", "ttl": "5s", "wait": "20s"})
            .to_string()
            .into_bytes(),
    )
    .await;
    assert_error(&late, 504, 4, "a wait past the caller's deadline");

    let released = post(&g, "release", orders, held.clone()).await;
    assert_eq!(released.status, 200, "{released:?}");
    assert_eq!(released.body, json!({"wasHeld": true}));
    let again = post(&g, "release", orders, held.clone()).await;
    assert_eq!(again.body, json!({"wasHeld": false}), "{again:?}");
    let gone = post(&g, "validate", orders, held.clone()).await;
    assert_eq!(gone.status, 200, "{gone:?}");
    assert_eq!(gone.body["held"], false);

    let not_held = post(
        &g,
        "extend",
        orders,
        json!({"resource": "orders/42", "token": token, "ttl": "5s"}),
    )
    .await;
    assert_error(&not_held, 400, 9, "extending a released lock");

    // Counted in the gRPC path's metrics, without resource names.
    let (status, _, scrape) = call(
        metrics.parse().expect("address"),
        "GET",
        "/metrics",
        &[],
        Vec::new(),
    )
    .await;
    assert_eq!(status, 200);
    let scrape = String::from_utf8_lossy(&scrape);
    for (rpc, outcome) in [
        ("Acquire", "OK"),
        ("Acquire", "ABORTED"),
        ("Acquire", "DEADLINE_EXCEEDED"),
        ("Extend", "FAILED_PRECONDITION"),
        ("Release", "OK"),
        ("Validate", "OK"),
    ] {
        let counted = scrape.lines().any(|line| {
            line.starts_with("redlock_requests_total{")
                && line.contains(&format!("rpc=\"{rpc}\""))
                && line.contains(&format!("outcome=\"{outcome}\""))
                && !line.ends_with(" 0")
        });
        assert!(counted, "{rpc} {outcome} not counted:\n{scrape}");
    }
    assert!(
        !scrape.contains("orders/42"),
        "a resource name in the metrics"
    );
    drop(masters);
}

/// Callers and requests turned away: UNAUTHENTICATED 401 (no token, a
/// wrong one), PERMISSION_DENIED 403 (another client's namespace),
/// INVALID_ARGUMENT 400 (bad JSON, unknown fields, wrong types, a missing
/// ttl), 413 past `server.max_request_bytes`, 404 and 405.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals() {
    let masters = start_masters();
    let g = start(
        &masters.urls(),
        &token_config(),
        &[("server.max_request_bytes", "4096")],
    )
    .await;
    let body = json!({"resource": "orders/1", "ttl": "5s"});

    let anonymous = post(&g, "acquire", None, body.clone()).await;
    assert_error(&anonymous, 401, 16, "no token");
    let wrong = post(&g, "acquire", Some("not-a-token"), body.clone()).await;
    assert_error(&wrong, 401, 16, "a wrong token");
    let outside = post(&g, "acquire", Some(JOBS_TOKEN), body.clone()).await;
    assert_error(&outside, 403, 7, "another client's namespace");
    let own = post(
        &g,
        "acquire",
        Some(JOBS_TOKEN),
        json!({"resource": "jobs/1", "ttl": "5s"}),
    )
    .await;
    assert_eq!(own.status, 200, "{own:?}");

    let orders = Some(ORDERS_TOKEN);
    for (bad, what) in [
        (&b"{\"resource\": "[..], "bad JSON"),
        (b"not json at all", "not JSON"),
        (
            br#"{"resource": "orders/1", "ttl": "5s", "tll": "5s"}"#,
            "an unknown field",
        ),
        (
            br#"{"resource": "orders/1", "ttl": 5}"#,
            "a number for a duration",
        ),
        (br#"{"resource": "orders/1"}"#, "no ttl"),
        (br#"{"resource": "", "ttl": "5s"}"#, "an empty resource"),
    ] {
        let answer = post_with(&g, "acquire", orders, &[], bad.to_vec()).await;
        assert_error(&answer, 400, 3, what);
    }
    let unknown_validate = post(
        &g,
        "validate",
        orders,
        json!({"resource": "orders/1", "token": "x", "ttl": "5s"}),
    )
    .await;
    assert_error(&unknown_validate, 400, 3, "a field of another message");

    let huge = json!({"resource": "orders/1", "ttl": "5s", "owner": "x".repeat(8192)});
    let oversized = post(&g, "acquire", orders, huge).await;
    assert_error(&oversized, 413, 11, "a body over server.max_request_bytes");

    let (status, _, body) = call(g.http, "POST", "/v1/locks:hold", &[], b"{}".to_vec()).await;
    assert_eq!(status, 404, "{body:?}");
    let body: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(body["code"], 5);
    let (status, headers, body) = call(g.http, "GET", "/v1/locks:acquire", &[], Vec::new()).await;
    assert_eq!(status, 405, "{body:?}");
    assert_eq!(headers["allow"], "POST");
    let body: Value = serde_json::from_slice(&body).expect("JSON");
    assert_eq!(body["code"], 12);
    drop(masters);
}

/// No master reachable: UNAVAILABLE 503; the per-caller rate limit (by
/// address without authentication): RESOURCE_EXHAUSTED 429.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unavailable_and_rate_limited() {
    // Ports that were free a moment ago: nothing answers there.
    let nodes: Vec<String> = (0..5)
        .map(|_| format!("redis://{}", free_addr().expect("port")))
        .collect();
    let g = start(
        &nodes,
        "",
        &[("limits.rate_per_second", "1"), ("limits.burst", "2")],
    )
    .await;
    let body = json!({"resource": "r", "ttl": "5s"});
    let first = post(&g, "acquire", None, body.clone()).await;
    assert_error(&first, 503, 14, "no master reachable");
    // The bucket holds two calls and refills one a second: calling on
    // without pause empties it within a few calls (bounded).
    let mut limited = None;
    for _ in 0..50 {
        let answer = post(&g, "acquire", None, body.clone()).await;
        if answer.status != 503 {
            limited = Some(answer);
            break;
        }
    }
    let limited = limited.expect("the rate limit within 50 calls");
    assert_error(&limited, 429, 8, "past the rate limit");
}

/// Whether the gateway keeps a new connection (`Some`) or closes it at once
/// (`None`, past `limits.max_connections`): HTTP/1.1 says nothing first,
/// so a connection still open after a second counts as kept.
async fn kept(addr: SocketAddr) -> Option<tokio::net::TcpStream> {
    use tokio::io::AsyncReadExt;
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("the kernel accepts");
    let mut buf = [0u8; 16];
    match tokio::time::timeout(Duration::from_secs(1), stream.read(&mut buf)).await {
        Err(_) => Some(stream),
        Ok(_) => None,
    }
}

/// The gateway has the gRPC port's connection caps, with places of its
/// own: past `limits.max_connections` a new connection is closed at once,
/// and places come back when connections close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_cap() {
    const CAP: usize = 3;
    let masters = start_masters();
    let cap = CAP.to_string();
    let g = start(
        &masters.urls(),
        "",
        &[
            ("limits.max_connections", &cap),
            ("server.idle_timeout", "1h"),
        ],
    )
    .await;
    // The start-up probe's place may still be taken for a moment.
    let mut held = Vec::new();
    let mut refused = 0;
    for _ in 0..CAP + 5 {
        match kept(g.http).await {
            Some(stream) => held.push(stream),
            None => refused += 1,
        }
    }
    assert!(held.len() <= CAP, "at most {CAP} kept, {} were", held.len());
    assert!(
        refused >= 5,
        "past the cap connections are closed ({refused})"
    );
    drop(held);
    eventually(LIMIT, "places come back once connections close", || async {
        kept(g.http).await.is_some()
    })
    .await;
    let (status, _, body) = call(
        g.http,
        "POST",
        "/v1/locks:acquire",
        &[],
        json!({"resource": "cap/1", "ttl": "5s"})
            .to_string()
            .into_bytes(),
    )
    .await;
    assert_eq!(status, 200, "{body:?}");
}

/// Under `[server.tls]` the gateway serves HTTPS with the gRPC port's
/// certificate; `curl` with the CA acquires and releases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_over_tls() {
    let masters = start_masters();
    let pki_dir = Scratch::new("http-gateway-pki");
    let server = Pki::new().write(&pki_dir.path, "server");
    let toml = format!(
        "[server.tls]\ncert = \"{}\"\nkey = \"{}\"\n",
        server.cert.display(),
        server.key.display()
    );
    let g = start(&masters.urls(), &toml, &[]).await;
    let url = |rpc: &str| format!("https://127.0.0.1:{}/v1/locks:{rpc}", g.http.port());
    let curl = |rpc: &str, body: String| {
        let mut command = std::process::Command::new("curl");
        command
            .args(["-sS", "--max-time", "30", "--cacert"])
            .arg(&server.ca)
            .args(["-H", "Content-Type: application/json", "-d"])
            .arg(body)
            .arg(url(rpc));
        command
    };
    let out = curl(
        "acquire",
        json!({"resource": "tls/1", "ttl": "10s"}).to_string(),
    )
    .output()
    .expect("curl (apt-get install curl)");
    assert!(out.status.success(), "{out:?}");
    let acquired: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let token = acquired["lock"]["token"].as_str().expect("a token");
    let out = curl(
        "release",
        json!({"resource": "tls/1", "token": token}).to_string(),
    )
    .output()
    .expect("curl");
    assert!(out.status.success(), "{out:?}");
    let released: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(released, json!({"wasHeld": true}));
    // Plain HTTP on the TLS port is refused, not served.
    let plain = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "30", "-d", "{}"])
        .arg(format!(
            "http://127.0.0.1:{}/v1/locks:acquire",
            g.http.port()
        ))
        .output()
        .expect("curl");
    assert!(
        !String::from_utf8_lossy(&plain.stdout).contains("\"lock\""),
        "{plain:?}"
    );
    drop(masters);
}

/// Under mutual TLS (`server.tls.client_ca`) the client certificate is the
/// caller's identity on the gateway as on the gRPC port: its namespace is
/// served, another is PERMISSION_DENIED 403, and without a certificate the
/// handshake is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates() {
    let masters = start_masters();
    let pki_dir = Scratch::new("http-gateway-mtls");
    let server = Pki::new().write(&pki_dir.path, "server");
    let client = Pki::new().write(&pki_dir.path, "client");
    let toml = format!(
        "[server.tls]\ncert = \"{}\"\nkey = \"{}\"\nclient_ca = \"{}\"\n\n\
         [[auth.clients]]\nname = \"mtls\"\ncertificate_san = \"localhost\"\n\
         namespaces = [\"mtls/\"]\n",
        server.cert.display(),
        server.key.display(),
        client.ca.display()
    );
    let g = start(&masters.urls(), &toml, &[]).await;
    let curl = |resource: &str, with_certificate: bool| {
        let mut command = std::process::Command::new("curl");
        command
            .args([
                "-sS",
                "--max-time",
                "30",
                "-w",
                "\n%{http_code}",
                "--cacert",
            ])
            .arg(&server.ca);
        if with_certificate {
            command
                .arg("--cert")
                .arg(&client.cert)
                .arg("--key")
                .arg(&client.key);
        }
        command
            .arg("-d")
            .arg(json!({"resource": resource, "ttl": "10s"}).to_string())
            .arg(format!(
                "https://127.0.0.1:{}/v1/locks:acquire",
                g.http.port()
            ));
        command.output().expect("curl (apt-get install curl)")
    };
    let status = |out: &std::process::Output| {
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        text.lines().last().unwrap_or_default().to_owned()
    };
    let own = curl("mtls/1", true);
    assert!(own.status.success(), "{own:?}");
    assert_eq!(status(&own), "200", "{own:?}");
    let other = curl("other/1", true);
    assert_eq!(status(&other), "403", "{other:?}");
    let anonymous = curl("mtls/2", false);
    assert!(
        !anonymous.status.success() || status(&anonymous) == "401",
        "served without a client certificate: {anonymous:?}"
    );
    drop(masters);
}

/// `curl` of `GET /v1/elections/{path}` (the name, and any query) with a
/// bearer token: the HTTP status and the JSON body.
fn curl_election(http: SocketAddr, path: &str, token: &str) -> (u16, Value) {
    let out = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "30", "-w", "\n%{http_code}", "-H"])
        .arg(format!("Authorization: Bearer {token}"))
        .arg(format!("http://{http}/v1/elections/{path}"))
        .output()
        .expect("curl (apt-get install curl)");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').expect("a status line");
    let body: Value = serde_json::from_str(body).expect("JSON");
    (code.parse::<u16>().expect("an HTTP status"), body)
}

/// A Campaign over gRPC as `orders`, elected: the stream's sender (dropped:
/// resign), its events, and the term.
async fn campaign_as_orders(
    grpc: SocketAddr,
    name: &str,
    value: &str,
) -> (
    tokio::sync::mpsc::Sender<pb::CampaignRequest>,
    tonic::Streaming<pb::CampaignResponse>,
    u64,
) {
    use redlockd::pb::election_service_client::ElectionServiceClient;
    let channel = client::endpoint(grpc).expect("endpoint");
    let mut elections = ElectionServiceClient::new(channel.connect().await.expect("connect"));
    let (requests, outgoing) = tokio::sync::mpsc::channel(2);
    requests
        .send(pb::CampaignRequest {
            request: Some(pb::campaign_request::Request::Campaign(
                pb::campaign_request::Start {
                    name: name.into(),
                    value: value.into(),
                    ttl: ms(10_000),
                },
            )),
        })
        .await
        .expect("queue");
    let mut campaign = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(outgoing));
    campaign.metadata_mut().insert(
        "authorization",
        format!("Bearer {ORDERS_TOKEN}").parse().expect("ascii"),
    );
    let mut events = elections
        .campaign(campaign)
        .await
        .expect("campaign")
        .into_inner();
    let term = match events
        .message()
        .await
        .expect("an event")
        .and_then(|e| e.event)
    {
        Some(pb::campaign_response::Event::Elected(leadership)) => leadership.term,
        other => panic!("expected `elected`, got {other:?}"),
    };
    (requests, events, term)
}

/// `GET /v1/elections/{name}` with `curl`: the leader a Campaign made over
/// gRPC (value, term as a string), then none once it resigned; another
/// namespace's election is PERMISSION_DENIED 403.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elections_leader_over_http() {
    let masters = start_masters();
    let g = start(&masters.urls(), &token_config(), &[]).await;
    let curl = |path: &str, token: &str| curl_election(g.http, path, token);
    let (code, none) = curl("orders/leader", ORDERS_TOKEN);
    assert_eq!(code, 200, "{none}");
    assert_ne!(none["hasLeader"], true, "{none}");

    let (requests, mut events, term) =
        campaign_as_orders(g.grpc, "orders/leader", "10.0.0.7:8080").await;
    let (code, led) = curl("orders/leader", ORDERS_TOKEN);
    assert_eq!(code, 200, "{led}");
    assert_eq!(led["hasLeader"], true, "{led}");
    assert_eq!(led["leader"]["value"], "10.0.0.7:8080", "{led}");
    assert_eq!(led["leader"]["name"], "orders/leader", "{led}");
    assert_eq!(led["leader"]["term"], term.to_string(), "{led}");
    let (code, denied) = curl("orders/leader", JOBS_TOKEN);
    assert_eq!((code, &denied["code"]), (403, &json!(7)), "{denied}");

    drop(requests); // half-close: resign
    while let Ok(Some(_)) = events.message().await {}
    let (code, after) = curl("orders/leader", ORDERS_TOKEN);
    assert_eq!(code, 200, "{after}");
    assert_ne!(after["hasLeader"], true, "{after}");
    drop(masters);
}

/// `GET /v1/elections/{name}?after=TERM&wait=D` with `curl`: answered at
/// once when the leader is not that term, after `wait` with the same leader
/// when nothing changed, and, while waiting, as soon as the leader resigns
/// (the long poll is still open before the resign, and answers no leader
/// after it). A malformed query is a 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_elections_leader_long_polled_over_http() {
    let masters = start_masters();
    let g = start(&masters.urls(), &token_config(), &[]).await;
    let http = g.http;
    let (requests, mut events, term) =
        campaign_as_orders(g.grpc, "orders/polled", "10.0.0.8:8080").await;

    let (code, moved) = curl_election(http, "orders/polled?after=0", ORDERS_TOKEN);
    assert_eq!(code, 200, "{moved}");
    assert_eq!(moved["leader"]["term"], term.to_string(), "{moved}");
    let query = format!("orders/polled?after={term}&wait=100ms");
    let (code, same) = curl_election(http, &query, ORDERS_TOKEN);
    assert_eq!(code, 200, "{same}");
    assert_eq!(
        same["leader"]["term"],
        term.to_string(),
        "unchanged: {same}"
    );

    let query = format!("orders/polled?after={term}&wait=20s");
    let polling = tokio::task::spawn_blocking(move || {
        let started = std::time::Instant::now();
        let answer = curl_election(http, &query, ORDERS_TOKEN);
        (answer, started.elapsed())
    });
    // Nothing moved on: the poll is still open half a second later (had it
    // not reached the daemon by then, the resign below comes first, and it
    // is answered no leader at once: the same outcome).
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!polling.is_finished(), "answered before anything changed");
    drop(requests); // half-close: resign
    while let Ok(Some(_)) = events.message().await {}
    let ((code, resigned), took) = polling.await.expect("curl");
    assert_eq!(code, 200, "{resigned}");
    assert_ne!(resigned["hasLeader"], true, "{resigned}");
    eprintln!("long poll answered {took:?} after it was sent (the resign in between)");

    for bad in ["wait=1s", "after=x", "after=1&wait=soon", "term=1"] {
        let (code, refused) = curl_election(http, &format!("orders/polled?{bad}"), ORDERS_TOKEN);
        assert_eq!(
            (code, &refused["code"]),
            (400, &json!(3)),
            "{bad}: {refused}"
        );
    }
    drop(masters);
}
