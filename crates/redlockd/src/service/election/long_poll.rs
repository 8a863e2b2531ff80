//! `Leader` answered once the leader moves on: the gateway's long poll
//! (`GET /v1/elections/{name}?after=TERM&wait=30s`), an `Observe` for
//! callers without a gRPC stream. The caller passes the term it last saw
//! (0: it saw no leader); the answer comes as soon as the election has
//! moved on from it (see [`moved_on`]), or when `wait` runs out, with the
//! leader as it is then. A caller loops, passing each answer's term.

use super::messages::{checked_name, resource_of};
use super::watch::Watch;
use super::{leader, LockApi};
use crate::pb;
use crate::service::request::invalid;
use crate::service::{observed, record_resource};
use std::time::Duration;
use tokio::time::Instant;
use tonic::{Request, Status};

/// How long a long poll waits when its query does not say.
const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// Whether an election whose leader now has term `now` (0: no leader) has
/// moved on from `after`, the term the caller last saw (0: no leader):
/// only forward, as `Observe` tells it (a read from another majority
/// that shows an older leader is not news).
fn moved_on(after: u64, now: u64) -> bool {
    now > after || (now == 0 && after > 0)
}

impl LockApi {
    /// The leader of `request`'s election once it has moved on from term
    /// `after`, or after `wait` (at most `redlock.max_wait`; absent:
    /// [`DEFAULT_WAIT`], or `max_wait` if that is shorter). A drain ends the
    /// wait UNAVAILABLE, as it ends an `Observe`: poll another replica.
    pub(crate) async fn leader_after(
        &self,
        request: Request<pb::LeaderRequest>,
        after: u64,
        wait: Option<Duration>,
    ) -> Result<pb::LeaderResponse, Status> {
        let wait = wait.unwrap_or(DEFAULT_WAIT.min(self.limits.max_wait));
        observed("Leader", async {
            let (identity, _slot) = self.admit(&request)?;
            self.sessions.drain().refuse_new()?;
            let name = checked_name(&self.limits, request.into_inner().name)?;
            if wait > self.limits.max_wait {
                let (wait, max) = (
                    humantime::format_duration(wait),
                    humantime::format_duration(self.limits.max_wait),
                );
                return Err(invalid("wait", format!("{wait} is over max_wait {max}")).into());
            }
            identity.permit(&name)?;
            record_resource(&name);
            let give_up_at = Instant::now() + wait;
            let mut watch = Watch::new(&self.engine, resource_of(&name));
            let waiting = async {
                loop {
                    let held = watch.read().await?;
                    let now = held.as_ref().map_or(0, |held| held.fence);
                    if moved_on(after, now) || Instant::now() >= give_up_at {
                        return Ok::<_, Status>(pb::LeaderResponse {
                            has_leader: held.is_some(),
                            leader: held.map(|held| leader(&name, held)),
                        });
                    }
                    tokio::select! {
                        () = watch.changed(held.as_ref()) => {}
                        () = tokio::time::sleep_until(give_up_at) => {}
                    }
                }
            };
            self.sessions.drain().unless_draining(waiting).await?
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::moved_on;

    /// Forward only: a higher term, or no leader after one.
    #[test]
    fn the_leader_moves_on_only_forward() {
        assert!(moved_on(0, 3), "a leader after none");
        assert!(moved_on(3, 5), "a later term");
        assert!(moved_on(3, 0), "no leader after one");
        assert!(!moved_on(3, 3), "the same leader");
        assert!(!moved_on(5, 3), "an older term read from another majority");
        assert!(!moved_on(0, 0), "still no leader");
    }
}
