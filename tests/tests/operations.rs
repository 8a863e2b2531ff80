//! What operators rely on: Prometheus metrics that move with the calls, the
//! standard gRPC health check following the quorum, server reflection, a
//! graceful SIGTERM, and deploy files whose settings really work.

mod common;

use common::process::{free_addr, DaemonCommand};

use common::*;
use redlockd::config::Config;
use redlockd::pb::lock_service_client::LockServiceClient;
use redlockd_testkit::masters::Flavor;
use std::collections::HashMap;
use std::io::Write;
use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tonic::transport::Channel;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

/// The `redlockd` binary, serving the harness's masters on free ports.
struct Binary {
    child: tokio::process::Child,
    channel: Channel,
    metrics: SocketAddr,
    /// The gRPC address, for more connections.
    url: String,
}

/// Starts the binary with `env` (on top of the masters and free ports).
async fn start_binary(h: &Harness, env: &[(&str, String)]) -> Binary {
    start_binary_with_args(h, env, &[]).await
}

/// Starts the binary with `env` and command-line `args`.
async fn start_binary_with_args(h: &Harness, env: &[(&str, String)], args: &[&str]) -> Binary {
    let (grpc, metrics) = (free_addr().expect("port"), free_addr().expect("port"));
    let mut daemon = DaemonCommand::workspace(&h.masters.urls())
        .expect("redlockd binary")
        .set("server.listen", grpc)
        .set("metrics.enabled", true)
        .set("metrics.listen", metrics);
    for arg in args {
        daemon = daemon.arg(*arg);
    }
    let mut command = daemon.command().expect("command");
    command.stderr(Stdio::null());
    for (key, value) in env {
        command.env(key, value);
    }
    let child = command.spawn().expect("start redlockd");
    let url = format!("http://{grpc}");
    let channel = client::endpoint(grpc).expect("endpoint");
    for _ in 0..300 {
        if let Ok(channel) = channel.connect().await {
            return Binary {
                child,
                channel,
                metrics,
                url,
            };
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("redlockd never accepted a connection at {url}");
}

/// `GET /metrics`, the body.
fn scrape(addr: SocketAddr) -> String {
    redlockd_testkit::metrics::scrape(addr).expect("the metrics endpoint answers 200")
}

/// The value of the sample `name` whose labels include all of `labels`.
fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .find(|line| {
            labels
                .iter()
                .all(|(k, v)| line.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|line| line.rsplit(' ').next())
        .and_then(|value| value.parse().ok())
}

async fn health(channel: &Channel) -> ServingStatus {
    let response = HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: "redlock.v1.LockService".into(),
        })
        .await
        .expect("health check");
    ServingStatus::try_from(response.into_inner().status).unwrap_or(ServingStatus::Unknown)
}

/// `promtool check metrics` (Prometheus's own linter) accepts what the real
/// daemon serves after a few calls: HELP on every metric, counters ending
/// in `_total`, units in names. promtool comes from Debian's `prometheus`
/// package (scripts/setup.sh installs it).
#[tokio::test]
async fn promtool_accepts_the_metrics() {
    let h = Harness::start(Flavor::Valkey).await;
    let daemon = start_binary(&h, &[]).await;
    let mut c = LockServiceClient::new(daemon.channel.clone());
    let lock = acquire(&mut c, "linted", 10_000, 0).await.expect("granted");
    let mut other = LockServiceClient::new(daemon.channel.clone());
    acquire(&mut other, "linted", 10_000, 0)
        .await
        .expect_err("held");
    release(&mut c, &lock).await.expect("released");
    let text = scrape(daemon.metrics);
    for name in [
        "redlock_build_info",
        "process_resident_memory_bytes",
        "process_open_fds",
    ] {
        assert!(text.contains(name), "{name} missing:\n{text}");
    }
    let mut promtool = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("promtool (Debian package prometheus; scripts/setup.sh installs it)");
    promtool
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("feed promtool");
    let out = promtool.wait_with_output().expect("promtool");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "promtool check metrics:\n{report}\n---\n{text}"
    );
    assert!(
        report.trim().is_empty(),
        "promtool check metrics:\n{report}"
    );
}

