//! Elections (`ElectionService`): `elect` runs a command only while this
//! candidate leads, `leader` prints the current leader, `observe` prints
//! each change.
//!
//! `elect` campaigns (waiting as long as it takes, campaigning again while
//! the daemon is unreachable), starts the command once elected, and stops
//! it the way `run` does when the leadership is lost: SIGTERM to its group
//! at once, SIGKILL after `--kill-after` or when the last known validity
//! ends, whichever is first. The leadership counts as lost when the daemon
//! says so, when the stream breaks, or when its validity (counted from
//! when each `elected` or `kept` arrived, less the client crate's
//! [`stop_margin`]) runs out with no `kept`. When the command exits the
//! candidate resigns.

use crate::args::{ElectArgs, ElectionArg};
use crate::child::{self, Command};
use crate::error::CtlError;
use crate::exit::Exit;
use crate::print::{json_string, shell_word};
use crate::services::{self, call};
use crate::signals::Signals;
use crate::target::Target;
use redlockd_client::{stop_margin, AuthChannel};
use redlockd_proto::pb;
use redlockd_proto::pb::campaign_response::Event;
use redlockd_proto::pb::election_service_client::ElectionServiceClient;
use std::time::{Duration, SystemTime};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Code, Streaming};

/// Pause before campaigning again after the daemon could not be reached.
const RECAMPAIGN_AFTER: Duration = Duration::from_secs(1);

/// How long `elect` waits for `resigned` after the command exits.
const RESIGN_WAIT: Duration = Duration::from_secs(5);

/// `leader`: the current leader; exits [`Exit::NotHeld`] when there is none.
pub(crate) async fn leader(
    target: &Target,
    args: ElectionArg,
    timeout: Duration,
    json: bool,
) -> Result<Exit, CtlError> {
    let mut client = services::elections(&target.connect().await?);
    let what = format!("leader {}", shell_word(&args.name));
    let request = pb::LeaderRequest { name: args.name };
    let answer = call(&what, timeout, request, |r| client.leader(r)).await?;
    println!("{}", describe(answer.leader.as_ref(), json, false));
    Ok(match answer.has_leader {
        true => Exit::Success,
        false => Exit::NotHeld,
    })
}

/// `observe`: one line per change, until the stream ends (the exit of its
/// status) or a signal.
pub(crate) async fn observe(
    target: &Target,
    args: ElectionArg,
    timeout: Duration,
    json: bool,
) -> Result<Exit, CtlError> {
    let mut signals =
        Signals::install().map_err(|e| CtlError::Local(format!("cannot catch signals: {e}")))?;
    let mut client = services::elections(&target.connect().await?);
    let what = format!("observe {}", shell_word(&args.name));
    let request = pb::ObserveRequest { name: args.name };
    let mut changes = call(&what, timeout, request, |r| client.observe(r)).await?;
    loop {
        tokio::select! {
            change = changes.message() => match change {
                Ok(Some(change)) => {
                    let leader = change.leader.as_ref().filter(|_| change.has_leader);
                    println!("{}", describe(leader, json, true));
                }
                Ok(None) => return Ok(Exit::Success),
                Err(status) => return Err(CtlError::status(&what, status)),
            },
            signal = signals.recv() => return Ok(Exit::Passed(128 + signal as u8)),
        }
    }
}

/// A leader (or none) as `leader` and `observe` print it: shell
/// assignments, one tab-separated line (`observe`), or JSON.
fn describe(leader: Option<&pb::Leader>, json: bool, line: bool) -> String {
    match (leader, json, line) {
        (Some(l), true, _) => format!(
            "{{\"has_leader\":true,\"name\":{},\"value\":{},\"term\":{},\"since\":{},\
             \"remaining_ms\":{},\"value_version\":{}}}",
            json_string(&l.name),
            json_string(&l.value),
            l.term,
            json_string(&since(l)),
            remaining_ms(l),
            l.value_version
        ),
        (None, true, _) => "{\"has_leader\":false}".to_owned(),
        (Some(l), false, true) => format!("{}\t{}\t{}", l.term, l.value, since(l)),
        (None, false, true) => "-\t(no leader)\t".to_owned(),
        (Some(l), false, false) => format!(
            "REDLOCK_HAS_LEADER=true\nREDLOCK_ELECTION={}\nREDLOCK_LEADER={}\nREDLOCK_TERM={}\n\
             REDLOCK_SINCE={}\nREDLOCK_REMAINING_MS={}",
            shell_word(&l.name),
            shell_word(&l.value),
            l.term,
            shell_word(&since(l)),
            remaining_ms(l)
        ),
        (None, false, false) => "REDLOCK_HAS_LEADER=false".to_owned(),
    }
}

