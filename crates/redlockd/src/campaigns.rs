//! The daemon's own campaigns (`[[election]]`): for each configured
//! election it stands as a candidate on behalf of its pod, as a `Campaign`
//! session would (the same engine calls: an acquisition that waits until
//! granted, kept by `Redlock::hold`), and says whether it leads in two
//! places a program without a client can read:
//! - `GET /elections/NAME` on the metrics endpoint: 200 while this daemon
//!   leads (its term and value in the body), 503 otherwise, so that a
//!   Kubernetes readiness probe routes a Service to the leader only;
//! - the election's `file`, rewritten (atomically) on every change.
//!
//! When the daemon starts draining it resigns at once (a rolling update
//! hands leadership over without waiting for the ttl); a leadership that
//! could not be kept is reported lost, and the daemon campaigns again.

use crate::config::ElectionConfig;
use crate::metrics;
use crate::redlock::{validity, HoldEnd, Holder, LockError, Redlock};
use crate::service::drain::Drain;
use crate::service::election::messages::resource_of;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Pause before campaigning again after the masters could not be reached
/// or a leadership was lost.
const RECAMPAIGN_AFTER: Duration = Duration::from_secs(1);

/// This daemon's leadership of one election, when it leads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Leading {
    /// The leadership's term (its fence).
    pub term: u64,
    /// The value it campaigned with.
    pub value: String,
    /// When it stops being guaranteed, on the monotonic clock: the
    /// endpoint answers 503 from then on, whether or not the campaign's
    /// task has noticed (a frozen daemon, just resumed).
    pub until: tokio::time::Instant,
    /// The same on the wall clock, for the file's readers (same host).
    pub until_wall: std::time::SystemTime,
}

impl Leading {
    fn of(lock: &crate::redlock::Lock, value: &str) -> Leading {
        Leading {
            term: lock.fence,
            value: value.to_owned(),
            until: lock.deadline.mono,
            until_wall: std::time::SystemTime::now() + lock.deadline.left(),
        }
    }
}

/// Whether this daemon leads each configured election, by name.
#[derive(Clone, Default)]
pub(crate) struct Campaigns {
    by_name: Arc<HashMap<String, watch::Receiver<Option<Leading>>>>,
}

impl Campaigns {
    /// Starts a campaign for each of `elections` (their values already
    /// checked by the configuration), until `drain` starts.
    pub(crate) fn start(
        engine: &Arc<Redlock>,
        elections: &[ElectionConfig],
        extend_at: f64,
        max_wait: Duration,
        drain: &Drain,
    ) -> Campaigns {
        let mut by_name = HashMap::new();
        for election in elections {
            let (leading, watched) = watch::channel(None);
            let campaign = Campaign {
                engine: Arc::clone(engine),
                name: election.name.clone(),
                value: election.expanded_value().unwrap_or_default(),
                ttl: election.ttl,
                file: election.file.clone(),
                extend_at,
                max_wait,
                drain: drain.clone(),
                leading,
            };
            tokio::spawn(campaign.run());
            by_name.insert(election.name.clone(), watched);
        }
        Campaigns {
            by_name: Arc::new(by_name),
        }
    }

    /// `None`: no such election is configured; else whether this daemon
    /// leads it now.
    pub(crate) fn leading(&self, name: &str) -> Option<Option<Leading>> {
        self.by_name
            .get(name)
            .map(|leading| leading.borrow().clone())
    }
}

/// One configured election's campaign.
struct Campaign {
    engine: Arc<Redlock>,
    name: String,
    value: String,
    ttl: Duration,
    file: Option<PathBuf>,
    extend_at: f64,
    max_wait: Duration,
    drain: Drain,
    leading: watch::Sender<Option<Leading>>,
}

