//! `redlock.v1.ElectionService`: leader election over the lock engine.
//!
//! An election `NAME` is the lock on the resource [`resource_of`]`(NAME)`:
//! a name that starts with a control character (`crate::redlock::keys::ELECTION_MARK`), which no resource a
//! client names may hold (`RequestBounds::resource` refuses them), so an
//! election and a lock never share keys whatever their names. Its leader is
//! that lock's holder, held by a `Campaign` session (a `Hold` that waits
//! until granted, `super::hold::Campaign`); the leader's value is the
//! grant's recorded owner and its term the grant's fence, so terms come
//! from the election's one fence sequence and strictly increase.
//!
//! `Leader` reads the holder from a majority (the operator's `Inspect`).
//! `Observe` re-reads it when this replica hears the holder may have changed
//! (any replica's leadership notices, of a leader elected or gone, and
//! release notices:
//! `crate::redlock::changes`, `crate::redlock::notices`), when the leader's
//! last known validity runs out, and otherwise every `redlock.wait_fallback`
//! (a notice lost on its way). It sends a change only when it moves
//! forward: a term above the last it sent, a newer value of that term (a
//! leader's `Proclaim`, `crate::redlock::proclaim`, announced as a new
//! leader is), or no leader after one. The
//! gateway's long poll waits the same way (`long_poll`, `watch`).

mod long_poll;
pub(crate) mod messages;
mod watch;

use super::hold::Campaign;
use super::{observed, proto_duration, record_resource, LockApi};
use crate::pb;
use crate::pb::election_service_server::ElectionService;
use crate::redlock::HeldLock;
use crate::service::drain::Drain;
use crate::service::request::{invalid, owner};
use messages::{checked_name, election_field, resource_of};
use std::pin::Pin;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_stream::Stream;
use tonic::{Request, Response, Status, Streaming};
use watch::Watch;

/// The holder read from the masters as a leader: only once its term is
/// recorded. A lock without a fence on the majority that holds it is a
/// leadership still being granted (between the acquisition and the fence's
/// commit, `crate::redlock::fence`), whose candidate has not been told it
/// leads: no leader yet.
fn elected(held: Option<HeldLock>) -> Option<HeldLock> {
    held.filter(|held| held.fence > 0)
}

/// The current leader as anyone sees it.
fn leader(name: &str, held: HeldLock) -> pb::Leader {
    pb::Leader {
        name: name.to_owned(),
        value: held.owner,
        term: held.fence,
        since: held.acquired_at.map(prost_types::Timestamp::from),
        remaining: Some(proto_duration(held.remaining)),
        value_version: held.owner_version,
    }
}

/// The stream of an `Observe`.
pub(crate) type ObserveStream =
    Pin<Box<dyn Stream<Item = Result<pb::ObserveResponse, Status>> + Send>>;

/// Changes an observer may have unread before the daemon waits for it.
const OBSERVE_BUFFER: usize = 8;

#[tonic::async_trait]
impl ElectionService for LockApi {
    type CampaignStream = super::hold::SessionStream<Campaign>;

    async fn campaign(
        &self,
        request: Request<Streaming<pb::CampaignRequest>>,
    ) -> Result<Response<Self::CampaignStream>, Status> {
        observed("Campaign", self.open_session::<Campaign>(request)).await
    }

    async fn leader(
        &self,
        request: Request<pb::LeaderRequest>,
    ) -> Result<Response<pb::LeaderResponse>, Status> {
        observed("Leader", async {
            let (identity, _slot) = self.admit(&request)?;
            let name = checked_name(&self.limits, request.into_inner().name)?;
            identity.permit(&name)?;
            record_resource(&name);
            let held = elected(self.engine.inspect(&resource_of(&name)).await?);
            Ok(Response::new(pb::LeaderResponse {
                has_leader: held.is_some(),
                leader: held.map(|held| leader(&name, held)),
            }))
        })
        .await
    }

    type ObserveStream = ObserveStream;

    async fn observe(
        &self,
        request: Request<pb::ObserveRequest>,
    ) -> Result<Response<ObserveStream>, Status> {
        observed("Observe", async {
            let (identity, call) = self.admit(&request)?;
            self.sessions.drain().refuse_new()?;
            let name = checked_name(&self.limits, request.into_inner().name)?;
            identity.permit(&name)?;
            record_resource(&name);
            let (events, stream) = mpsc::channel(OBSERVE_BUFFER);
            let observer = Observer {
                watch: Watch::new(&self.engine, resource_of(&name)),
                name,
                events,
                drain: self.sessions.drain().clone(),
            };
            tokio::spawn(async move {
                let _call = call;
                Box::pin(observer.run()).await;
            });
            Ok(Response::new(
                Box::pin(ReceiverStream::new(stream)) as ObserveStream
            ))
        })
        .await
    }

