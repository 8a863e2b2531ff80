//! The horizon quarantine's I/O: the masters of one daemon as a group
//! ([`Peers`]), so that a master in quarantine can ask the others for their
//! horizons, and the task that does so until its quarantine is settled.
//! The rule, its arithmetic and why it is safe: `super::horizon`.

use super::boot;
use super::horizon::{self, Census, Horizon, LocalHorizon, Reading, Verdict};
use super::pace::Pace;
use super::state::NodeState;
use fred::clients::WithOptions;
use fred::prelude::{Client, ClientLike, Value};
use fred::types::{ClusterHash, CustomCommand};
use futures::future::join_all;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::time::Instant;

/// First pause before asking again when too few masters answered; it
/// doubles up to [`RETRY_MAX`]. Short: at start-up the other connections
/// are usually a few milliseconds behind.
const RETRY_FIRST: Duration = Duration::from_millis(50);

/// Longest pause between two readings of an unsettled quarantine.
const RETRY_MAX: Duration = Duration::from_secs(2);

/// How many times a boot certificate that could not be read is asked for
/// again (each after [`RETRY_FIRST`]) before the horizons settle without it.
const CERTIFICATE_TRIES: u32 = 3;

/// How often the reading task looks whether its master is gone.
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// The masters of one daemon, as the horizon quarantine needs them: each
/// master's state and connection, and this daemon's own grants
/// ([`LocalHorizon`]). Every [`super::ValkeyMaster`] joins it when created.
pub(crate) struct Peers {
    members: Mutex<Vec<Member>>,
    local: LocalHorizon,
    horizon_key: String,
    /// Where each master keeps its boot certificate (`super::boot`).
    boot_key: String,
    masters: usize,
    quorum: usize,
    drift_factor: f64,
    max_ttl: Duration,
    /// How briskly the masters answered their recent batches
    /// (`super::batch`).
    pace: Pace,
}

/// One master as seen by the others.
struct Member {
    state: Arc<NodeState>,
    command: WithOptions<Client>,
}

/// What one reading found, for the decision and the logs.
struct Outcome {
    verdict: Verdict,
    answered: usize,
    trusted: usize,
    candidates: usize,
    longest: Option<Duration>,
}

impl Outcome {
    fn describe(&self) -> String {
        format!(
            "{} of {} other masters answered ({} trusted), longest horizon {:?}",
            self.answered, self.candidates, self.trusted, self.longest
        )
    }
}

impl Peers {
    /// The group of `masters` masters whose keys start with `key_prefix`
    /// (horizon, boot certificate); `max_ttl` stands in for a horizon
    /// without expiry.
    /// `(max_ttl, allowance)`: the longest lock, and how long past each
    /// lock's end a master that lost its data still sits out (the fences'
    /// clock allowance, `crate::redlock::clock_allowance`).
    pub(crate) fn new(
        masters: usize,
        key_prefix: &str,
        (max_ttl, allowance): (Duration, Duration),
        drift_factor: f64,
    ) -> Arc<Peers> {
        Arc::new(Peers {
            members: Mutex::new(Vec::with_capacity(masters)),
            local: LocalHorizon::new(allowance),
            horizon_key: crate::redlock::keys::horizon_key(key_prefix),
            boot_key: format!("{key_prefix}boot"),
            masters,
            quorum: masters / 2 + 1,
            drift_factor,
            max_ttl,
            pace: Pace::new(),
        })
    }

    /// This daemon's own grants (see [`LocalHorizon`]).
    pub(crate) fn local(&self) -> &LocalHorizon {
        &self.local
    }

    /// The horizon key every batch raises.
    pub(crate) fn horizon_key(&self) -> &str {
        &self.horizon_key
    }

    /// The key of the boot certificate (`super::boot`).
    pub(crate) fn boot_key(&self) -> &str {
        &self.boot_key
    }

