//! Frozen client: how long a lock held through `Hold` by a client process
//! that stops (SIGSTOP: a stop-the-world pause, a suspended VM) takes to
//! pass on to a waiting client. The frozen process's kernel still answers
//! TCP, so only the daemon's unanswered HTTP/2 PING ends the session.
//!
//! For each ttl of `--frozen-ttls`, against one `redlockd` process at its
//! default settings: a child process (this binary in the hidden
//! `--frozen-holder` mode) opens a Hold session with that ttl and says when
//! it holds the lock; it is SIGSTOPped; a client here Acquires the same
//! resource with a long wait. Reported: the time from SIGSTOP to that
//! grant, beside the documented bound `ttl + keepalive_timeout` of the
//! daemon (docs/design/sessions.md, client liveness): the frozen client
//! keeps its lock for the validity it was last told, which is extended
//! only while the client was heard from within the keepalive timeout, and
//! the connection itself is closed after `keepalive_interval +
//! keepalive_timeout`.

use crate::setup::{self, connect, proto_duration};
use crate::stats::print_columns;
use crate::{emit, BoxError};
use redlockd_proto::pb::hold_event::Event;
use redlockd_proto::pb::hold_request::Request;
use redlockd_proto::pb::{AcquireRequest, HoldRequest, ReleaseRequest};
use std::net::SocketAddr;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};

/// The hidden first argument that turns this binary into a frozen holder.
pub(crate) const HOLDER_FLAG: &str = "--frozen-holder";
/// Longest the waiter waits for the frozen client's lock.
const WAIT: Duration = Duration::from_secs(60);
/// Longest the holder may take to report its grant.
const HOLD_LIMIT: Duration = Duration::from_secs(20);
/// Longest a holder process lives if nobody stops it.
const HOLDER_LIFE: Duration = Duration::from_secs(120);

/// The figures of one frozen holder.
pub(crate) struct FrozenReport {
    /// The session's ttl.
    pub ttl: Duration,
    /// The daemon's documented bound: ttl + keepalive timeout.
    pub bound: Duration,
    /// SIGSTOP to the waiter's grant; `None` if it never came.
    pub passed_on: Option<Duration>,
}

impl FrozenReport {
    /// The machine-readable line.
    pub(crate) fn json_line(&self) -> String {
        let passed = self
            .passed_on
            .map_or("null".to_owned(), |d| format!("{:.3}", d.as_secs_f64()));
        format!(
            "{{\"workload\":\"frozen\",\"ttl_s\":{:.3},\"bound_s\":{:.3},\"passed_on_s\":{passed}}}",
            self.ttl.as_secs_f64(),
            self.bound.as_secs_f64(),
        )
    }
}

/// Prints the table of the frozen runs.
pub(crate) fn print_table(reports: &[FrozenReport]) {
    let heads: Vec<String> = reports.iter().map(|r| format!("ttl {:?}", r.ttl)).collect();
    let column = |f: &dyn Fn(&FrozenReport) -> String| reports.iter().map(f).collect::<Vec<_>>();
    let rows = vec![
        (
            "freeze -> grant",
            column(&|r| {
                r.passed_on
                    .map_or("never".to_owned(), |d| format!("{:.2} s", d.as_secs_f64()))
            }),
        ),
        (
            "ttl + keepalive_timeout",
            column(&|r| format!("{:.2} s", r.bound.as_secs_f64())),
        ),
        (
            "keepalive closes by",
            column(&|_| {
                format!(
                    "{:.2} s",
                    (KEEPALIVE_INTERVAL + KEEPALIVE_TIMEOUT).as_secs_f64()
                )
            }),
        ),
    ];
    print_columns(
        "Frozen client: SIGSTOP to the lock passing on",
        &heads,
        &rows,
    );
}

/// The daemon's defaults (`server.keepalive_interval`, `_timeout`).
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(1);
const KEEPALIVE_TIMEOUT: Duration = Duration::from_secs(2);

