//! What a session's stream speaks. A `Hold` and an election's `Campaign`
//! are one session (acquire, keep extended, release or lose) over two sets
//! of messages: [`Wire`] is the difference, so that both share every rule
//! of ending, draining and losing a lock, written once in `session.rs`.

use super::SessionError;
use crate::pb;
use crate::redlock::Lock;
use crate::service::election::messages as election;
use crate::service::proto_duration;
use crate::service::request::{AcquireArgs, RequestBounds};
use std::time::Duration;
use tonic::Status;

/// One kind of session's messages.
pub(crate) trait Wire: Send + Sync + 'static {
    /// What the client sends.
    type Request: prost::Message + Default + Send + 'static;
    /// What the daemon sends back.
    type Event: Send + 'static;
    /// The rpc's name, in logs and metrics.
    const RPC: &'static str;
    /// Whether the session waits until it is granted, however long (a
    /// candidate), rather than for the `wait` its first message asked;
    /// its grant is then a leadership (counted in the election metrics).
    const WAITS_UNTIL_GRANTED: bool;
    /// The first message's acquisition, checked; the session's error when
    /// it is not the opening message.
    fn opening(bounds: &RequestBounds, first: Self::Request) -> Result<AcquireArgs, Status>;
    /// Whether a message mid-session is the client's orderly end
    /// (`Ok(())`), or one not allowed then.
    fn ending(request: Self::Request) -> Result<(), SessionError>;
    /// The lock is granted (`args`: the session's opening).
    fn acquired(lock: Lock, args: &AcquireArgs) -> Self::Event;
    /// The lock was extended.
    fn extended(lock: Lock, args: &AcquireArgs) -> Self::Event;
    /// The lock was released at the client's end.
    fn released(was_held: bool) -> Self::Event;
    /// The lock could not be kept.
    fn lost(reason: String) -> Self::Event;
    /// The daemon drains; the lock is kept for `release_in` at most.
    fn draining(release_in: Duration) -> Self::Event;
}

/// `LockService.Hold`.
pub(crate) struct Hold;

impl Wire for Hold {
    type Request = pb::HoldRequest;
    type Event = pb::HoldEvent;
    const RPC: &'static str = "Hold";
    const WAITS_UNTIL_GRANTED: bool = false;

    fn opening(bounds: &RequestBounds, first: pb::HoldRequest) -> Result<AcquireArgs, Status> {
        match first.request {
            Some(pb::hold_request::Request::Acquire(acquire)) => Ok(bounds.acquire(acquire)?),
            _ => Err(SessionError::FirstNotAcquire.into()),
        }
    }

    fn ending(request: pb::HoldRequest) -> Result<(), SessionError> {
        match request.request {
            Some(pb::hold_request::Request::Release(_)) => Ok(()),
            _ => Err(SessionError::OnlyRelease),
        }
    }

    fn acquired(lock: Lock, _: &AcquireArgs) -> pb::HoldEvent {
        hold_event(pb::hold_event::Event::Acquired(lock.into()))
    }

    fn extended(lock: Lock, _: &AcquireArgs) -> pb::HoldEvent {
        hold_event(pb::hold_event::Event::Extended(lock.into()))
    }

    fn released(was_held: bool) -> pb::HoldEvent {
        hold_event(pb::hold_event::Event::Released(pb::hold_event::Released {
            was_held,
        }))
    }

    fn lost(reason: String) -> pb::HoldEvent {
        hold_event(pb::hold_event::Event::Lost(pb::hold_event::Lost { reason }))
    }

    fn draining(release_in: Duration) -> pb::HoldEvent {
        hold_event(pb::hold_event::Event::Draining(pb::hold_event::Draining {
            release_in: Some(proto_duration(release_in)),
        }))
    }
}

fn hold_event(event: pb::hold_event::Event) -> pb::HoldEvent {
    pb::HoldEvent { event: Some(event) }
}

/// `ElectionService.Campaign`: a Hold on the election's key family that
/// waits until elected, its lock's fence the term.
pub(crate) struct Campaign;

impl Wire for Campaign {
    type Request = pb::CampaignRequest;
    type Event = pb::CampaignResponse;
    const RPC: &'static str = "Campaign";
    const WAITS_UNTIL_GRANTED: bool = true;

    fn opening(bounds: &RequestBounds, first: pb::CampaignRequest) -> Result<AcquireArgs, Status> {
        match first.request {
            Some(pb::campaign_request::Request::Campaign(start)) => {
                Ok(election::campaign_args(bounds, start)?)
            }
            _ => Err(SessionError::FirstNotCampaign.into()),
        }
    }

    fn ending(request: pb::CampaignRequest) -> Result<(), SessionError> {
        match request.request {
            Some(pb::campaign_request::Request::Resign(_)) => Ok(()),
            _ => Err(SessionError::OnlyResign),
        }
    }

    fn acquired(lock: Lock, args: &AcquireArgs) -> pb::CampaignResponse {
        campaign_event(pb::campaign_response::Event::Elected(election::leadership(
            lock,
            &args.owner,
        )))
    }

    fn extended(lock: Lock, args: &AcquireArgs) -> pb::CampaignResponse {
        campaign_event(pb::campaign_response::Event::Kept(election::leadership(
            lock,
            &args.owner,
        )))
    }

    fn released(was_leader: bool) -> pb::CampaignResponse {
        campaign_event(pb::campaign_response::Event::Resigned(
            pb::campaign_response::Resigned { was_leader },
        ))
    }

    fn lost(reason: String) -> pb::CampaignResponse {
        campaign_event(pb::campaign_response::Event::Lost(
            pb::campaign_response::Lost { reason },
        ))
    }

    fn draining(release_in: Duration) -> pb::CampaignResponse {
        campaign_event(pb::campaign_response::Event::Draining(
            pb::campaign_response::Draining {
                release_in: Some(proto_duration(release_in)),
            },
        ))
    }
}

fn campaign_event(event: pb::campaign_response::Event) -> pb::CampaignResponse {
    pb::CampaignResponse { event: Some(event) }
}
