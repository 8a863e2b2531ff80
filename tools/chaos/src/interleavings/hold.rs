//! A minimal `Hold` session for the interleavings: open one with an
//! `acquire`, read its events, close it by half-close or by dropping it.

use super::rig::validity;
use crate::cluster::BoxError;
use redlockd_proto::pb::hold_event::Event;
use redlockd_proto::pb::hold_request::Request;
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use redlockd_proto::pb::{AcquireRequest, HoldEvent, HoldRequest, Lock};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tonic::transport::Channel;
use tonic::Streaming;

/// Bound on any wait for the daemon.
const PATIENCE: Duration = Duration::from_secs(5);

/// An open session holding its lock.
pub(crate) struct Session {
    requests: Option<mpsc::Sender<HoldRequest>>,
    events: Streaming<HoldEvent>,
    /// The lock as `acquired`.
    pub lock: Lock,
    /// Until when the lock is guaranteed: the last event's validity,
    /// counted from when the event before it arrived (one-way delay taken
    /// off), or from the `acquire`'s send for the first.
    pub until: Instant,
    last_heard: Instant,
}

/// Opens a session on `channel` with `request`; `Err` with the status
/// when it was not granted.
pub(crate) async fn open(channel: Channel, request: AcquireRequest) -> Result<Session, BoxError> {
    let (requests, outgoing) = mpsc::channel(2);
    let sent = Instant::now();
    requests
        .send(HoldRequest {
            request: Some(Request::Acquire(request)),
        })
        .await?;
    let stream = tokio_stream::wrappers::ReceiverStream::new(outgoing);
    let response = tokio::time::timeout(PATIENCE, LockServiceClient::new(channel).hold(stream))
        .await
        .map_err(|_| "the stream did not open in time")??;
    let mut events = response.into_inner();
    let first = tokio::time::timeout(PATIENCE, events.message())
        .await
        .map_err(|_| "no first event in time")??;
    match first.and_then(|e| e.event) {
        Some(Event::Acquired(lock)) => {
            let now = Instant::now();
            Ok(Session {
                requests: Some(requests),
                events,
                until: sent + validity(&lock),
                lock,
                last_heard: now,
            })
        }
        other => Err(format!("first event {other:?}").into()),
    }
}

impl Session {
    /// Reads events for `for_`: each `extended` moves `until` on; `Ok(false)`
    /// once the daemon said `lost` or ended the stream.
    pub(crate) async fn follow(&mut self, for_: Duration) -> bool {
        let end = Instant::now() + for_;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return true;
            }
            match tokio::time::timeout(left, self.events.message()).await {
                Err(_) => return true,
                Ok(Ok(Some(HoldEvent {
                    event: Some(Event::Extended(lock)),
                }))) => {
                    let now = Instant::now();
                    self.until = self.until.max(self.last_heard + validity(&lock));
                    self.last_heard = now;
                }
                Ok(Ok(Some(HoldEvent {
                    event: Some(Event::Lost(_)),
                }))) => return false,
                Ok(Ok(Some(_))) => {}
                Ok(Ok(None)) | Ok(Err(_)) => return false,
            }
        }
    }

    /// Half-closes the stream (the daemon releases and answers `released`);
    /// `was_held`, if it came.
    pub(crate) async fn half_close(mut self) -> Option<bool> {
        drop(self.requests.take());
        let end = Instant::now() + PATIENCE;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.events.message()).await {
                Ok(Ok(Some(HoldEvent {
                    event: Some(Event::Released(released)),
                }))) => return Some(released.was_held),
                Ok(Ok(Some(_))) => {}
                _ => return None,
            }
        }
    }
}
