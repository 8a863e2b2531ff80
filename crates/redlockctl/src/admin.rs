//! The operator's calls (`LockAdminService`): `inspect`, `list` and
//! `force-release`. They need the admin role (`auth.admins`) when the
//! daemon authenticates; lock tokens are never part of their answers.

use crate::args::{ListArgs, ResourceArg};
use crate::error::CtlError;
use crate::exit::Exit;
use crate::print::{json_string, shell_word};
use crate::services::{self, call};
use crate::target::Target;
use redlockd_proto::pb;
use std::time::{Duration, SystemTime};

/// `inspect`: who holds RESOURCE; exits [`Exit::NotHeld`] when nobody does.
pub(crate) async fn inspect(
    target: &Target,
    args: ResourceArg,
    timeout: Duration,
    json: bool,
) -> Result<Exit, CtlError> {
    let mut client = services::admin(&target.connect().await?);
    let what = format!("inspect {}", named(&args));
    let (resource, election) = args.split();
    let request = pb::InspectRequest { resource, election };
    let answer = call(&what, timeout, request, |r| client.inspect(r)).await?;
    match (&answer.lock, json) {
        (Some(lock), true) => println!("{}", lock_json(lock)),
        (Some(lock), false) => println!("REDLOCK_HELD=true\n{}", lock_assignments(lock)),
        (None, true) => println!("{{\"held\":false}}"),
        (None, false) => println!("REDLOCK_HELD=false"),
    }
    Ok(match answer.held {
        true => Exit::Success,
        false => Exit::NotHeld,
    })
}

/// `list`: every held lock under PREFIX, one per line, page after page.
pub(crate) async fn list(
    target: &Target,
    args: ListArgs,
    timeout: Duration,
    json: bool,
) -> Result<Exit, CtlError> {
    let mut client = services::admin(&target.connect().await?);
    let what = format!("list {}", shell_word(&args.prefix));
    let mut page_token = String::new();
    if !json {
        println!("RESOURCE\tOWNER\tFENCE\tACQUIRED_AT\tREMAINING_MS\tSESSION\tREPLICA");
    }
    loop {
        let request = pb::ListRequest {
            prefix: args.prefix.clone(),
            page_size: args.page_size,
            page_token: page_token.clone(),
        };
        let page = call(&what, timeout, request, |r| client.list(r)).await?;
        for lock in &page.locks {
            println!(
                "{}",
                if json {
                    lock_json(lock)
                } else {
                    lock_row(lock)
                }
            );
        }
        if page.next_page_token.is_empty() {
            return Ok(Exit::Success);
        }
        page_token = page.next_page_token;
    }
}

/// `force-release`: releases whatever holds RESOURCE; exits
/// [`Exit::NotHeld`] when nothing did.
pub(crate) async fn force_release(
    target: &Target,
    args: ResourceArg,
    timeout: Duration,
    json: bool,
) -> Result<Exit, CtlError> {
    let mut client = services::admin(&target.connect().await?);
    let what = format!("force-release {}", named(&args));
    let (resource, election) = args.split();
    let request = pb::ForceReleaseRequest { resource, election };
    let answer = call(&what, timeout, request, |r| client.force_release(r)).await?;
    match (&answer.lock, json) {
        (Some(lock), true) => println!("{{\"was_held\":true,\"lock\":{}}}", lock_json(lock)),
        (Some(lock), false) => println!("REDLOCK_WAS_HELD=true\n{}", lock_assignments(lock)),
        (None, true) => println!("{{\"was_held\":false}}"),
        (None, false) => println!("REDLOCK_WAS_HELD=false"),
    }
    Ok(match answer.was_held {
        true => Exit::Success,
        false => Exit::NotHeld,
    })
}

/// The resource (or `--election NAME`) as a shell word, for messages.
fn named(args: &ResourceArg) -> String {
    match args.election {
        true => format!("--election {}", shell_word(&args.resource)),
        false => shell_word(&args.resource),
    }
}

impl ResourceArg {
    /// The request's `resource` and `election` fields: one of them set.
    fn split(self) -> (String, String) {
        match self.election {
            true => (String::new(), self.resource),
            false => (self.resource, String::new()),
        }
    }
}

/// The RESOURCE column (and `REDLOCK_RESOURCE`): an election's leadership
/// shows as `election:NAME` (no resource contains a control character, and
/// the daemon reports elections apart: this prefix is only for display).
fn shown_resource(lock: &pb::LockInfo) -> String {
    match lock.election.is_empty() {
        true => lock.resource.clone(),
        false => format!("election:{}", lock.election),
    }
}

fn session(lock: &pb::LockInfo) -> &'static str {
    match lock.session_kind() {
        pb::SessionKind::Hold => "hold",
        pb::SessionKind::Unary => "unary",
        pb::SessionKind::Unspecified => "unknown",
    }
}