    /// Master `index`'s `run_id` and boot certificate, read together.
    async fn certificate(&self, index: usize) -> Option<boot::Reading> {
        let (state, command) = {
            let members = self.members();
            let member = members.get(index)?;
            (Arc::clone(&member.state), member.command.clone())
        };
        boot::read(&state, &command, &self.boot_key).await.ok()
    }

    /// Whether a quorum of the group's *other* masters (other than `this`)
    /// answered something (to any command, a PING included) at or after
    /// `at`. If so, the group could decide without `this` and the daemon
    /// demonstrably reads their answers, so `this` one's silence is its
    /// own. If not, most of the group went quiet at once, which points at
    /// what they share (the daemon, its machine, the network), not at one
    /// master (`super::pace::more_time`).
    pub(super) fn quorum_of_others_answered_since(&self, at: Instant, this: &NodeState) -> bool {
        let members = self.members();
        let answered = members
            .iter()
            .filter(|member| !std::ptr::eq(Arc::as_ptr(&member.state), this))
            .filter(|member| member.state.answered_since(at))
            .count();
        answered >= self.quorum
    }

    /// How briskly the masters answered their recent batches.
    pub(super) fn pace(&self) -> &Pace {
        &self.pace
    }

    /// Adds a master; returns its index in the group.
    pub(super) fn join(&self, state: Arc<NodeState>, command: WithOptions<Client>) -> usize {
        let mut members = self.members();
        members.push(Member { state, command });
        members.len() - 1
    }

    fn members(&self) -> std::sync::MutexGuard<'_, Vec<Member>> {
        self.members
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Asks every other master that can hold a lock for its horizon, at
    /// once (each bounded by `node_timeout`), and applies the rule.
    async fn read(&self, index: usize) -> Outcome {
        let asked: Vec<(Arc<NodeState>, WithOptions<Client>)> = {
            let members = self.members();
            let run_id = members.get(index).map(|m| m.state.run_id());
            members
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != index)
                .map(|(_, m)| m)
                // A refused master never voted; the same server under
                // another name would be our own horizon.
                .filter(|m| {
                    let other = m.state.run_id();
                    !m.state.excluded() && (other.is_empty() || Some(&other) != run_id.as_ref())
                })
                .map(|m| (Arc::clone(&m.state), m.command.clone()))
                .collect()
        };
        let candidates = asked.len();
        let key = Value::from(self.horizon_key.as_str());
        let readings: Vec<Reading> = join_all(asked.into_iter().map(|(state, command)| {
            let key = key.clone();
            async move {
                let trusted_before = state.trusted();
                let pttl = pttl(&command, key).await.ok()?;
                Some(Reading {
                    horizon: Horizon::from_pttl(pttl),
                    received: Instant::now(),
                    trusted: trusted_before && state.trusted(),
                })
            }
        }))
        .await
        .into_iter()
        .flatten()
        .collect();
        let census = Census {
            masters: self.masters,
            quorum: self.quorum,
            candidates,
        };
        let verdict = horizon::settle(
            &readings,
            census,
            self.local.latest(),
            self.drift_factor,
            self.max_ttl,
            Instant::now(),
        );
        Outcome {
            verdict,
            answered: readings.len(),
            trusted: readings.iter().filter(|r| r.trusted).count(),
            candidates,
            longest: readings
                .iter()
                .filter_map(|r| match r.horizon {
                    Horizon::Remaining(left) => Some(left),
                    Horizon::Persistent => Some(self.max_ttl),
                    Horizon::Absent => None,
                })
                .max(),
        }
    }
}

/// `PTTL key` on one master, bounded like every command.
async fn pttl(command: &WithOptions<Client>, key: Value) -> Result<i64, ()> {
    let cmd = CustomCommand::new_static("PTTL", ClusterHash::FirstKey, false);
    match command.custom::<Value, Value>(cmd, vec![key]).await {
        Ok(Value::Integer(ms)) => Ok(ms),
        _ => Err(()),
    }
}

