//! Calls of `ElectionService` the election tests share: a client of a
//! daemon, a candidate's stream, and an observer's changes read in order.

#![allow(dead_code)] // each test binary uses a different part

use super::common::*;
use redlockd::pb;
use redlockd::pb::campaign_response::Event;
use redlockd::pb::election_service_client::ElectionServiceClient;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::Channel;

/// An election client of daemon `i`.
pub(crate) async fn elections(h: &Harness, i: usize) -> ElectionServiceClient<Channel> {
    let channel = client::endpoint(h.daemons[i].addr)
        .expect("endpoint")
        .connect()
        .await
        .expect("connect");
    ElectionServiceClient::new(channel)
}

/// A candidate: its requests, and its events.
pub(crate) struct Candidate {
    pub(crate) requests: mpsc::Sender<pb::CampaignRequest>,
    pub(crate) events: tonic::Streaming<pb::CampaignResponse>,
}

/// Stands as a candidate in `name` with `value` (ttl 2 s).
pub(crate) async fn campaign(
    c: &mut ElectionServiceClient<Channel>,
    name: &str,
    value: &str,
) -> Candidate {
    campaign_for(c, name, value, 2_000).await
}

/// Stands as a candidate in `name` with `value` and a ttl of `ttl_ms`.
pub(crate) async fn campaign_for(
    c: &mut ElectionServiceClient<Channel>,
    name: &str,
    value: &str,
    ttl_ms: u64,
) -> Candidate {
    let (requests, outgoing) = mpsc::channel(4);
    requests
        .send(pb::CampaignRequest {
            request: Some(pb::campaign_request::Request::Campaign(
                pb::campaign_request::Start {
                    name: name.into(),
                    value: value.into(),
                    ttl: ms(ttl_ms),
                },
            )),
        })
        .await
        .expect("queue the first message");
    let events = c
        .campaign(ReceiverStream::new(outgoing))
        .await
        .expect("Campaign opens")
        .into_inner();
    Candidate { requests, events }
}

impl Candidate {
    /// The next event, within 10 s.
    pub(crate) async fn next(&mut self) -> Option<Event> {
        tokio::time::timeout(Duration::from_secs(10), self.events.message())
            .await
            .expect("an event within 10 s")
            .expect("stream ok")
            .and_then(|e| e.event)
    }

    /// Waits to be elected (skipping nothing: `elected` must come first).
    pub(crate) async fn elected(&mut self) -> pb::Leadership {
        match self.next().await {
            Some(Event::Elected(leadership)) => leadership,
            other => panic!("expected `elected`, got {other:?}"),
        }
    }

    /// The next event that is not `kept`.
    pub(crate) async fn next_but_kept(&mut self) -> Option<Event> {
        loop {
            match self.next().await {
                Some(Event::Kept(_)) => {}
                other => return other,
            }
        }
    }

    /// Whether an event arrives within `within` (a standby must not hear
    /// `elected` while another leads).
    pub(crate) async fn quiet_for(&mut self, within: Duration) -> bool {
        tokio::time::timeout(within, self.events.message())
            .await
            .is_err()
    }

    pub(crate) async fn resign(&self) {
        self.requests
            .send(pb::CampaignRequest {
                request: Some(pb::campaign_request::Request::Resign(
                    pb::campaign_request::Resign {},
                )),
            })
            .await
            .expect("send resign");
    }
}

/// The next change an observer is told, within 10 s.
pub(crate) async fn next_change(
    observed: &mut tonic::Streaming<pb::ObserveResponse>,
) -> pb::ObserveResponse {
    tokio::time::timeout(Duration::from_secs(10), observed.message())
        .await
        .expect("a change within 10 s")
        .expect("stream ok")
        .expect("the stream goes on")
}

/// Reads changes until one names `term` as leader; every change before it
/// goes forward (a higher term, a newer value of the same term, or no
/// leader). `last` is the (term, value_version) of the last leader read.
pub(crate) async fn observe_until(
    observed: &mut tonic::Streaming<pb::ObserveResponse>,
    last: &mut u64,
    term: u64,
) -> pb::Leader {
    let mut step = (*last, u64::MAX);
    loop {
        let leader = next_leader(observed, &mut step).await;
        *last = leader.term;
        if leader.term == term {
            return leader;
        }
        assert!(leader.term < term, "skipped past term {term}");
    }
}

/// Reads changes until one names a leader, and checks it comes after
/// `step` (the (term, value_version) told before; `u64::MAX` as version:
/// only a higher term is after it), which it then becomes.
pub(crate) async fn next_leader(
    observed: &mut tonic::Streaming<pb::ObserveResponse>,
    step: &mut (u64, u64),
) -> pb::Leader {
    loop {
        let change = next_change(observed).await;
        match change.leader {
            Some(leader) => {
                assert!(change.has_leader);
                let now = (leader.term, leader.value_version);
                let after = match step.1 {
                    u64::MAX => now.0 > step.0,
                    _ => now > *step,
                };
                assert!(after, "an observer went back: {now:?} after {step:?}");
                *step = now;
                return leader;
            }
            None => assert!(!change.has_leader),
        }
    }
}
