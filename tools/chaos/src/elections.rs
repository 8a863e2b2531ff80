//! Elections in the mix (`--mix`): candidates campaign in two elections
//! named like the first two hot resources (so that elections and locks of
//! one name run side by side: the daemon keeps them on keys of their own,
//! and the history on resources of their own, `election:NAME`), lead for a while, writing the election's
//! registers (fenced by the term) in their critical section, half of
//! them proclaiming a new value halfway through, then resign or vanish; half of them send their Resign again a moment after the
//! leadership ended, as a client retrying it would (after a stream lost
//! with its killed replica, that Resign can still end the leadership on
//! the masters: it is then its release, `crate::resigns`). Observers on
//! every replica follow each election.
//!
//! A leadership is a grant of kind `leader` on the resource
//! `election:NAME` ([`resource`]): the ordinary checks hold it to one
//! leader at a time (overlapping validity, critical sections, registers)
//! and its terms to strictly increase (fence order), and the Porcupine
//! check reads it as an exclusive lock. `crate::observers::check` holds every observer to
//! never going back: within one Observe stream each leader's term above
//! the last, across its streams never below a term it was told
//! (`observer_went_back`); and `crate::observers::check_values` holds every
//! value told to its term (the leader's campaign value at version 0, one
//! it proclaimed for that term above: a Proclaim's value never shows
//! under another term or another leader). The counterfactual `resign-ignores-token` (a
//! Resign ends whoever leads) is caught by the first: a retried Resign
//! ends the next leader's leadership while it still holds a validity, and
//! a standby is elected inside it.
//!
//! A candidate waits at most [`ELECTED_WAIT`] (then withdraws by dropping
//! its stream, and campaigns again) and campaigns with a ttl of
//! [`CAMPAIGN_TTL`]: its first window is counted from its send, as every
//! grant's is, and a longer wait would leave it empty.

use crate::clients::{ClientLog, Shared};
use crate::election_values::{campaign_value, proclaimed, resource};
use crate::history::{
    ExtendOutcome, Failure, Grant, Kind, ReleaseRecord, Time, Via, Window, Workload,
};
use crate::hold_stream::{between, drained, validity, Stop, PATIENCE, RELEASE_MARGIN};
use crate::resigns;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redlockd_proto::pb::campaign_request::{Request, Start};
use redlockd_proto::pb::campaign_response::Event;
use redlockd_proto::pb::election_service_client::ElectionServiceClient;
use redlockd_proto::pb::{CampaignRequest, CampaignResponse, Lock, ProclaimRequest, ResignRequest};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;
use tonic::Streaming;

/// Candidates' client ids start here.
pub(crate) const FIRST_ID: u32 = 4_000;
/// Candidates, all elections together.
pub(crate) const CANDIDATES: u32 = 4;
/// Observers' ids start here (one per replica and election).
const OBSERVER_FIRST_ID: u32 = 4_500;
/// Elections (the first hot resources' names).
pub(crate) const ELECTIONS: usize = 2;
/// A candidate's leadership ttl (the daemon extends it).
const CAMPAIGN_TTL: Duration = Duration::from_secs(2);
/// How long a candidate waits to be elected before it withdraws.
const ELECTED_WAIT: Duration = Duration::from_secs(1);
/// A leader's work, in ms.
const WORK_MS: (u64, u64) = (50, 500);
/// Share of leaderships whose Resign is sent again after they ended, and
/// how long after (ms): time for a standby to be elected meanwhile.
const STALE_RESIGN: (f64, (u64, u64)) = (0.5, (5, 150));

/// Share of leaderships that proclaim a new value halfway through their work.
const PROCLAIMING: f64 = 0.5;

/// The elections' figures and observations.
#[derive(Debug, Default)]
pub(crate) struct ElectionLog {
    /// Campaigns opened.
    pub campaigns: usize,
    /// Campaigns withdrawn after [`ELECTED_WAIT`] (or refused).
    pub withdrawn: usize,
    /// Resigns sent again after their leadership ended, and those answered
    /// `was_leader = true` (the leadership was still being released).
    pub stale_resigns: (usize, usize),
    /// Every change observers were told.
    pub observed: Vec<crate::observers::Observed>,
    /// Proclaims sent by leaders, and those accepted.
    pub proclaims: (usize, usize),
}

