//! How a candidate resigns (`crate::elections`): in its Campaign stream,
//! and again after the stream ended, as a client retrying its Resign would.
//! Both are the leadership's release when it has none yet: a leadership
//! whose stream was lost (its replica killed) holds on the masters until its
//! ttl runs out or a Resign with its token ends it, and the checker cuts its
//! window at that Resign's send.

use crate::clients::Shared;
use crate::history::{Failure, ReleaseRecord};
use crate::hold_stream::PATIENCE;
use redlockd_proto::pb::campaign_request::{Request, Resign};
use redlockd_proto::pb::campaign_response::Event;
use redlockd_proto::pb::election_service_client::ElectionServiceClient;
use redlockd_proto::pb::{CampaignRequest, CampaignResponse, ResignRequest};
use tokio::sync::mpsc;
use tonic::Streaming;

/// Sends a leadership's Resign again after its stream ended, as a client
/// retrying it would: through whichever replica is up now (the candidate
/// whose `home` is given), as a client behind a load balancer retries;
/// what it found, as a release record.
pub(crate) async fn resign_again(
    shared: &Shared,
    home: usize,
    request: ResignRequest,
) -> ReleaseRecord {
    let clock = shared.clock;
    let sent = clock.now();
    let (_, channel) = shared.routes.pick(home);
    let mut client = ElectionServiceClient::new(channel);
    let outcome = match tokio::time::timeout(PATIENCE, client.resign(request)).await {
        Ok(Ok(answer)) => Ok(answer.into_inner().was_leader),
        Ok(Err(status)) => Err(Failure::Status(status.code())),
        Err(_) => Err(Failure::TimedOut),
    };
    ReleaseRecord {
        sent,
        received: clock.now(),
        outcome,
        calls: 1,
        first_failure: None,
    }
}

/// Sends `resign` and waits for `resigned`, skipping late `kept`s.
pub(crate) async fn resign(
    shared: &Shared,
    requests: &mpsc::Sender<CampaignRequest>,
    events: &mut Streaming<CampaignResponse>,
) -> ReleaseRecord {
    let clock = shared.clock;
    let sent = clock.now();
    let message = CampaignRequest {
        request: Some(Request::Resign(Resign {})),
    };
    let mut outcome = Err(Failure::TimedOut);
    if requests.send(message).await.is_ok() {
        outcome = resigned(events).await;
    }
    ReleaseRecord {
        sent,
        received: clock.now(),
        outcome,
        calls: 1,
        first_failure: None,
    }
}

/// Waits for `resigned` after a `resign`.
async fn resigned(events: &mut Streaming<CampaignResponse>) -> Result<bool, Failure> {
    let give_up = tokio::time::Instant::now() + PATIENCE;
    loop {
        match tokio::time::timeout_at(give_up, events.message()).await {
            Ok(Ok(Some(CampaignResponse {
                event: Some(Event::Resigned(resigned)),
            }))) => return Ok(resigned.was_leader),
            Ok(Ok(Some(CampaignResponse {
                event: Some(Event::Lost(_)),
            }))) => return Err(Failure::Status(tonic::Code::Aborted)),
            Ok(Ok(Some(_))) => continue,
            Ok(Ok(None)) => return Err(Failure::Status(tonic::Code::Unavailable)),
            Ok(Err(status)) => return Err(Failure::Status(status.code())),
            Err(_) => return Err(Failure::TimedOut),
        }
    }
}
