//! "Nothing is left locked after DEADLINE_EXCEEDED" (lock.proto), checked
//! on the masters themselves: a mixed client sends some Acquires of a
//! resource nobody else uses with a gRPC deadline of 1-20 ms and a request
//! id; after one ends DEADLINE_EXCEEDED (or CANCELLED, the client's own
//! expiry) and the client released the token the request id derives, as the
//! contract asks, a probe (`crate::mix`) waits [`SETTLE`] (many node_timeouts: the daemon's late grant has been
//! released by then) and asks every master directly, not through its
//! fault proxy, whether the lock key `redlock:lock:<resource>` exists.
//!
//! [`check`] flags ([`Check::LeftLocked`]) only what is certain: a call
//! whose deadline ran out (DEADLINE_EXCEEDED, or CANCELLED: the contract
//! promises the same for a cancelled call, "a grant the daemon knows you
//! did not receive ... is released") whose key a MAJORITY of masters still
//! held, with every master healthy (no master fault counted, its restart
//! quarantine included) and the call's replica not killed or drained in
//! the whole span from the send to the last master's answer. The rest are
//! figures: keys left on a minority, or with a fault around.

use crate::findings::{Check, Findings, Violation};
use crate::history::{Fault, Time};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// How long after the answer the masters are read: the lock's ttl is
/// longer ([`TTL`]), so a key left behind is still there.
pub(crate) const SETTLE: Duration = Duration::from_millis(1_000);
/// The probed Acquires' ttl (the run's `max_ttl` is 3 s by default).
pub(crate) const TTL: Duration = Duration::from_millis(2_500);
/// Longest wait for one master's answer.
const ASK_TIMEOUT: Duration = Duration::from_millis(500);

/// One probe of a short-deadline Acquire's resource.
#[derive(Debug, Clone)]
pub(crate) struct Probe {
    /// The resource (nobody else's).
    pub resource: String,
    /// The replica the call went to.
    pub replica: usize,
    /// The client's call: sent and answered.
    pub sent: Time,
    pub answered: Time,
    /// DEADLINE_EXCEEDED (else CANCELLED: the client's own expiry).
    pub deadline_exceeded: bool,
    /// The masters were read from .. until.
    pub read_from: Time,
    pub read_until: Time,
    /// Masters that answered, and those that held the key.
    pub answered_masters: usize,
    pub present: usize,
}

/// What the probes found, for the report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct LeftoverFigures {
    /// Probes made (DEADLINE_EXCEEDED, CANCELLED).
    pub probed: (usize, usize),
    /// Keys left on a majority with every master healthy (violations).
    pub majority_healthy: usize,
    /// Keys left on some master otherwise (a minority, or a fault
    /// around).
    pub other_leftovers: usize,
    /// The first few of those, described.
    pub examples: Vec<String>,
}

/// Reads the masters (their own ports) for `resource`'s lock key.
pub(crate) async fn read(ports: &[u16], resource: &str) -> (usize, usize) {
    let key = format!("redlock:lock:{resource}");
    let asks = ports.iter().map(|port| exists(*port, &key));
    let answers = futures::future::join_all(asks).await;
    let answered = answers.iter().filter(|a| a.is_some()).count();
    let present = answers.iter().filter(|a| **a == Some(true)).count();
    (answered, present)
}

/// `EXISTS key` on a master; `None` when it did not answer in time.
async fn exists(port: u16, key: &str) -> Option<bool> {
    let ask = async {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.ok()?;
        let command = format!("*2\r\n$6\r\nEXISTS\r\n${}\r\n{key}\r\n", key.len());
        stream.write_all(command.as_bytes()).await.ok()?;
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).await.ok()?;
        match line.trim_end() {
            ":1" => Some(true),
            ":0" => Some(false),
            _ => None,
        }
    };
    tokio::time::timeout(ASK_TIMEOUT, ask).await.ok().flatten()
}

/// Whether a master, or the replica `replica`, counted as faulted during
/// `[from, to]`.
fn faulted(faults: &[Fault], replica: usize, from: Time, to: Time) -> bool {
    faults
        .iter()
        .filter(|f| f.kind.on_master() || f.target == replica)
        .any(|f| f.start <= to && f.counts_until >= from)
}

/// Checks the probes (see the module doc).
pub(crate) fn check(
    probes: &[Probe],
    faults: &[Fault],
    findings: &mut Findings,
) -> LeftoverFigures {
    let mut figures = LeftoverFigures::default();
    for p in probes {
        match p.deadline_exceeded {
            true => figures.probed.0 += 1,
            false => figures.probed.1 += 1,
        }
        if p.present == 0 {
            continue;
        }
        let majority = p.present * 2 > 5;
        if majority && !faulted(faults, p.replica, p.sent, p.read_until) {
            figures.majority_healthy += 1;
            findings.violations.push(Violation {
                check: Check::LeftLocked,
                detail: format!(
                    "{}: Acquire sent {:.3}s answered {} at {:.3}s; \
                     {} of {} masters still held its lock key at {:.3}s..{:.3}s, every \
                     master and replica healthy throughout",
                    p.resource,
                    p.sent.as_secs_f64(),
                    match p.deadline_exceeded {
                        true => "DEADLINE_EXCEEDED",
                        false => "CANCELLED (the client's deadline)",
                    },
                    p.answered.as_secs_f64(),
                    p.present,
                    p.answered_masters,
                    p.read_from.as_secs_f64(),
                    p.read_until.as_secs_f64()
                ),
            });
        } else {
            figures.other_leftovers += 1;
            if figures.examples.len() < 5 {
                figures.examples.push(format!(
                    "{}: sent {:.3}s, {} at {:.3}s; key on {} of {} masters at {:.3}s; \
                     a fault around: {}",
                    p.resource,
                    p.sent.as_secs_f64(),
                    if p.deadline_exceeded {
                        "DEADLINE_EXCEEDED"
                    } else {
                        "CANCELLED"
                    },
                    p.answered.as_secs_f64(),
                    p.present,
                    p.answered_masters,
                    p.read_from.as_secs_f64(),
                    faulted(faults, p.replica, p.sent, p.read_until)
                ));
            }
        }
    }
    figures
}