/// Runs the candidates and observers until the deadline; their grants
/// and what they saw.
pub(crate) async fn run(shared: Arc<Shared>, seed: u64) -> (Vec<ClientLog>, ElectionLog) {
    let elections = ELECTIONS.min(shared.hot.len());
    let candidates: Vec<_> = (0..CANDIDATES)
        .map(|id| tokio::spawn(candidate(FIRST_ID + id, Arc::clone(&shared), seed)))
        .collect();
    let mut observers = Vec::new();
    for replica in 0..shared.addrs.len() {
        for election in 0..elections {
            let id = OBSERVER_FIRST_ID + (replica * elections + election) as u32;
            observers.push(tokio::spawn(crate::observers::observer(
                id,
                Arc::clone(&shared),
                replica,
                election,
            )));
        }
    }
    let (mut logs, mut figures) = (Vec::new(), ElectionLog::default());
    for task in candidates {
        if let Ok((log, of_candidate)) = task.await {
            logs.push(log);
            figures.campaigns += of_candidate.campaigns;
            figures.withdrawn += of_candidate.withdrawn;
            figures.stale_resigns.0 += of_candidate.stale_resigns.0;
            figures.stale_resigns.1 += of_candidate.stale_resigns.1;
            figures.proclaims.0 += of_candidate.proclaims.0;
            figures.proclaims.1 += of_candidate.proclaims.1;
        }
    }
    for task in observers {
        if let Ok(observed) = task.await {
            figures.observed.extend(observed);
        }
    }
    (logs, figures)
}

/// The outcome of [`run`]'s task (none without `--mix`), waited for until
/// `drained`.
pub(crate) async fn collect(
    task: Option<tokio::task::JoinHandle<(Vec<ClientLog>, ElectionLog)>>,
    drained: tokio::time::Instant,
) -> Result<(Vec<ClientLog>, ElectionLog), crate::cluster::BoxError> {
    let Some(task) = task else {
        return Ok((Vec::new(), ElectionLog::default()));
    };
    let abort = task.abort_handle();
    match tokio::time::timeout_at(drained, task).await {
        Ok(Ok(outcome)) => Ok(outcome),
        Ok(Err(error)) => Err(format!("the elections task failed: {error}").into()),
        Err(_) => {
            abort.abort();
            Err("the elections did not finish within the drain".into())
        }
    }
}