/// After a known sequence of calls the request, vote and contention counters
/// moved exactly as they should; no label carries a resource name.
#[tokio::test]
async fn metrics_count_the_calls() {
    let h = Harness::start(Flavor::Valkey).await;
    let daemon = start_binary(&h, &[]).await;
    let mut c = LockServiceClient::new(daemon.channel.clone());
    let lock = acquire(&mut c, "metered-resource", 10_000, 0)
        .await
        .expect("granted");
    let status = acquire(&mut c, "metered-resource", 10_000, 0)
        .await
        .expect_err("held");
    assert_eq!(status.code(), tonic::Code::Aborted);
    let status = acquire(&mut c, "", 10_000, 0).await.expect_err("invalid");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(release(&mut c, &lock).await.expect("release"));

    let text = scrape(daemon.metrics);
    let requests = |rpc, outcome| {
        sample(
            &text,
            "redlock_requests_total",
            &[("rpc", rpc), ("outcome", outcome)],
        )
    };
    assert_eq!(requests("Acquire", "OK"), Some(1.0), "{text}");
    assert_eq!(requests("Acquire", "ABORTED"), Some(1.0));
    assert_eq!(requests("Acquire", "INVALID_ARGUMENT"), Some(1.0));
    assert_eq!(requests("Release", "OK"), Some(1.0));
    assert_eq!(sample(&text, "redlock_contended_total", &[]), Some(1.0));
    assert!(
        sample(
            &text,
            "redlock_acquire_votes_total",
            &[("result", "granted")]
        ) >= Some(3.0)
    );
    assert!(
        sample(
            &text,
            "redlock_acquire_votes_total",
            &[("result", "refused")]
        ) >= Some(3.0)
    );
    assert_eq!(
        sample(
            &text,
            "redlock_request_duration_seconds_count",
            &[("rpc", "Acquire")]
        ),
        Some(3.0)
    );
    assert_eq!(
        sample(&text, "redlock_grant_validity_ratio_count", &[]),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, "redlock_sessions_active", &[]).unwrap_or(0.0),
        0.0
    );
    eventually(
        Duration::from_secs(5),
        "the watcher reports the masters",
        || async {
            let text = scrape(daemon.metrics);
            sample(&text, "redlock_quorum_available", &[]) == Some(1.0)
                && h.masters.urls().iter().all(|url| {
                    let node = url.trim_start_matches("redis://");
                    sample(&text, "redlock_node_up", &[("node", node)]) == Some(1.0)
                        // Fresh masters at the default quarantine: none.
                        && sample(&text, "redlock_node_quarantined", &[("node", node)])
                            == Some(0.0)
                        && sample(&text, "redlock_node_quarantine_seconds", &[("node", node)])
                            == Some(0.0)
                })
        },
    )
    .await;
    assert!(
        !text.contains("metered-resource"),
        "a resource name leaked into a label"
    );
    assert!(!text.contains(&lock.token), "a token leaked");
}