    async fn resign(
        &self,
        request: Request<pb::ResignRequest>,
    ) -> Result<Response<pb::ResignResponse>, Status> {
        observed("Resign", async {
            let (identity, _slot) = self.admit(&request)?;
            let request = request.into_inner();
            let mut lock = self
                .limits
                .lock_ref(request.name, &request.token)
                .map_err(election_field)?;
            identity.permit(&lock.resource)?;
            record_resource(&lock.resource);
            lock.resource = resource_of(&lock.resource);
            let was_leader = match self.counterfactuals.resign_ignores_token {
                // The fixed defect, for the chaos checker: whoever leads.
                true => self.engine.force_release(&lock.resource).await?.is_some(),
                false => self.engine.release(&lock.resource, &lock.token).await?,
            };
            Ok(Response::new(pb::ResignResponse { was_leader }))
        })
        .await
    }

    async fn proclaim(
        &self,
        request: Request<pb::ProclaimRequest>,
    ) -> Result<Response<pb::ProclaimResponse>, Status> {
        observed("Proclaim", async {
            let (identity, _slot) = self.admit(&request)?;
            let request = request.into_inner();
            let lock = self
                .limits
                .lock_ref(request.name, &request.token)
                .map_err(election_field)?;
            let value = owner(request.value).map_err(election_field)?;
            if request.term == 0 {
                return Err(invalid("term", "is required (Leadership.term)").into());
            }
            identity.permit(&lock.resource)?;
            record_resource(&lock.resource);
            let resource = resource_of(&lock.resource);
            let value_version = self
                .engine
                .proclaim(&resource, &lock.token, request.term, &value)
                .await?;
            Ok(Response::new(pb::ProclaimResponse { value_version }))
        })
        .await
    }
}

/// One `Observe` stream's task.
struct Observer {
    watch: Watch,
    name: String,
    events: mpsc::Sender<Result<pb::ObserveResponse, Status>>,
    drain: Drain,
}

/// Where a leader stands in an election's history: its term, then its
/// value's version within the term (`Proclaim`).
type Step = (u64, u64);

/// What an observer last told its client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Told {
    /// Nothing yet.
    Nothing,
    /// The leader of this term, with this value's version.
    Leader(Step),
    /// No leader, after the given term (0: none seen).
    NoLeader(u64),
}

impl Told {
    /// What to tell after reading the election as `now` (a leader's step,
    /// or no leader), if anything: only a step forward, a higher term or a
    /// newer value of the term told; never a term again after "no leader"
    /// was told of it.
    fn next(self, now: Option<Step>) -> Option<Told> {
        match (self, now) {
            (Told::Nothing, Some(step)) => Some(Told::Leader(step)),
            (Told::Nothing, None) => Some(Told::NoLeader(0)),
            (Told::Leader(told), Some(step)) if step > told => Some(Told::Leader(step)),
            (Told::NoLeader(term), Some(step)) if step.0 > term => Some(Told::Leader(step)),
            (Told::Leader((term, _)), None) => Some(Told::NoLeader(term)),
            _ => None,
        }
    }
}

impl Observer {
    async fn run(mut self) {
        let mut told = Told::Nothing;
        loop {
            let held = match self.watch.read().await {
                Ok(held) => held,
                Err(error) => {
                    // Too few masters answered: the stream ends with the
                    // error; the client observes again (it has the last
                    // term it saw, and is never sent a lower one here).
                    let _ = self.events.send(Err(Status::from(error))).await;
                    return;
                }
            };
            let step = held.as_ref().map(|h| (h.fence, h.owner_version));
            if let Some(next) = told.next(step) {
                told = next;
                let answer = pb::ObserveResponse {
                    has_leader: held.is_some(),
                    leader: held.clone().map(|held| leader(&self.name, held)),
                };
                if self.events.send(Ok(answer)).await.is_err() {
                    return;
                }
            }
            tokio::select! {
                () = self.watch.changed(held.as_ref()) => {}
                () = self.events.closed() => return,
                () = self.drain.started() => {
                    // As any call refused while draining: observe again,
                    // on another replica.
                    let draining = Status::from(crate::service::drain::Draining);
                    let _ = self.events.send(Err(draining)).await;
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An observer only ever steps forward: a higher term, a newer value
    /// of the term it told, or no leader after a leader; never a lower or
    /// repeated step, nor a term it told was over.
    #[test]
    fn an_observer_never_goes_back() {
        assert_eq!(Told::Nothing.next(None), Some(Told::NoLeader(0)));
        assert_eq!(Told::Nothing.next(Some((4, 0))), Some(Told::Leader((4, 0))));
        assert_eq!(Told::Leader((4, 0)).next(Some((4, 0))), None);
        assert_eq!(Told::Leader((4, 0)).next(Some((3, 7))), None);
        assert_eq!(
            Told::Leader((4, 0)).next(Some((4, 2))),
            Some(Told::Leader((4, 2)))
        );
        assert_eq!(Told::Leader((4, 2)).next(Some((4, 1))), None);
        assert_eq!(
            Told::Leader((4, 2)).next(Some((6, 0))),
            Some(Told::Leader((6, 0)))
        );
        assert_eq!(Told::Leader((4, 2)).next(None), Some(Told::NoLeader(4)));
        assert_eq!(Told::NoLeader(4).next(None), None);
        assert_eq!(Told::NoLeader(4).next(Some((4, 3))), None);
        assert_eq!(
            Told::NoLeader(4).next(Some((5, 0))),
            Some(Told::Leader((5, 0)))
        );
    }
}