/// One candidate until the deadline.
async fn candidate(id: u32, shared: Arc<Shared>, seed: u64) -> (ClientLog, ElectionLog) {
    let mut rng = StdRng::seed_from_u64(seed ^ (u64::from(id) << 32) ^ 0xE1EC);
    let (clock, mut log, mut figures) =
        (shared.clock, ClientLog::default(), ElectionLog::default());
    let elections = ELECTIONS.min(shared.hot.len());
    while clock.now() < shared.deadline {
        let election = rng.random_range(0..elections);
        let name = shared.hot[election].clone();
        let (replica, channel) = shared.routes.pick(id as usize);
        figures.campaigns += 1;
        let sent = clock.now();
        let Some((requests, mut events, leadership)) = elect(channel.clone(), &name, id).await
        else {
            figures.withdrawn += 1;
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let received = clock.now();
        // Counted until the leadership ends, so a drain finds it.
        let _holding = shared.routes.holding(replica);
        let lock = Lock {
            resource: resource(&name),
            token: leadership.token.clone(),
            fence: leadership.term,
            validity: leadership.validity,
            ..Default::default()
        };
        let mut grant = shared.grant(Workload::Contended, id, replica, &lock);
        (grant.kind, grant.via) = (Kind::Leader, Via::Campaign);
        let first = Window::of_call(sent, received, validity(&lock));
        (grant.sent, grant.received, grant.valid_until) = (sent, received, first.end);
        grant.hold_from = sent;
        grant.windows.push(first);
        let registers = &shared.election_registers[election];
        let fenced = registers.check_in(&clock, grant.id, leadership.term, grant.valid_until);
        let read = registers.read_plain();
        let work = between(&mut rng, WORK_MS);
        let mut last_heard = grant.received;
        let until = clock.now() + work;
        let mut stop = Stop::Done;
        if rng.random_bool(PROCLAIMING) {
            // One to three Proclaims, spread over the work: each a value of
            // its own (`p1`, `p2`, ...), so that observers are held to
            // one value per version and to the leader's own order.
            let proclaims = rng.random_range(1..=3u32);
            for n in 1..=proclaims {
                let at = clock.now() + work / (proclaims + 1);
                stop = follow(&shared, &mut events, &mut grant, &mut last_heard, at).await;
                if stop != Stop::Done {
                    break;
                }
                let request = ProclaimRequest {
                    name: name.clone(),
                    token: leadership.token.clone(),
                    term: leadership.term,
                    value: proclaimed(id, leadership.term, n),
                };
                let mut client = ElectionServiceClient::new(channel.clone());
                figures.proclaims.0 += 1;
                let answer = tokio::time::timeout(PATIENCE, client.proclaim(request)).await;
                figures.proclaims.1 += usize::from(matches!(answer, Ok(Ok(_))));
            }
        }
        if stop == Stop::Done {
            stop = follow(&shared, &mut events, &mut grant, &mut last_heard, until).await;
        }
        if stop == Stop::Done {
            registers.write_plain(&clock, grant.id, read, grant.valid_until);
            if let Some(read) = fenced {
                registers.write_fenced(&clock, grant.id, leadership.term, read, grant.valid_until);
            }
        }
        grant.cs_end = clock.now();
        if stop == Stop::Done {
            let resign_in_stream =
                grant.cs_end + RELEASE_MARGIN < grant.valid_until && rng.random_bool(0.5);
            grant.release = Some(match resign_in_stream {
                true => resigns::resign(&shared, &requests, &mut events).await,
                // Vanishes: the daemon releases at once.
                false => {
                    let now = clock.now();
                    ReleaseRecord {
                        sent: now,
                        received: now,
                        outcome: Err(Failure::Status(tonic::Code::Cancelled)),
                        calls: 1,
                        first_failure: None,
                    }
                }
            });
        }
        drop((requests, events));
        let (share, after) = STALE_RESIGN;
        if rng.random_bool(share) {
            tokio::time::sleep(between(&mut rng, after)).await;
            let request = ResignRequest {
                name,
                token: leadership.token,
            };
            let resigned = resigns::resign_again(&shared, id as usize, request).await;
            if let Ok(was_leader) = resigned.outcome {
                figures.stale_resigns.0 += 1;
                figures.stale_resigns.1 += usize::from(was_leader);
            }
            // A leadership whose stream was lost (its replica killed) holds
            // on the masters until its ttl runs out or this Resign ends it:
            // then this Resign is its release, and its window ends here.
            grant.release.get_or_insert(resigned);
        }
        log.grants.push(grant);
    }
    (log, figures)
}

/// A candidate's open stream and its leadership.
type Elected = (
    mpsc::Sender<CampaignRequest>,
    Streaming<CampaignResponse>,
    redlockd_proto::pb::Leadership,
);

/// Campaigns in `name` on `channel` and waits for `elected`, at most
/// [`ELECTED_WAIT`]; `None` when not elected in that time (the stream is
/// dropped: the candidate withdraws) or refused.
async fn elect(channel: Channel, name: &str, id: u32) -> Option<Elected> {
    let (requests, outgoing) = mpsc::channel(2);
    let start = CampaignRequest {
        request: Some(Request::Campaign(Start {
            name: name.to_owned(),
            value: campaign_value(id),
            ttl: prost_types::Duration::try_from(CAMPAIGN_TTL).ok(),
        })),
    };
    requests.send(start).await.ok()?;
    let elected = async {
        let mut client = ElectionServiceClient::new(channel);
        let mut events = client
            .campaign(ReceiverStream::new(outgoing))
            .await
            .ok()?
            .into_inner();
        match events.message().await {
            Ok(Some(CampaignResponse {
                event: Some(Event::Elected(leadership)),
            })) => Some((events, leadership)),
            _ => None,
        }
    };
    let (events, leadership) = tokio::time::timeout(ELECTED_WAIT, elected).await.ok()??;
    Some((requests, events, leadership))
}

/// Follows a leadership's events until `until`, as
/// `crate::hold_stream::follow` does a Hold's: each `kept` a window
/// counted from when the previous event arrived (`last_heard`, kept
/// across calls: a leader follows its events in two parts around a
/// Proclaim).
async fn follow(
    shared: &Shared,
    events: &mut Streaming<CampaignResponse>,
    grant: &mut Grant,
    last_heard: &mut Time,
    until: Time,
) -> Stop {
    let clock = shared.clock;
    loop {
        let left = until.saturating_sub(clock.now());
        if left.is_zero() {
            return Stop::Done;
        }
        let event = match tokio::time::timeout(left, events.message()).await {
            Err(_) => return Stop::Done,
            Ok(Ok(Some(CampaignResponse { event }))) => event,
            Ok(_) => return Stop::Gone,
        };
        match event {
            Some(Event::Kept(kept)) => {
                let now = clock.now();
                let validity = kept
                    .validity
                    .and_then(|d| Duration::try_from(d).ok())
                    .unwrap_or_default();
                grant.extended(*last_heard, now, ExtendOutcome::Ok(validity));
                *last_heard = now;
            }
            Some(Event::Draining(draining)) => {
                drained(grant, draining.release_in, clock.now());
                return Stop::Done;
            }
            Some(Event::Lost(_)) => {
                grant.extended(*last_heard, clock.now(), ExtendOutcome::Lost);
                return Stop::Gone;
            }
            _ => return Stop::Gone,
        }
    }
}