/// Refused calls are counted by reason in `redlock_auth_denied_total`:
/// no credentials, an unknown token, a resource outside the namespaces, an
/// empty token bucket; the labels carry the reason only, never a token, a
/// client or a resource. A call beyond the connection's limit is not refused
/// at all: the limit is announced as HTTP/2's stream limit, and the client
/// queues the call (`too_many_calls` is only for clients that ignore it).
#[tokio::test]
async fn denied_calls_are_counted() {
    const TOKEN: &str = "metered-4b6d8f0a1c3e5b7d9f2a4c6e7f3a9c2e";
    let h = Harness::start(Flavor::Valkey).await;
    let dir = std::env::temp_dir().join(format!("redlockd-ops-denied-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let file = dir.join("redlockd.toml");
    std::fs::write(
        &file,
        format!(
            "[limits]\nrate_per_second = 1\nburst = 4\nmax_calls_per_connection = 1\n\
             [[auth.clients]]\nname = \"metered\"\ntoken_sha256 = \"{}\"\n\
             namespaces = [\"allowed/\"]\n",
            redlockd::service::token_sha256(TOKEN)
        ),
    )
    .expect("config file");
    let file_arg = file.to_string_lossy().into_owned();
    let daemon = start_binary_with_args(&h, &[], &["--config", &file_arg]).await;
    // The health service needs no token; the grant below needs a quorum.
    eventually(Duration::from_secs(10), "a quorum of masters", || async {
        health(&daemon.channel).await == ServingStatus::Serving
    })
    .await;
    let denied =
        |text: &str, reason| sample(text, "redlock_auth_denied_total", &[("reason", reason)]);
    let text = scrape(daemon.metrics);
    assert_eq!(denied(&text, "unauthenticated"), None, "{text}");

    let with_token = |token: Option<&str>, resource: &str| {
        let mut request = tonic::Request::new(redlockd::pb::AcquireRequest {
            resource: resource.into(),
            ttl: ms(5_000),
            wait: None,
            owner: "metrics-test".into(),
            request_id: String::new(),
            ..Default::default()
        });
        if let Some(token) = token {
            request.metadata_mut().insert(
                "authorization",
                format!("Bearer {token}").parse().expect("ascii"),
            );
        }
        request
    };
    let mut c = LockServiceClient::new(daemon.channel.clone());
    for token in [None, Some("not-a-known-token")] {
        let status = c.acquire(with_token(token, "allowed/1")).await.unwrap_err();
        assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
    }
    let status = c
        .acquire(with_token(Some(TOKEN), "secret-resource/1"))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    c.acquire(with_token(Some(TOKEN), "allowed/1"))
        .await
        .expect("granted");
    // A Hold session fills its connection's one call slot. The daemon
    // announces the slot count as HTTP/2's stream limit, so a well-behaved
    // client queues another call on that connection instead of having it
    // refused; it is served once the session ends.
    let session = Channel::from_shared(daemon.url.clone())
        .expect("url")
        .connect()
        .await
        .expect("connect");
    let mut session = LockServiceClient::new(session);
    let (tx, rx) = tokio::sync::mpsc::channel(1);
    tx.send(redlockd::pb::HoldRequest {
        request: Some(redlockd::pb::hold_request::Request::Acquire(
            with_token(Some(TOKEN), "allowed/held").into_inner(),
        )),
    })
    .await
    .expect("queue");
    let mut hold = tonic::Request::new(tokio_stream::wrappers::ReceiverStream::new(rx));
    hold.metadata_mut().insert(
        "authorization",
        format!("Bearer {TOKEN}").parse().expect("ascii"),
    );
    let mut events = session.hold(hold).await.expect("hold").into_inner();
    events
        .message()
        .await
        .expect("first event")
        .expect("acquired");
    let queued = tokio::spawn({
        let mut session = session.clone();
        let request = with_token(Some(TOKEN), "allowed/2");
        async move { session.acquire(request).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !queued.is_finished(),
        "a call beyond the connection's stream limit was served (or refused) while the session held the slot"
    );
    drop((tx, events));
    tokio::time::timeout(Duration::from_secs(10), queued)
        .await
        .expect("the queued call is served once the session ends")
        .expect("no panic")
        .expect("granted");
    // The bucket held 4 and refills at 1/s: the calls above took all but
    // whatever trickled back, and a quick run of calls on the first
    // connection empties it.
    let mut limited = 0;
    for i in 0..8 {
        let resource = format!("allowed/r{i}");
        if let Err(status) = c.acquire(with_token(Some(TOKEN), &resource)).await {
            assert_eq!(status.code(), tonic::Code::ResourceExhausted, "{status:?}");
            limited += 1;
        }
    }
    assert!(limited > 0, "the rate limit never refused a call");

    let text = scrape(daemon.metrics);
    assert_eq!(denied(&text, "unauthenticated"), Some(2.0), "{text}");
    assert_eq!(denied(&text, "permission_denied"), Some(1.0), "{text}");
    assert_eq!(denied(&text, "too_many_calls"), None, "{text}");
    assert_eq!(
        denied(&text, "rate_limited"),
        Some(f64::from(limited)),
        "{text}"
    );
    for line in text
        .lines()
        .filter(|l| l.contains("redlock_auth_denied_total"))
    {
        for secret in [
            TOKEN,
            "not-a-known-token",
            "metered",
            "secret-resource",
            "allowed/",
        ] {
            assert!(!line.contains(secret), "{secret} leaked into {line}");
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Health follows the quorum: NOT_SERVING with three of five masters down,
/// SERVING again once they are back.
#[tokio::test]
async fn health_follows_the_quorum() {
    let mut h = Harness::start(Flavor::Valkey).await;
    let channel = Channel::from_shared(format!("http://{}", h.daemons[0].addr))
        .expect("url")
        .connect()
        .await
        .expect("connect");
    eventually(Duration::from_secs(5), "SERVING", || async {
        health(&channel).await == ServingStatus::Serving
    })
    .await;
    for i in 2..5 {
        h.masters.stop(i).expect("stop");
    }
    eventually(Duration::from_secs(5), "NOT_SERVING", || async {
        health(&channel).await == ServingStatus::NotServing
    })
    .await;
    for i in 2..5 {
        h.masters.restart(i).expect("restart");
    }
    eventually(Duration::from_secs(15), "SERVING again", || async {
        health(&channel).await == ServingStatus::Serving
    })
    .await;
}

/// Server reflection lists the lock service (what `grpcurl list` shows).
#[tokio::test]
async fn reflection_lists_the_service() {
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    let h = Harness::start(Flavor::Valkey).await;
    let channel = Channel::from_shared(format!("http://{}", h.daemons[0].addr))
        .expect("url")
        .connect()
        .await
        .expect("connect");
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = ServerReflectionClient::new(channel)
        .server_reflection_info(tokio_stream::iter(vec![request]))
        .await
        .expect("reflection")
        .into_inner();
    let response = responses
        .message()
        .await
        .expect("stream")
        .expect("a response");
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else {
        panic!("unexpected {response:?}");
    };
    let names: Vec<_> = list.service.into_iter().map(|s| s.name).collect();
    assert!(
        names.contains(&"redlock.v1.LockService".to_owned()),
        "{names:?}"
    );
    assert!(
        names.contains(&"grpc.health.v1.Health".to_owned()),
        "{names:?}"
    );
}

/// SIGTERM while a call is in flight (an Acquire waiting for a lock that
/// expires after the signal): the daemon drains, so the waiting call is
/// answered UNAVAILABLE at once (the client can go to another replica), and
/// the process exits 0, with no session open, long before the grace.
#[tokio::test]
async fn sigterm_answers_waiting_calls_and_exits() {
    let h = Harness::start(Flavor::Valkey).await;
    let mut daemon = start_binary(&h, &[]).await;
    let mut c = LockServiceClient::new(daemon.channel.clone());
    acquire(&mut c, "busy", 1_500, 0).await.expect("granted");
    let mut waiter = c.clone();
    let in_flight = tokio::spawn(async move { acquire(&mut waiter, "busy", 1_000, 10_000).await });
    eventually(Duration::from_secs(5), "the waiter is waiting", || async {
        h.lock_commands(0).await >= 4
    })
    .await;
    let pid = daemon.child.id().expect("running").to_string();
    let signalled = Instant::now();
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let answered = in_flight
        .await
        .expect("task")
        .expect_err("the waiting Acquire is not granted");
    assert_eq!(answered.code(), tonic::Code::Unavailable, "{answered:?}");
    assert!(answered.message().starts_with("draining"), "{answered:?}");
    let status = tokio::time::timeout(Duration::from_secs(15), daemon.child.wait())
        .await
        .expect("exits within the grace period")
        .expect("wait");
    assert!(status.success(), "{status:?}");
    println!("exited {:?} after SIGTERM", signalled.elapsed());
}

/// The text of `path`, relative to the repository's root.
fn repo_file(path: &str) -> String {
    let full = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path);
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("{}: {e}", full.display()))
}

fn yaml(path: &str) -> yaml_rust2::Yaml {
    let text = repo_file(path);
    let mut docs = yaml_rust2::YamlLoader::load_from_str(&text).expect(path);
    assert!(!docs.is_empty(), "{path} is empty");
    docs.swap_remove(0)
}

/// The compose file parses, its redlockd environment is a valid
/// configuration, Prometheus scrapes the metrics port it sets, and the
/// binary started with those settings (masters swapped for local ones)
/// serves locks.
#[tokio::test]
async fn compose_settings_work() {
    let compose = yaml("docker-compose.yml");
    let service = &compose["services"]["redlockd"];
    let env: HashMap<String, String> = service["environment"]
        .as_hash()
        .expect("redlockd.environment is a map")
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().expect("key").to_owned(),
                v.as_str().expect("value").to_owned(),
            )
        })
        .collect();
    let config = Config::load_with_env(None, env.clone())
        .expect("the compose settings are a valid configuration");
    assert_eq!(config.redlock.nodes.len(), 5);
    for i in 1..=5 {
        assert!(
            compose["services"][format!("valkey{i}").as_str()]
                .as_hash()
                .is_some(),
            "valkey{i}"
        );
    }
    let prometheus = yaml("deploy/compose/prometheus.yml");
    let target = prometheus["scrape_configs"][0]["static_configs"][0]["targets"][0]
        .as_str()
        .expect("a static target");
    assert_eq!(target, format!("redlockd:{}", config.metrics.listen.port()));

    let h = Harness::start(Flavor::Valkey).await;
    let local: Vec<(&str, String)> = env
        .iter()
        .filter(|(k, _)| !k.contains("NODES") && !k.contains("LISTEN"))
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    let daemon = start_binary(&h, &local).await;
    let mut c = LockServiceClient::new(daemon.channel.clone());
    let lock = acquire(&mut c, "compose", 1_000, 0).await.expect("granted");
    assert!(release(&mut c, &lock).await.expect("release"));
}

/// Each Kubernetes manifest that runs redlockd parses, the configuration
/// in its ConfigMap is one the daemon accepts, and its readiness probe checks
/// the lock service's health on the port the daemon listens on. (The
/// manifests' schemas, grace periods and security settings are checked by
/// scripts/check-deploy.sh.)
#[test]
fn kubernetes_examples_are_consistent() {
    for (file, pod_section) in [
        ("deploy/kubernetes/sidecar.yaml", "initContainers"),
        ("deploy/kubernetes/sidecar-pre-1.29.yaml", "containers"),
        ("deploy/kubernetes/standalone.yaml", "containers"),
    ] {
        let text = repo_file(file);
        let docs = yaml_rust2::YamlLoader::load_from_str(&text).expect(file);
        let toml = docs
            .iter()
            .find_map(|d| d["data"]["redlockd.toml"].as_str())
            .unwrap_or_else(|| panic!("{file}: no ConfigMap with redlockd.toml"));
        let path = std::env::temp_dir().join(format!("redlockd-k8s-{}.toml", std::process::id()));
        std::fs::write(&path, toml).expect("write");
        let config = Config::load_with_env(Some(&path), HashMap::new());
        let _ = std::fs::remove_file(&path);
        let config = config.unwrap_or_else(|e| panic!("{file}: invalid configuration: {e}"));
        let workload = docs
            .iter()
            .find(|d| d["kind"].as_str() == Some("Deployment"))
            .unwrap_or_else(|| panic!("{file}: no Deployment"));
        let daemon = workload["spec"]["template"]["spec"][pod_section]
            .as_vec()
            .unwrap_or_else(|| panic!("{file}: no {pod_section}"))
            .iter()
            .find(|c| c["name"].as_str() == Some("redlockd"))
            .unwrap_or_else(|| panic!("{file}: no redlockd in {pod_section}"));
        // The drain, the final release and the 5 s hard stop end before the
        // kubelet's SIGKILL.
        let kill_after = workload["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
            .as_i64()
            .unwrap_or_else(|| panic!("{file}: no terminationGracePeriodSeconds"));
        let stop_by = config.server.shutdown_grace + Duration::from_secs(5);
        assert!(
            stop_by < Duration::from_secs(u64::try_from(kill_after).expect("positive")),
            "{file}: shutdown_grace + 5 s = {stop_by:?} must end before the SIGKILL at {kill_after} s"
        );
        let probe = &daemon["readinessProbe"]["grpc"];
        assert_eq!(
            probe["service"].as_str(),
            Some("redlock.v1.LockService"),
            "{file}"
        );
        assert_eq!(
            probe["port"].as_i64(),
            Some(i64::from(config.server.listen.port())),
            "{file}"
        );
    }
}

/// Every metric the Grafana dashboard queries is one the daemon exports.
#[test]
fn dashboard_uses_real_metrics() {
    let text = repo_file("deploy/grafana/redlockd-dashboard.json");
    let dashboard: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let declared = repo_file("crates/redlockd/src/metrics/names.rs");
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(!panels.is_empty());
    for panel in panels {
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            for word in expr.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
                if let Some(name) = word.strip_prefix("redlock_") {
                    let base = name
                        .trim_end_matches("_bucket")
                        .trim_end_matches("_count")
                        .trim_end_matches("_sum");
                    assert!(
                        declared.contains(&format!("\"redlock_{base}\"")),
                        "{word} in {expr}"
                    );
                }
            }
        }
    }
}