/// One frozen holder per ttl, against one daemon process over `nodes`.
pub(crate) async fn run_all(
    ttls: &[Duration],
    nodes: &[String],
    settings: &[(String, String)],
) -> Result<Vec<FrozenReport>, BoxError> {
    let daemon = setup::spawn_process(nodes, 1_000, settings)?;
    let outcome = async {
        let mut reports = Vec::new();
        for (i, ttl) in ttls.iter().enumerate() {
            let resource = format!("bench/frozen/{}/{i}", std::process::id());
            let report = one(daemon.addr, &resource, *ttl).await?;
            emit(&report.json_line());
            reports.push(report);
        }
        Ok::<_, BoxError>(reports)
    }
    .await;
    setup::stop_process(daemon).await;
    outcome
}

/// One holder with `ttl`: started, frozen, its lock waited for.
async fn one(addr: SocketAddr, resource: &str, ttl: Duration) -> Result<FrozenReport, BoxError> {
    // Serving before the holder starts.
    let mut client = connect(addr).await?;
    let mut child = tokio::process::Command::new(std::env::current_exe()?)
        .arg(HOLDER_FLAG)
        .arg(addr.to_string())
        .arg(resource)
        .arg(ttl.as_millis().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout of the holder")?;
    let mut lines = BufReader::new(stdout).lines();
    let said = tokio::time::timeout(HOLD_LIMIT, lines.next_line()).await;
    if !matches!(said, Ok(Ok(Some(ref line))) if line == "acquired") {
        return Err(format!("the frozen holder did not get {resource}: {said:?}").into());
    }
    let pid = nix::unistd::Pid::from_raw(child.id().ok_or("holder gone")? as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP)?;
    let frozen = Instant::now();
    let request = AcquireRequest {
        resource: resource.to_owned(),
        ttl: Some(proto_duration(Duration::from_secs(5))),
        wait: Some(proto_duration(WAIT)),
        owner: "redlockd-bench".to_owned(),
        request_id: String::new(),
        ..Default::default()
    };
    let answer = tokio::time::timeout(WAIT + HOLD_LIMIT, client.acquire(request)).await;
    let passed_on = frozen.elapsed();
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT);
    let _ = child.wait().await;
    let passed_on = match answer {
        Ok(Ok(response)) => {
            if let Some(lock) = response.into_inner().lock {
                let release = ReleaseRequest {
                    resource: resource.to_owned(),
                    token: lock.token,
                };
                let _ = client.release(release).await;
            }
            Some(passed_on)
        }
        Ok(Err(status)) => {
            tracing::warn!(code = ?status.code(), "the waiter did not get the frozen lock");
            None
        }
        Err(_) => None,
    };
    Ok(FrozenReport {
        ttl,
        bound: ttl + KEEPALIVE_TIMEOUT,
        passed_on,
    })
}

/// The hidden holder mode: `--frozen-holder ADDR RESOURCE TTL_MS`. Opens a
/// Hold session, prints `acquired` once it holds the lock, then reads its
/// events until the stream ends or [`HOLDER_LIFE`] passes.
pub(crate) fn holder_main(args: &[String]) -> Result<(), BoxError> {
    let [addr, resource, ttl_ms] = args else {
        return Err("usage: --frozen-holder ADDR RESOURCE TTL_MS".into());
    };
    let addr: SocketAddr = addr.parse()?;
    let ttl = Duration::from_millis(ttl_ms.parse()?);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let mut client = connect(addr).await?;
        let (requests, outgoing) = tokio::sync::mpsc::channel(1);
        requests
            .send(HoldRequest {
                request: Some(Request::Acquire(AcquireRequest {
                    resource: resource.clone(),
                    ttl: Some(proto_duration(ttl)),
                    wait: Some(proto_duration(HOLD_LIMIT)),
                    owner: "redlockd-bench-frozen".to_owned(),
                    request_id: String::new(),
                    ..Default::default()
                })),
            })
            .await?;
        let mut events = client
            .hold(tokio_stream::wrappers::ReceiverStream::new(outgoing))
            .await?
            .into_inner();
        let life = tokio::time::sleep(HOLDER_LIFE);
        tokio::pin!(life);
        loop {
            tokio::select! {
                _ = &mut life => return Ok(()),
                event = events.message() => match event?.and_then(|e| e.event) {
                    Some(Event::Acquired(_)) => {
                        use std::io::Write;
                        let mut out = std::io::stdout();
                        writeln!(out, "acquired")?;
                        out.flush()?;
                    }
                    Some(_) => {}
                    None => return Ok(()),
                },
            }
        }
    })
}