/// Starts the task that settles master `index`'s quarantines: woken when
/// one starts, it reads the other masters' horizons until they settle it
/// (or its blanket bound runs out), backing off between readings. It ends
/// once the master or the group is dropped.
pub(super) fn spawn_settler(peers: &Arc<Peers>, index: usize, state: &Arc<NodeState>) {
    let (peers, state): (Weak<Peers>, Weak<NodeState>) =
        (Arc::downgrade(peers), Arc::downgrade(state));
    tokio::spawn(async move {
        loop {
            let Some(node) = state.upgrade() else { return };
            let _ = tokio::time::timeout(IDLE_CHECK, node.settle_wanted()).await;
            let mut pause = RETRY_FIRST;
            let mut warned = false;
            let mut certificate_tries = CERTIFICATE_TRIES;
            while let Some(generation) = node.unsettled() {
                let Some(group) = peers.upgrade() else { return };
                // A certificate for this very process ends a quarantine for
                // its identity at once (`super::boot`).
                if let Some((certifiable, run_id)) = node.certifiable() {
                    let reading = match certifiable == generation {
                        true => group.certificate(index).await,
                        false => None,
                    };
                    if reading.is_none() && certificate_tries > 0 {
                        // Not read (the master slow, or its connection
                        // new): try again before settling without it.
                        certificate_tries -= 1;
                        tokio::time::sleep(RETRY_FIRST).await;
                        continue;
                    }
                    if let Some(reading) = reading.filter(|r| r.vouches_for(&run_id)) {
                        let how = "its boot certificate names this very process: a daemon \
                                   already waited out its restart";
                        if node.settle(generation, None, how) {
                            node.certificate_known(&reading.run_id);
                        }
                        break;
                    }
                }
                let outcome = group.read(index).await;
                drop(group);
                match outcome.verdict {
                    Verdict::Settled { until } => {
                        node.settle(generation, until, &outcome.describe());
                        break;
                    }
                    Verdict::Unsettled => {
                        if !warned && pause >= RETRY_MAX / 4 {
                            tracing::warn!(node = %node.name(), blanket_left = ?node.quarantine_left(),
                                reading = %outcome.describe(),
                                "too few masters answered to know the horizon: the blanket \
                                 quarantine (max_ttl plus drift) holds until they do");
                            warned = true;
                        }
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(RETRY_MAX);
                    }
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use fred::prelude::{Builder, ClientLike};

    /// Five masters: one silent master's silence is its own once three of
    /// the other four answered since the send, not while only one or two
    /// did (four of five silent at once: what they share is at fault). Its
    /// own answer does not count for itself.
    #[tokio::test(start_paused = true)]
    async fn a_silence_is_a_masters_own_only_beside_a_quorum_of_answers() {
        let peers = Peers::new(5, "t:", (Duration::from_secs(3600), Duration::ZERO), 0.01);
        let states: Vec<Arc<NodeState>> = (0..5)
            .map(|i| Arc::new(NodeState::new(format!("m{i}"), None, true)))
            .collect();
        for state in &states {
            // Never connected: nothing is sent in this test.
            let client = Builder::default_centralized().build().expect("client");
            peers.join(Arc::clone(state), client.with_options(&Default::default()));
        }
        tokio::time::advance(Duration::from_millis(5)).await;
        let sent = Instant::now();
        tokio::time::advance(Duration::from_millis(5)).await;
        let silent = &states[0];
        silent.answered();
        assert!(
            !peers.quorum_of_others_answered_since(sent, silent),
            "its own answer"
        );
        states[1].answered();
        states[2].answered();
        assert!(
            !peers.quorum_of_others_answered_since(sent, silent),
            "two of four"
        );
        states[3].answered();
        assert!(
            peers.quorum_of_others_answered_since(sent, silent),
            "three of four"
        );
        let later = Instant::now() + Duration::from_millis(5);
        tokio::time::advance(Duration::from_millis(10)).await;
        assert!(
            !peers.quorum_of_others_answered_since(later, silent),
            "answers before the send"
        );
    }
}
