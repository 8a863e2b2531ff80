//! A burst on one connection: 10,000 `Hold` sessions opened at once on one
//! HTTP/2 connection, at the default configuration, are all granted.
//!
//! What it guards: a client process that opens its sessions on one channel
//! (the usual shape: one channel per process) must not meet a limit of the
//! daemon's own making. Two did exist: the per-connection stream limit
//! (`limits.max_calls_per_connection`, once 4,096: the client queued the
//! rest behind sessions that never end), and h2's guard against floods of
//! small frames, which closes the whole connection once the first messages
//! held unread exceed half the connection window (see
//! `crates/redlockd/src/server/window.rs`). In a test binary of its own: its
//! load would disturb latency-sensitive tests.

mod common;

use common::*;
use redlockd::pb;
use redlockd::pb::hold_event::Event;
use redlockd::pb::hold_request::Request;
use redlockd_testkit::masters::Flavor;
use std::time::Duration;
use tokio::sync::mpsc::{self, UnboundedSender};
use tokio::sync::watch;
use tokio_stream::wrappers::ReceiverStream;

/// An open session: its request stream (kept open) and its events.
type Session = (
    mpsc::Sender<pb::HoldRequest>,
    tonic::Streaming<pb::HoldEvent>,
);

/// Sessions opened at once: the figure the benchmark's burst uses.
const SESSIONS: usize = 10_000;
/// Tries per session when the daemon answered that the masters, or its own
/// queue, were too slow (a debug daemon on a starved machine); a lost
/// connection fails every try.
const TRIES: usize = 5;
/// Longest the whole burst may take to be granted on a loaded machine.
const BURST_LIMIT: Duration = Duration::from_secs(240);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_sessions_on_one_connection_are_all_granted() {
    let h = Harness::start(Flavor::Valkey).await;
    let client = h.client().await;
    let (stop, stopped) = watch::channel(false);
    let (report, mut reports) = mpsc::unbounded_channel();
    let sessions: Vec<_> = (0..SESSIONS)
        .map(|i| {
            let (client, stopped, report) = (client.clone(), stopped.clone(), report.clone());
            tokio::spawn(session(client, format!("burst/{i}"), report, stopped))
        })
        .collect();
    drop(report);
    // Every session reports once granted (or failed) and holds until
    // `stop`: the burst counts as granted only with all of them open at once.
    let (mut granted, mut failed) = (0, Vec::new());
    let answered = tokio::time::timeout(BURST_LIMIT, async {
        while let Some(outcome) = reports.recv().await {
            match outcome {
                Ok(()) => granted += 1,
                Err(why) => failed.push(why),
            }
        }
    })
    .await;
    let _ = stop.send(true);
    for session in sessions {
        session.await.expect("session task");
    }
    assert!(
        answered.is_ok(),
        "{granted} granted, {} failed, the rest unanswered after {BURST_LIMIT:?}",
        failed.len()
    );
    assert!(
        failed.is_empty(),
        "{} of {SESSIONS} sessions failed; first: {:?}",
        failed.len(),
        failed.first()
    );
    assert_eq!(granted, SESSIONS);
}

/// One session on the shared connection: opened and granted, reported,
/// held until `stopped` (its stream open), then ended (which releases it).
async fn session(
    mut client: LockClient,
    resource: String,
    report: UnboundedSender<Result<(), String>>,
    mut stopped: watch::Receiver<bool>,
) {
    let held = open(&mut client, &resource).await;
    let _ = report.send(held.as_ref().map(|_| ()).map_err(Clone::clone));
    drop(report);
    let _ = stopped.wait_for(|&stop| stop).await;
    drop(held);
}

/// Opens a Hold session on `resource` and waits for its grant, trying again
/// while the masters are late.
async fn open(client: &mut LockClient, resource: &str) -> Result<Session, String> {
    let mut last = String::new();
    for _ in 0..TRIES {
        let (requests, outgoing) = mpsc::channel(2);
        let acquire = pb::HoldRequest {
            request: Some(Request::Acquire(pb::AcquireRequest {
                resource: resource.to_owned(),
                ttl: ms(30_000),
                owner: "burst".into(),
                ..Default::default()
            })),
        };
        requests.send(acquire).await.map_err(|e| e.to_string())?;
        let mut events = match client.hold(ReceiverStream::new(outgoing)).await {
            Ok(events) => events.into_inner(),
            Err(status) if masters_late(&status) => {
                last = format!("{:?}: {}", status.code(), status.message());
                continue;
            }
            Err(status) => return Err(format!("{resource}: {status:?}")),
        };
        match events.message().await {
            Ok(Some(pb::HoldEvent {
                event: Some(Event::Acquired(_)),
            })) => return Ok((requests, events)),
            Err(status) if masters_late(&status) => {
                last = format!("{:?}: {}", status.code(), status.message());
            }
            other => return Err(format!("{resource}: {other:?}")),
        }
    }
    Err(format!("{resource}: {TRIES} tries, last {last}"))
}

/// The daemon's own answer that the masters were late or that it is
/// overloaded: worth another try, as a client would. A lost connection is
/// not (its calls fail with transport errors).
fn masters_late(status: &tonic::Status) -> bool {
    let message = status.message();
    match status.code() {
        tonic::Code::Unavailable => message.contains("masters"),
        tonic::Code::ResourceExhausted => message.starts_with("the daemon is overloaded"),
        _ => false,
    }
}
