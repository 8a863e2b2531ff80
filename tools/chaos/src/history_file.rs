//! `--history FILE`: every call of the run as JSON lines, in the format of
//! `tools/chaos/HISTORY.md` (the contract with the independent
//! linearizability checker): one `acquire` line per Acquire or Hold
//! `acquire` (granted, failed or unknown), one `extend` line per Extend or
//! session event, one `release` line per Release or end of a session.
//! Times are microseconds of the run's one clock. The file holds tokens:
//! a test artefact, never a log.

use crate::history::{ExtendOutcome, FailedCall, Failure, Grant, History, Kind, Time, Via};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

fn us(t: Time) -> u64 {
    u64::try_from(t.as_micros()).unwrap_or(u64::MAX)
}

/// The gRPC name of a status code.
pub(crate) fn code_name(code: tonic::Code) -> &'static str {
    use tonic::Code::*;
    match code {
        Ok => "OK",
        Cancelled => "CANCELLED",
        Unknown => "UNKNOWN",
        InvalidArgument => "INVALID_ARGUMENT",
        DeadlineExceeded => "DEADLINE_EXCEEDED",
        NotFound => "NOT_FOUND",
        AlreadyExists => "ALREADY_EXISTS",
        PermissionDenied => "PERMISSION_DENIED",
        ResourceExhausted => "RESOURCE_EXHAUSTED",
        FailedPrecondition => "FAILED_PRECONDITION",
        Aborted => "ABORTED",
        OutOfRange => "OUT_OF_RANGE",
        Unimplemented => "UNIMPLEMENTED",
        Internal => "INTERNAL",
        Unavailable => "UNAVAILABLE",
        DataLoss => "DATA_LOSS",
        Unauthenticated => "UNAUTHENTICATED",
    }
}

fn via(v: Via) -> &'static str {
    match v {
        Via::Unary => "unary",
        Via::Hold => "hold",
        Via::Campaign => "campaign",
    }
}

/// The fields every `acquire` line has, granted or not.
fn acquire_head(
    id: u64,
    client: u32,
    replica: usize,
    (v, kind): (Via, Kind),
    resources: &[&str],
    request_id: Option<&str>,
    sent: Time,
) -> Map<String, Value> {
    let mut line = Map::new();
    line.insert("type".into(), json!("acquire"));
    line.insert("id".into(), json!(id));
    line.insert("client".into(), json!(client));
    line.insert("replica".into(), json!(replica));
    line.insert("via".into(), json!(via(v)));
    line.insert("kind".into(), json!(kind.name()));
    line.insert(
        "resource".into(),
        json!(resources.first().copied().unwrap_or("")),
    );
    if kind == Kind::Multi {
        line.insert("resources".into(), json!(resources));
    }
    if let Kind::Permit(limit) = kind {
        line.insert("limit".into(), json!(limit));
    }
    if let Some(request_id) = request_id {
        line.insert("request_id".into(), json!(request_id));
    }
    line.insert("invoke_us".into(), json!(us(sent)));
    line
}