/// RFC 3339 (UTC, seconds), or empty when unknown.
fn acquired_at(lock: &pb::LockInfo) -> String {
    lock.acquired_at
        .and_then(|t| SystemTime::try_from(t).ok())
        .map(|t| humantime::format_rfc3339_seconds(t).to_string())
        .unwrap_or_default()
}

fn remaining_ms(lock: &pb::LockInfo) -> u128 {
    lock.remaining
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default()
        .as_millis()
}

fn lock_assignments(lock: &pb::LockInfo) -> String {
    format!(
        "REDLOCK_RESOURCE={}\nREDLOCK_OWNER={}\nREDLOCK_FENCE={}\nREDLOCK_ACQUIRED_AT={}\n\
         REDLOCK_REMAINING_MS={}\nREDLOCK_SESSION={}\nREDLOCK_REPLICA={}",
        shell_word(&shown_resource(lock)),
        shell_word(&lock.owner),
        lock.fence,
        shell_word(&acquired_at(lock)),
        remaining_ms(lock),
        session(lock),
        shell_word(&lock.replica),
    )
}

fn lock_row(lock: &pb::LockInfo) -> String {
    // Tabs and newlines cannot be in a resource or owner (control
    // characters are refused at the door), so the columns stay apart.
    format!(
        "{}\t{}\t{}\t{}\t{}\t{}\t{}",
        shown_resource(lock),
        lock.owner,
        lock.fence,
        acquired_at(lock),
        remaining_ms(lock),
        session(lock),
        lock.replica
    )
}

fn lock_json(lock: &pb::LockInfo) -> String {
    // An election's leadership: `"election"` names it, `"resource"` empty.
    let election = match lock.election.is_empty() {
        true => String::new(),
        false => format!(",\"election\":{}", json_string(&lock.election)),
    };
    format!(
        "{{\"held\":true,\"resource\":{},\"owner\":{},\"fence\":{},\"acquired_at\":{},\
         \"remaining_ms\":{},\"session\":\"{}\",\"replica\":{}{election}}}",
        json_string(&lock.resource),
        json_string(&lock.owner),
        lock.fence,
        json_string(&acquired_at(lock)),
        remaining_ms(lock),
        session(lock),
        json_string(&lock.replica),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> pb::LockInfo {
        pb::LockInfo {
            resource: "billing/close-month".into(),
            owner: "cron on host 7".into(),
            fence: 9,
            acquired_at: Some(prost_types::Timestamp {
                seconds: 1_700_000_000,
                nanos: 0,
            }),
            remaining: Some(prost_types::Duration {
                seconds: 2,
                nanos: 0,
            }),
            session_kind: pb::SessionKind::Hold.into(),
            replica: "h/1".into(),
            election: String::new(),
        }
    }

    /// The three output forms of a held lock.
    #[test]
    fn outputs() {
        assert_eq!(
            lock_row(&info()),
            "billing/close-month\tcron on host 7\t9\t2023-11-14T22:13:20Z\t2000\thold\th/1"
        );
        assert_eq!(
            lock_assignments(&info()),
            "REDLOCK_RESOURCE=billing/close-month\nREDLOCK_OWNER='cron on host 7'\nREDLOCK_FENCE=9\n\
             REDLOCK_ACQUIRED_AT=2023-11-14T22:13:20Z\nREDLOCK_REMAINING_MS=2000\n\
             REDLOCK_SESSION=hold\nREDLOCK_REPLICA=h/1"
        );
        assert_eq!(
            lock_json(&info()),
            r#"{"held":true,"resource":"billing/close-month","owner":"cron on host 7","fence":9,"acquired_at":"2023-11-14T22:13:20Z","remaining_ms":2000,"session":"hold","replica":"h/1"}"#
        );
    }

    /// An election's leadership: `election:NAME` in the RESOURCE column,
    /// `"election"` in JSON; `--election` fills the request's field.
    #[test]
    fn elections() {
        let lock = pb::LockInfo {
            resource: String::new(),
            election: "jobs".into(),
            ..info()
        };
        assert!(lock_row(&lock).starts_with("election:jobs\t"));
        assert!(lock_assignments(&lock).starts_with("REDLOCK_RESOURCE=election:jobs\n"));
        assert!(lock_json(&lock).ends_with(r#""replica":"h/1","election":"jobs"}"#));
        let args = |election| ResourceArg {
            resource: "jobs".into(),
            election,
        };
        assert_eq!(named(&args(true)), "--election jobs");
        assert_eq!(args(true).split(), (String::new(), "jobs".into()));
        assert_eq!(args(false).split(), ("jobs".into(), String::new()));
    }
}