/// RFC 3339 (UTC, seconds), or empty when unknown.
fn since(leader: &pb::Leader) -> String {
    leader
        .since
        .and_then(|t| SystemTime::try_from(t).ok())
        .map(|t| humantime::format_rfc3339_seconds(t).to_string())
        .unwrap_or_default()
}

fn remaining_ms(leader: &pb::Leader) -> u128 {
    leader
        .remaining
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default()
        .as_millis()
}

/// An open Campaign stream.
struct Candidacy {
    requests: mpsc::Sender<pb::CampaignRequest>,
    events: Streaming<pb::CampaignResponse>,
}

/// `elect`: runs the command while leading; the exit is the command's
/// status, or [`Exit::Lost`] when the leadership was lost while it ran.
pub(crate) async fn elect(target: &Target, args: ElectArgs) -> Result<Exit, CtlError> {
    let mut signals =
        Signals::install().map_err(|e| CtlError::Local(format!("cannot catch signals: {e}")))?;
    let (mut candidacy, leadership, mut valid_until) = tokio::select! {
        elected = campaign_until_elected(target, &args) => elected?,
        signal = signals.recv() => return Err(CtlError::Interrupted(signal)),
    };
    eprintln!(
        "redlockctl: elected in {} (term {}); running {}",
        shell_word(&args.name),
        leadership.term,
        args.command
            .first()
            .map(|c| c.to_string_lossy().into_owned())
            .unwrap_or_default()
    );
    let mut env = vec![
        ("REDLOCK_ELECTION", leadership.name.clone()),
        ("REDLOCK_TERM", leadership.term.to_string()),
        ("REDLOCK_FENCE", leadership.term.to_string()),
        ("REDLOCK_VALUE", leadership.value.clone()),
        ("REDLOCK_ADDR", target.url.clone()),
    ];
    env.extend(target.env.iter().cloned());
    let mut command = match Command::spawn(&args.command, &env) {
        Ok(command) => command,
        Err(error) => {
            resign(&mut candidacy).await;
            return Err(error);
        }
    };
    let margin = stop_margin(args.ttl);
    let reason = loop {
        tokio::select! {
            status = command.wait() => {
                let status = status?;
                match resign(&mut candidacy).await {
                    Some(true) => {}
                    Some(false) => eprintln!(
                        "redlockctl: resigned from {}, but the leadership had already ended",
                        shell_word(&args.name)
                    ),
                    None => eprintln!(
                        "redlockctl: no answer to resigning from {}; the leadership expires \
                         with its ttl",
                        shell_word(&args.name)
                    ),
                }
                return Ok(Exit::Passed(child::shell_status(status)));
            }
            signal = signals.recv() => command.signal(signal),
            event = candidacy.events.message() => match event {
                Ok(Some(pb::CampaignResponse { event: Some(Event::Kept(kept)) })) => {
                    valid_until = Instant::now() + validity(&kept).saturating_sub(margin);
                }
                Ok(Some(pb::CampaignResponse { event: Some(Event::Draining(_)) })) => {
                    eprintln!("redlockctl: the daemon is stopping; the leadership ends soon");
                }
                Ok(Some(pb::CampaignResponse { event: Some(Event::Lost(lost)) })) => {
                    break lost.reason;
                }
                Ok(_) => break "the daemon ended the leadership".to_owned(),
                Err(status) => break format!("the stream broke: {}", status.message()),
            },
            () = tokio::time::sleep_until(valid_until) => {
                break "its validity ran out with no extension".to_owned();
            }
        }
    };
    // Never past the last known validity (`valid_until` already keeps the
    // stop margin back from it).
    let kill_at = (Instant::now() + args.kill_after).min(valid_until);
    eprintln!(
        "redlockctl: lost the leadership of {}: {reason}; stopping {} (SIGTERM to process \
         group {}, SIGKILL in {} ms if it still runs)",
        shell_word(&args.name),
        command.program,
        command.group(),
        kill_at
            .saturating_duration_since(Instant::now())
            .as_millis()
    );
    command.stop_lost(kill_at, &mut signals).await?;
    Ok(Exit::Lost)
}

/// Campaigns until elected: again after the daemon was unreachable or
/// unavailable (a standby outlives a daemon restart); any other refusal
/// ends `elect`. The stream, the leadership, and when it stops being
/// guaranteed here.
async fn campaign_until_elected(
    target: &Target,
    args: &ElectArgs,
) -> Result<(Candidacy, pb::Leadership, Instant), CtlError> {
    loop {
        let outcome = match target.connect().await {
            Ok(client) => campaign(&services::elections(&client), args).await,
            Err(error) => Err(error),
        };
        match outcome {
            Ok(elected) => return Ok(elected),
            Err(CtlError::Status { status, .. })
                if matches!(status.code(), Code::Unavailable | Code::Unknown) => {}
            Err(CtlError::Connect { .. } | CtlError::Closed { .. }) => {}
            Err(error) => return Err(error),
        }
        tokio::time::sleep(RECAMPAIGN_AFTER).await;
    }
}

