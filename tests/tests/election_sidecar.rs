//! `[[election]]`: two `redlockd` processes campaign in one election on
//! behalf of their pods, with no client at all. Exactly one answers 200 on
//! `GET /elections/NAME` (the readiness probe) and says so in its file;
//! SIGKILLed, the other takes over within the ttl; SIGSTOPped, the other
//! takes over, and the frozen one, resumed, stops claiming to lead.

mod common;

use common::ctl::Scratch;
use common::masters::{find_server, Flavor, LocalMasters};
use common::process::{free_addr, DaemonCommand, DaemonProcess};
use common::*;
use nix::sys::signal::Signal;
use std::net::SocketAddr;
use std::time::Duration;

/// Generous bound for one step on a busy machine.
const LIMIT: Duration = Duration::from_secs(30);

/// A daemon campaigning in `jobs` as `value`, writing `file`.
struct Pod {
    daemon: DaemonProcess,
    metrics: SocketAddr,
    file: String,
}

fn pod(masters: &LocalMasters, dir: &Scratch, value: &str) -> Pod {
    let file = dir.file(&format!("{value}.json"));
    let config = dir.path.join(format!("{value}.toml"));
    std::fs::write(
        &config,
        format!(
            "[[election]]\nname = \"jobs\"\nvalue = \"${{POD_NAME}}:8080\"\nttl = \"2s\"\nfile = \"{file}\"\n"
        ),
    )
    .expect("config file");
    let metrics = free_addr().expect("port");
    let daemon = DaemonCommand::workspace(&masters.urls())
        .expect("redlockd binary")
        .arg("--config")
        .arg(config.to_str().expect("UTF-8 path"))
        .set("metrics.enabled", "true")
        .set("metrics.listen", metrics)
        .log_to(&dir.path.join(format!("{value}.log")))
        .env("POD_NAME", value)
        .spawn()
        .expect("start redlockd");
    Pod {
        daemon,
        metrics,
        file,
    }
}

/// `GET /elections/jobs` on a pod: its status, or 0 when it does not answer.
async fn probe(pod: &Pod) -> u16 {
    let Ok(Ok(stream)) = tokio::time::timeout(
        Duration::from_secs(1),
        tokio::net::TcpStream::connect(pod.metrics),
    )
    .await
    else {
        return 0;
    };
    let io = hyper_util::rt::TokioIo::new(stream);
    let Ok((mut sender, connection)) = hyper::client::conn::http1::handshake(io).await else {
        return 0;
    };
    tokio::spawn(connection);
    let request = http::Request::get("/elections/jobs")
        .header("host", pod.metrics.to_string())
        .body(http_body_util::Empty::<hyper::body::Bytes>::new())
        .expect("request");
    match tokio::time::timeout(Duration::from_secs(1), sender.send_request(request)).await {
        Ok(Ok(response)) => response.status().as_u16(),
        _ => 0,
    }
}

/// Waits until `pod` answers `status`.
async fn until_probe(pod: &Pod, status: u16, what: &str) {
    eventually(LIMIT, what, || async { probe(pod).await == status }).await;
}

fn file_says_leader(pod: &Pod) -> Option<bool> {
    let text = std::fs::read_to_string(&pod.file).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value["leader"].as_bool()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_pod_leads_and_the_other_takes_over() {
    let binary = find_server(Flavor::Valkey).expect("valkey-server (scripts/setup.sh)");
    let masters = LocalMasters::start(&binary, 5).expect("five masters");
    let dir = Scratch::new("election-sidecar");
    let a = pod(&masters, &dir, "pod-a");
    until_probe(&a, 200, "pod-a leads").await;
    let b = pod(&masters, &dir, "pod-b");
    until_probe(&b, 503, "pod-b stands by").await;
    assert_eq!(file_says_leader(&a), Some(true));
    assert_eq!(file_says_leader(&b), Some(false));
    let text = std::fs::read_to_string(&a.file).expect("a's file");
    assert!(text.contains("\"value\":\"pod-a:8080\""), "{text}");
    assert_eq!(probe(&a).await, 200, "both lead: {text}");

    // pod-a is frozen: pod-b takes over once its leadership expires; the
    // frozen one, resumed, no longer claims it.
    a.daemon.signal(Signal::SIGSTOP).expect("SIGSTOP");
    until_probe(&b, 200, "pod-b leads after pod-a froze").await;
    a.daemon.signal(Signal::SIGCONT).expect("SIGCONT");
    until_probe(&a, 503, "the resumed pod-a stands by").await;
    eventually(LIMIT, "pod-a's file says it stands by", || async {
        file_says_leader(&a) == Some(false)
    })
    .await;

    // pod-b is killed: pod-a leads again within the ttl.
    let mut b = b;
    b.daemon.signal(Signal::SIGKILL).expect("SIGKILL");
    let _ = b.daemon.child().wait().await;
    until_probe(&a, 200, "pod-a leads after pod-b was killed").await;
    assert_eq!(file_says_leader(&a), Some(true));
    drop(masters);
}