/// The lines of one grant (all members of a lock on several resources
/// together): its `acquire`, `extend`s and `release`.
fn grant_lines(members: &[&Grant], next_id: &mut u64) -> Vec<Value> {
    let Some(g) = members.first() else {
        return Vec::new();
    };
    let names: Vec<&str> = members.iter().map(|m| m.resource.as_str()).collect();
    let what = (g.via, g.kind);
    let mut acquire = acquire_head(
        g.call,
        g.client,
        g.replica,
        what,
        &names,
        g.request_id.as_deref(),
        g.sent,
    );
    acquire.insert("complete_us".into(), json!(us(g.received)));
    acquire.insert("outcome".into(), json!("granted"));
    acquire.insert("token".into(), json!(g.token));
    if let Kind::Permit(_) = g.kind {
        acquire.insert("permit".into(), json!(g.permit));
    }
    acquire.insert("fence".into(), json!(g.fence));
    if !g.hold_at_least.is_zero() {
        acquire.insert("hold_at_least_us".into(), json!(us(g.hold_at_least)));
        acquire.insert("hold_from_us".into(), json!(us(g.hold_from)));
    }
    if g.kind == Kind::Multi {
        let fences: Vec<u64> = members.iter().map(|m| m.fence).collect();
        acquire.insert("fences".into(), json!(fences));
    }
    let first_end = g.windows.first().map_or(g.sent, |w| w.end);
    acquire.insert(
        "validity_us".into(),
        json!(us(first_end.saturating_sub(g.sent))),
    );
    let mut lines = vec![Value::Object(acquire)];
    let mut extend =
        |invoke: Time, complete: Option<Time>, outcome: &str, rest: Vec<(&str, Value)>| {
            *next_id += 1;
            let mut line = Map::new();
            line.insert("type".into(), json!("extend"));
            line.insert("id".into(), json!(*next_id));
            line.insert("grant".into(), json!(g.call));
            line.insert("invoke_us".into(), json!(us(invoke)));
            if let Some(complete) = complete {
                line.insert("complete_us".into(), json!(us(complete)));
            }
            line.insert("outcome".into(), json!(outcome));
            for (key, value) in rest {
                line.insert(key.into(), value);
            }
            Value::Object(line)
        };
    let later = g.windows.get(1..).unwrap_or_default();
    let ok = g
        .extends
        .iter()
        .filter(|e| matches!(e.outcome, ExtendOutcome::Ok(_)));
    let recorded = ok.count() == later.len();
    let mut windows = later.iter();
    for e in &g.extends {
        let line = match e.outcome {
            ExtendOutcome::Ok(_) if recorded => {
                // Its window as checked (a drain may have cut it).
                let end = windows.next().map_or(e.sent, |w| w.end);
                let validity = json!(us(end.saturating_sub(e.sent)));
                extend(
                    e.sent,
                    Some(e.received),
                    "ok",
                    vec![("validity_us", validity)],
                )
            }
            ExtendOutcome::Ok(_) => continue,
            ExtendOutcome::Lost => extend(e.sent, Some(e.received), "lost", Vec::new()),
            ExtendOutcome::Failed(code) => extend(
                e.sent,
                Some(e.received),
                "failed",
                vec![("code", json!(code_name(code)))],
            ),
            ExtendOutcome::Unknown => extend(e.sent, None, "unknown", Vec::new()),
        };
        lines.push(line);
    }
    if !recorded {
        // Windows known without their calls (a frozen child's Validate):
        // each exactly as checked, sent when answered.
        for w in later {
            let validity = json!(us(w.end.saturating_sub(w.start)));
            lines.push(extend(
                w.start,
                Some(w.start),
                "ok",
                vec![("validity_us", validity)],
            ));
        }
    }
    if let Some(release) = g.release {
        *next_id += 1;
        let mut line = Map::new();
        line.insert("type".into(), json!("release"));
        line.insert("id".into(), json!(*next_id));
        line.insert("grant".into(), json!(g.call));
        line.insert("invoke_us".into(), json!(us(release.sent)));
        match release.outcome {
            Ok(was_held) => {
                line.insert("complete_us".into(), json!(us(release.received)));
                line.insert("outcome".into(), json!("ok"));
                line.insert("was_held".into(), json!(was_held));
            }
            // A session's stream dropped: given up, no answer.
            Err(Failure::TimedOut) | Err(Failure::Status(tonic::Code::Cancelled)) => {
                line.insert("outcome".into(), json!("unknown"));
            }
            Err(Failure::Status(code)) => {
                line.insert("complete_us".into(), json!(us(release.received)));
                line.insert("outcome".into(), json!("failed"));
                line.insert("code".into(), json!(code_name(code)));
            }
        }
        lines.push(Value::Object(line));
    }
    lines
}

/// The `acquire` line of a call that was not granted.
fn failed_line(call: &FailedCall) -> Value {
    let names: Vec<&str> = call.resources.iter().map(String::as_str).collect();
    let what = (call.via, call.kind);
    let mut line = acquire_head(
        call.id,
        call.client,
        call.replica,
        what,
        &names,
        call.request_id.as_deref(),
        call.sent,
    );
    let code = match call.failure {
        Failure::Status(code) => code_name(code),
        Failure::TimedOut => "DEADLINE_EXCEEDED",
    };
    match call.unknown() {
        true => line.insert("outcome".into(), json!("unknown")),
        false => {
            line.insert("complete_us".into(), json!(us(call.received)));
            line.insert("outcome".into(), json!("failed"))
        }
    };
    if call.failure != Failure::TimedOut {
        line.insert("code".into(), json!(code));
    }
    Value::Object(line)
}

/// Every line of `history`, acquires by call id first.
pub(crate) fn lines(history: &History) -> Vec<Value> {
    let mut calls: BTreeMap<u64, Vec<&Grant>> = BTreeMap::new();
    for g in &history.grants {
        calls.entry(g.call).or_default().push(g);
    }
    let top = history.grants.iter().map(|g| g.id);
    let mut next_id = top
        .chain(history.failed.iter().map(|c| c.id))
        .max()
        .unwrap_or(0);
    let mut out = Vec::new();
    for members in calls.values_mut() {
        members.sort_by_key(|m| m.id);
        out.extend(grant_lines(members, &mut next_id));
    }
    out.extend(history.failed.iter().map(failed_line));
    out
}

/// Writes `history` to `path`.
pub(crate) fn write(path: &Path, history: &History) -> Result<(), crate::cluster::BoxError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut file = std::io::BufWriter::new(std::fs::File::create(path)?);
    for line in lines(history) {
        writeln!(file, "{line}")?;
    }
    file.flush()?;
    Ok(())
}