/// One Campaign stream, up to `elected`.
async fn campaign(
    client: &ElectionServiceClient<AuthChannel>,
    args: &ElectArgs,
) -> Result<(Candidacy, pb::Leadership, Instant), CtlError> {
    let what = format!("elect {}", shell_word(&args.name));
    let (requests, outgoing) = mpsc::channel(2);
    let start = pb::CampaignRequest {
        request: Some(pb::campaign_request::Request::Campaign(
            pb::campaign_request::Start {
                name: args.name.clone(),
                value: args.value.clone(),
                ttl: prost_types::Duration::try_from(args.ttl).ok(),
            },
        )),
    };
    requests
        .send(start)
        .await
        .map_err(|_| CtlError::Local("the campaign's stream closed".into()))?;
    let mut events = client
        .clone()
        .campaign(ReceiverStream::new(outgoing))
        .await
        .map_err(|status| CtlError::status(&what, status))?
        .into_inner();
    match events.message().await {
        Ok(Some(pb::CampaignResponse {
            event: Some(Event::Elected(leadership)),
        })) => {
            let margin = stop_margin(args.ttl);
            let mut valid_until = Instant::now() + validity(&leadership).saturating_sub(margin);
            // Elected with less than the margin left (a long wait on a busy
            // daemon): the command starts only once an extension says the
            // leadership is still valid.
            while valid_until <= Instant::now() {
                match events.message().await {
                    Ok(Some(pb::CampaignResponse {
                        event: Some(Event::Kept(kept)),
                    })) => valid_until = Instant::now() + validity(&kept).saturating_sub(margin),
                    Ok(Some(pb::CampaignResponse {
                        event: Some(Event::Draining(_)),
                    })) => {}
                    _ => {
                        return Err(CtlError::status(
                            &what,
                            tonic::Status::unavailable(
                                "the leadership ended before it was valid here",
                            ),
                        ))
                    }
                }
            }
            Ok((Candidacy { requests, events }, leadership, valid_until))
        }
        Ok(_) => Err(CtlError::Local(format!(
            "{what}: the daemon's first answer was not `elected`"
        ))),
        Err(status) => Err(CtlError::status(&what, status)),
    }
}

/// Resigns through the stream: `Some(was_leader)`, or `None` when no
/// answer came in [`RESIGN_WAIT`].
async fn resign(candidacy: &mut Candidacy) -> Option<bool> {
    let message = pb::CampaignRequest {
        request: Some(pb::campaign_request::Request::Resign(
            pb::campaign_request::Resign {},
        )),
    };
    candidacy.requests.send(message).await.ok()?;
    let answer = async {
        loop {
            match candidacy.events.message().await {
                Ok(Some(pb::CampaignResponse {
                    event: Some(Event::Resigned(resigned)),
                })) => return Some(resigned.was_leader),
                Ok(Some(pb::CampaignResponse {
                    event: Some(Event::Kept(_) | Event::Draining(_)),
                })) => {}
                _ => return None,
            }
        }
    };
    tokio::time::timeout(RESIGN_WAIT, answer).await.ok()?
}

fn validity(leadership: &pb::Leadership) -> Duration {
    leadership
        .validity
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leader() -> pb::Leader {
        pb::Leader {
            name: "jobs".into(),
            value: "10.0.0.1:8080".into(),
            term: 7,
            since: Some(prost_types::Timestamp {
                seconds: 1_700_000_000,
                nanos: 0,
            }),
            remaining: Some(prost_types::Duration {
                seconds: 2,
                nanos: 0,
            }),
            value_version: 0,
        }
    }

    /// The output forms of a leader, and of none.
    #[test]
    fn outputs() {
        let l = leader();
        assert_eq!(
            describe(Some(&l), false, false),
            "REDLOCK_HAS_LEADER=true\nREDLOCK_ELECTION=jobs\nREDLOCK_LEADER=10.0.0.1:8080\n\
             REDLOCK_TERM=7\nREDLOCK_SINCE=2023-11-14T22:13:20Z\nREDLOCK_REMAINING_MS=2000"
        );
        assert_eq!(
            describe(Some(&l), false, true),
            "7\t10.0.0.1:8080\t2023-11-14T22:13:20Z"
        );
        assert_eq!(
            describe(Some(&l), true, true),
            r#"{"has_leader":true,"name":"jobs","value":"10.0.0.1:8080","term":7,"since":"2023-11-14T22:13:20Z","remaining_ms":2000,"value_version":0}"#
        );
        assert_eq!(describe(None, false, false), "REDLOCK_HAS_LEADER=false");
        assert_eq!(describe(None, true, true), r#"{"has_leader":false}"#);
    }
}