impl Campaign {
    async fn run(self) {
        self.publish(None);
        let resource = resource_of(&self.name);
        loop {
            let holder = Holder::session(&self.value, self.engine.replica());
            let acquisition = self.engine.acquire_detached_as(
                resource.clone(),
                None,
                self.ttl,
                self.max_wait,
                holder,
            );
            let outcome = tokio::select! {
                outcome = acquisition => outcome,
                () = self.drain.started() => return,
            };
            let mut lock = match outcome {
                Ok(lock) => lock,
                Err(LockError::Contended(_) | LockError::StillHeld) => continue,
                Err(error) => {
                    tracing::warn!(election = %self.name, %error, "campaign failed; campaigning again");
                    tokio::time::sleep(RECAMPAIGN_AFTER).await;
                    continue;
                }
            };
            tracing::info!(election = %self.name, term = lock.fence, "this daemon leads");
            self.engine.announce_leadership(&lock.resource);
            metrics::leadership_began(lock.fence);
            self.publish(Some(Leading::of(&lock, &self.value)));
            let end = self
                .engine
                .hold(
                    &mut lock,
                    self.ttl,
                    self.extend_at,
                    self.drain.started(),
                    |extended| self.publish(Some(Leading::of(extended, &self.value))),
                )
                .await;
            self.publish(None);
            metrics::leadership_ended();
            match end {
                HoldEnd::Stopped => {
                    // The daemon drains: hand the leadership over now.
                    let _ = self.engine.release_held(&lock).await;
                    self.engine.announce_leadership(&lock.resource);
                    tracing::info!(election = %self.name, "resigned: the daemon stops");
                    return;
                }
                // No client to go silent here (`hold`, not
                // `hold_while_heard`): `Unheard` cannot come.
                lost @ (HoldEnd::Lost(_) | HoldEnd::Unheard) => {
                    metrics::lock_lost();
                    tracing::warn!(election = %self.name, end = ?lost, "leadership lost; campaigning again");
                    // What is left of it goes once its last validity (and
                    // the drift allowance) is over, as for a lost session.
                    let drift = validity::drift(self.ttl, self.engine.settings().drift_factor);
                    tokio::time::sleep_until(lock.deadline.mono + drift).await;
                    let _ = self.engine.release_lapsed(&lock).await;
                    self.engine.announce_leadership(&lock.resource);
                    tokio::time::sleep(RECAMPAIGN_AFTER).await;
                }
            }
        }
    }

    /// Tells the endpoint and the file.
    fn publish(&self, leading: Option<Leading>) {
        if let Some(file) = &self.file {
            if let Err(error) = write_state(file, leading.as_ref()) {
                tracing::warn!(election = %self.name, file = %file.display(), %error, "cannot write the election's file");
            }
        }
        self.leading.send_replace(leading);
    }
}

/// The file's (and the endpoint's) content: one JSON object. A leader's
/// carries `valid_until_ms` (Unix milliseconds, this host's clock): a
/// reader acts as leader only before it, since a daemon killed while
/// leading leaves the file as it was.
pub(crate) fn state_json(leading: Option<&Leading>) -> String {
    let state = match leading {
        Some(l) => serde_json::json!({
            "leader": true,
            "term": l.term,
            "value": l.value,
            "valid_until_ms": l.until_wall
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis()),
        }),
        None => serde_json::json!({ "leader": false }),
    };
    format!("{state}\n")
}

/// Replaces `file` with the state, atomically (a reader never sees half).
fn write_state(file: &Path, leading: Option<&Leading>) -> std::io::Result<()> {
    let mut scratch = file.as_os_str().to_owned();
    scratch.push(".tmp");
    std::fs::write(&scratch, state_json(leading))?;
    std::fs::rename(&scratch, file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_content() {
        let leading = Leading {
            term: 42,
            value: "10.0.0.1:80 \"a\"".into(),
            until: tokio::time::Instant::now(),
            until_wall: std::time::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
        };
        assert_eq!(
            state_json(Some(&leading)),
            "{\"leader\":true,\"term\":42,\"valid_until_ms\":1700000000123,\
             \"value\":\"10.0.0.1:80 \\\"a\\\"\"}\n"
        );
        assert_eq!(state_json(None), "{\"leader\":false}\n");
    }
}
