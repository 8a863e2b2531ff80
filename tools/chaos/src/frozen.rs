//! Clients frozen mid-session. A few session clients run as OS
//! processes of their own (`crate::frozen_child`), so that a fault can
//! SIGSTOP one while it holds a lock, keep it frozen for [`freeze_for`]
//! (well past the daemons' keepalive bound plus the short lease's ttl),
//! then SIGCONT it.
//!
//! The children share one resource of their own ([`resource`]): on the hot
//! resources, which `--mix` fills with permits and shared locks, a plain
//! Hold is refused most of the time and the freezes would rarely catch a
//! child holding. While one child is frozen the other takes the lock over.
//! The child's grants, windows and critical-section writes come to this
//! process over its stdout and go into the same history and registers as
//! every other client's, so the ordinary checks judge them. On top,
//! [`check`] verifies what is particular to a freeze:
//! - no write of a child is decided at or after the end of its validity
//!   (counted from when it sent the request that proved it);
//! - no child writes, after it resumed, under a grant it held before a
//!   freeze longer than the keepalive bound plus the grant's ttl
//!   ([`bound`]): it must first be told `lost` or find the lock gone.
//!
//! The daemon closes a frozen child's connection within the keepalive
//! bound, but the validity the child was last told may still run: the
//! lock must expire with it, not be released then. A third of the
//! children's sessions have a ttl as long as that bound
//! ([`frozen_child::LONG_TTL`]), and are frozen within 150 ms of their
//! grant, so a daemon that released the lock when it closed the
//! connection would grant it to another client inside the window of the
//! frozen child's grant, which the ordinary exclusion check judges
//! (`overlapping_validity`; the counterfactual `release-silent-sessions`).
//! That needs the connection closed before the window ends: 1.5 to 2 s
//! into the freeze on the second replica, whose keepalive is shorter
//! (`crate::replicas`); 2 to 3 s at the defaults, about when the window
//! of a 3 s lease ends.
//!
//! - a third of the children's sessions ask for a `lock_delay` ([`frozen_child::LOCK_DELAY`],
//!   longer than the keepalive bound): a freeze holding one of those is a
//!   vanished holder to the daemon, so no other grant of the resource comes
//!   before the freeze's start plus the delay ([`check_delay`]), of any
//!   kind: under `--mix` the mix's permits, shared and exclusive locks
//!   also go for the children's resource.
//!
//! It also counts, as figures, the freezes during which the frozen lock passed
//! on to another client, and the resumed children told their lock was gone.

use crate::clients::{ClientLog, Shared};
use crate::cluster::BoxError;
use crate::findings::{Check, Findings, Violation};
use crate::frozen_child::{self, CHILD_FLAG};
use crate::history::{FaultKind, Grant, History, ReleaseRecord, Time, Window, Workload};
use crate::registers::Registers;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redlockd_proto::pb::Lock;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

/// Frozen-able clients' ids start here (apart from the other clients').
pub(crate) const FIRST_ID: u32 = 2_000;
/// The daemons' keepalive bound: a frozen client's connection is closed at
/// most this long after the freeze (interval 1 s + timeout 2 s, their
/// defaults).
const KEEPALIVE_BOUND: Duration = Duration::from_secs(3);

/// A freeze longer than this must cost a child holding a lock of `ttl` its
/// lock: its connection is closed within the keepalive bound, and the lock
/// then expires with the validity last told (at most the ttl), plus 0.5 s.
fn bound(ttl: Duration) -> Duration {
    KEEPALIVE_BOUND + ttl + Duration::from_millis(500)
}

/// How long a child stays frozen: 1.5 s past [`bound`] of the short
/// lease, so that its lock passes on during the freeze. A freeze of the
/// long lease ([`frozen_child::LONG_TTL`]) is as long: what it is for comes
/// 1.5 to 3 s in, when the daemon closes the silent connection; its lock
/// may still be held when the child resumes (its own deadline has passed
/// by then), and the check after resuming applies only past its own bound.
/// One length for all keeps a short run's freezes as many as before.
fn freeze_for(_ttl: Duration) -> Duration {
    bound(frozen_child::TTL) + Duration::from_millis(1_500)
}
/// The resource the frozen-able children share.
pub(crate) fn resource(tag: &str) -> String {
    format!("{tag}/frozen")
}

/// A grant younger than this is fresh enough to freeze.
const FRESH: Duration = Duration::from_millis(50);
/// Pause between two freezes of one child, in ms.
const BETWEEN_MS: (u64, u64) = (1_500, 4_000);

/// A child's critical-section write, as the child decided it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FrozenWrite {
    /// The grant it was made under.
    pub grant: u64,
    /// When the child checked its validity and decided to write.
    pub checked: Time,
    /// The end of the validity it relied on.
    pub valid_until: Time,
}

/// A child found its lock gone and did not write.
#[derive(Debug, Clone)]
pub(crate) struct Ended {
    /// The grant.
    pub grant: u64,
    /// When it found out.
    pub at: Time,
    /// `lost`, `ended`, `not_held`, ...
    pub reason: String,
}

/// One SIGSTOP .. SIGCONT of a child.
#[derive(Debug, Clone)]
pub(crate) struct Freeze {
    /// The child.
    pub client: u32,
    /// SIGSTOP sent.
    pub start: Time,
    /// SIGCONT sent.
    pub end: Time,
    /// The grant it held at SIGSTOP, and its resource.
    pub holding: Option<(u64, String)>,
    /// That grant's ttl.
    pub ttl: Duration,
}

/// What the frozen-able clients recorded.
#[derive(Debug, Clone, Default)]
pub(crate) struct FrozenLog {
    /// The grants that asked for a lock_delay, and its length.
    pub delays: Vec<(u64, Duration)>,
    /// Their writes.
    pub writes: Vec<FrozenWrite>,
    /// Their locks found gone.
    pub ended: Vec<Ended>,
    /// Every freeze.
    pub freezes: Vec<Freeze>,
}

/// The figures of the freezes.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct FrozenFigures {
    /// Freezes of a child holding a lock.
    pub freezes_holding: usize,
    /// Of those, the ones during which another client got the lock.
    pub handoffs: usize,
    /// Of those, the ones after which the child found its lock gone
    /// (told `lost`, the stream ended, or Validate said not held).
    pub resumed_told_gone: usize,
    /// Of those, the ones that learnt it before validating: from the
    /// daemon (`lost`, the stream ended) or from their own deadline
    /// (`expired`), rather than by Validate.
    pub resumed_told_lost: usize,
    /// Writes made by the children.
    pub writes: usize,
    /// Freezes of a child holding a lock with a lock_delay, no quorum or
    /// master restart around: those the delay check judged.
    pub delays_checked: usize,
    /// Freezes of a child holding a lock of [`frozen_child::LONG_TTL`]:
    /// its `acquired` validity still ran when the daemon closed the
    /// connection.
    pub long_ttl: usize,
}

/// What the freezer and the reader of one child share.
#[derive(Default)]
struct State {
    /// The grant the child holds and has not written under yet: the one a
    /// freeze should catch.
    holding: Option<(u64, String)>,
    /// When that grant came.
    since: Time,
    /// Its ttl.
    ttl: Duration,
}

fn lock_state(state: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs one frozen-able child until the deadline, freezing it now and
/// then; its grants (in a [`ClientLog`]) and its own records.
pub(crate) async fn client(
    id: u32,
    shared: Arc<Shared>,
    addrs: Vec<SocketAddr>,
    seed: u64,
    registers: Arc<Registers>,
) -> Result<(ClientLog, FrozenLog), BoxError> {
    let clock = shared.clock;
    // CLOCK_MONOTONIC at the run clock's zero.
    let start_ns = frozen_child::monotonic_ns().saturating_sub(clock.now().as_nanos() as u64);
    let addrs: Vec<String> = addrs.iter().map(SocketAddr::to_string).collect();
    let mut child = tokio::process::Command::new(std::env::current_exe()?)
        .arg(CHILD_FLAG)
        .arg(start_ns.to_string())
        .arg(shared.deadline.as_nanos().to_string())
        .arg(seed.to_string())
        .arg((id - FIRST_ID).to_string())
        .arg(addrs.join(","))
        .arg(registers.resource())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let pid = nix::unistd::Pid::from_raw(child.id().ok_or("child gone")? as i32);
    let state = Arc::new(Mutex::new(State::default()));
    let freezer = tokio::spawn(freezer(
        id,
        pid,
        Arc::clone(&shared),
        Arc::clone(&state),
        seed,
    ));
    let mut stdin = child.stdin.take().ok_or("no stdin of the child")?;
    let stdout = child.stdout.take().ok_or("no stdout of the child")?;
    let mut lines = BufReader::new(stdout).lines();
    let (mut log, mut frozen) = (ClientLog::default(), FrozenLog::default());
    // The grant in progress: its record and what it read at check-in.
    let mut current: Option<(Grant, u64, Option<u64>)> = None;
    let at = |word: Option<&str>| -> Result<Time, BoxError> {
        Ok(Duration::from_nanos(word.ok_or("short line")?.parse()?))
    };
    while let Some(line) = lines.next_line().await? {
        let mut words = line.split(' ');
        match words.next() {
            Some("G") => {
                // The index in the child's list of one resource.
                let _hot = words.next();
                let fence: u64 = words.next().ok_or("short line")?.parse()?;
                let (sent, received, valid_until) =
                    (at(words.next())?, at(words.next())?, at(words.next())?);
                let delay = Duration::from_millis(words.next().unwrap_or("0").parse()?);
                let ttl = match words.next() {
                    Some(ms) => Duration::from_millis(ms.parse()?),
                    None => frozen_child::TTL,
                };
                let resource = registers.resource();
                let lock = Lock {
                    resource: resource.to_owned(),
                    fence,
                    ..Lock::default()
                };
                let mut grant = shared.grant(Workload::Contended, id, 0, &lock);
                if !delay.is_zero() {
                    frozen.delays.push((grant.id, delay));
                }
                (grant.sent, grant.received, grant.valid_until) = (sent, received, valid_until);
                grant.cs_end = received;
                grant.windows.push(Window {
                    start: received,
                    end: valid_until,
                });
                let fenced = registers.check_in(&clock, grant.id, fence, valid_until);
                let plain = registers.read_plain();
                *lock_state(&state) = State {
                    holding: Some((grant.id, resource.to_owned())),
                    since: clock.now(),
                    ttl,
                };
                let reply = format!("R {}\n", grant.id);
                current = Some((grant, plain, fenced));
                stdin.write_all(reply.as_bytes()).await?;
            }
            Some("W") => {
                let (grant, plain, fenced) = current.as_mut().ok_or("W without a grant")?;
                let _id = words.next();
                let (checked, received, until) =
                    (at(words.next())?, at(words.next())?, at(words.next())?);
                grant.windows.push(Window {
                    start: received,
                    end: until,
                });
                // Held by the same token at Validate: held all along.
                grant.valid_until = grant.valid_until.max(until);
                grant.cs_end = checked;
                registers.write_plain(&clock, grant.id, *plain, grant.valid_until);
                if let Some(read) = fenced {
                    let valid = grant.valid_until;
                    registers.write_fenced(&clock, grant.id, grant.fence, *read, valid);
                }
                // Written: a freeze from now on would find nothing to lose,
                // so the freezer waits for the next grant.
                lock_state(&state).holding = None;
                frozen.writes.push(FrozenWrite {
                    grant: grant.id,
                    checked,
                    valid_until: until,
                });
                stdin.write_all(b"A\n").await?;
            }
            Some("D") => {
                let (mut grant, _, _) = current.take().ok_or("D without a grant")?;
                let _id = words.next();
                let dropped = at(words.next())?;
                grant.release = Some(ReleaseRecord {
                    sent: dropped,
                    received: dropped,
                    outcome: Err(crate::history::Failure::Status(tonic::Code::Cancelled)),
                    calls: 1,
                    first_failure: None,
                });
                lock_state(&state).holding = None;
                log.grants.push(grant);
            }
            Some("L") => {
                let (grant, _, _) = current.take().ok_or("L without a grant")?;
                let _id = words.next();
                let found = at(words.next())?;
                frozen.ended.push(Ended {
                    grant: grant.id,
                    at: found,
                    reason: words.next().unwrap_or("").to_owned(),
                });
                lock_state(&state).holding = None;
                log.grants.push(grant);
            }
            _ => return Err(format!("frozen client {id}: unexpected line {line:?}").into()),
        }
    }
    if let Some((grant, _, _)) = current.take() {
        log.grants.push(grant);
    }
    let status = child.wait().await?;
    frozen.freezes = freezer.await?;
    if !status.success() {
        return Err(format!("frozen client {id} ended with {status}").into());
    }
    Ok((log, frozen))
}

/// Freezes the child now and then while it holds a lock, until the
/// deadline leaves no room for a whole freeze.
async fn freezer(
    id: u32,
    pid: nix::unistd::Pid,
    shared: Arc<Shared>,
    state: Arc<Mutex<State>>,
    seed: u64,
) -> Vec<Freeze> {
    use nix::sys::signal::{kill, Signal};
    let clock = shared.clock;
    let mut rng = StdRng::seed_from_u64(seed ^ (u64::from(id) << 24) ^ 0xF2);
    let mut freezes = Vec::new();
    let last_start = shared
        .deadline
        .saturating_sub(freeze_for(frozen_child::LONG_TTL) + Duration::from_secs(2));
    loop {
        let pause = Duration::from_millis(rng.random_range(BETWEEN_MS.0..=BETWEEN_MS.1));
        tokio::time::sleep(pause).await;
        // Wait for a fresh grant (well before the child can have decided
        // its write: its work lasts at least 200 ms) and freeze a little
        // into its critical section (a random point); a lock that ended
        // during that little while does not count: wait for the next one.
        // On a loaded machine the child may go long without a grant, so the
        // freezer waits as long as a whole freeze still fits.
        let holding = loop {
            if clock.now() >= last_start {
                return freezes;
            }
            let (held, since, ttl) = {
                let state = lock_state(&state);
                (state.holding.clone(), state.since, state.ttl)
            };
            let Some(held) = held.filter(|_| clock.now() < since + FRESH) else {
                tokio::time::sleep(Duration::from_millis(5)).await;
                continue;
            };
            tokio::time::sleep(Duration::from_millis(rng.random_range(0..100))).await;
            if lock_state(&state).holding.as_ref() == Some(&held) {
                break (Some(held), ttl);
            }
        };
        let (holding, ttl) = holding;
        if kill(pid, Signal::SIGSTOP).is_err() {
            return freezes;
        }
        let start = clock.now();
        tokio::time::sleep(freeze_for(ttl)).await;
        // Read before SIGCONT: what the resumed child does comes after it.
        let end = clock.now();
        let resumed = kill(pid, Signal::SIGCONT);
        freezes.push(Freeze {
            client: id,
            start,
            end,
            holding,
            ttl,
        });
        if resumed.is_err() {
            return freezes;
        }
    }
}

/// Slack for the delay check: the run clock reads the freeze's start a
/// little after the SIGSTOP.
const DELAY_SLACK: Duration = Duration::from_millis(200);

/// A child frozen holding a lock with a lock_delay has vanished as far as
/// the daemon can tell: its lock must expire rather than be released, and
/// the delay follow. The lock was alive at the freeze (a fresh grant, not
/// yet written under), so no other grant of the resource may be answered
/// before the freeze's start plus the delay. As the delay is longer than
/// the daemons' keepalive bound, a daemon releasing the lock when it drops
/// the frozen client's connection is caught. Not judged when a master was
/// emptied after the delay was written and voted again before its end (it
/// forgot the delay: the quarantine covers the lock's ttl, not its delay;
/// api.md calls the delay an availability feature), or a quorum was lost.
fn check_delay(
    history: &History,
    frozen: &FrozenLog,
    freeze: &Freeze,
    figures: &mut FrozenFigures,
    findings: &mut Findings,
) {
    let Some((grant, resource)) = &freeze.holding else {
        return;
    };
    let Some(delay) = frozen
        .delays
        .iter()
        .find(|(g, _)| g == grant)
        .map(|(_, d)| *d)
    else {
        return;
    };
    let until = freeze.start + delay;
    let ended_before = frozen
        .writes
        .iter()
        .any(|w| w.grant == *grant && w.checked <= freeze.start)
        || frozen
            .ended
            .iter()
            .any(|e| e.grant == *grant && e.at <= freeze.start);
    // When the grant was asked for: its masters wrote the delay after that.
    let asked = history
        .grants
        .iter()
        .find(|g| g.id == *grant)
        .map_or(freeze.start, |g| g.sent);
    let disturbed = history.faults.iter().any(|f| {
        // A quorum lost: the session may have lost its lock (then released
        // in part) before the client vanished.
        let quorum_lost = f.three_phase && f.start <= until && f.counts_until >= asked;
        // A master emptied after the delay was written, back to voting
        // before its end: it has forgotten the delay (the quarantine covers
        // the lock's ttl, not its delay).
        let forgot = f.kind == FaultKind::MasterRestart
            && f.start + freeze.ttl >= asked
            && f.start <= until
            && f.counts_until <= until;
        quorum_lost || forgot
    });
    if ended_before || disturbed {
        return;
    }
    figures.delays_checked += 1;
    for other in history.grants.iter().filter(|g| {
        g.resource == *resource
            && g.id != *grant
            && g.received >= freeze.start
            && g.received + DELAY_SLACK < until
    }) {
        findings.violations.push(Violation {
            check: Check::LockDelay,
            detail: format!(
                "client {} frozen at {:.3} s holding grant #{grant} on {resource} with a \
                 {delay:?} lock_delay; grant #{} answered at {:.3} s, inside the delay",
                freeze.client,
                freeze.start.as_secs_f64(),
                other.id,
                other.received.as_secs_f64()
            ),
        });
    }
}

/// The freeze checks over the whole history (see the module doc).
pub(crate) fn check(
    history: &History,
    frozen: &FrozenLog,
    findings: &mut Findings,
) -> FrozenFigures {
    let mut figures = FrozenFigures {
        writes: frozen.writes.len(),
        ..FrozenFigures::default()
    };
    for write in &frozen.writes {
        if write.checked >= write.valid_until {
            findings.violations.push(Violation {
                check: Check::FrozenClient,
                detail: format!(
                    "grant #{} written at {:.3} s, its validity ended at {:.3} s",
                    write.grant,
                    write.checked.as_secs_f64(),
                    write.valid_until.as_secs_f64()
                ),
            });
        }
    }
    for freeze in &frozen.freezes {
        let Some((grant, resource)) = &freeze.holding else {
            continue;
        };
        figures.freezes_holding += 1;
        figures.long_ttl += usize::from(freeze.ttl >= frozen_child::LONG_TTL);
        let others = history.grants.iter().filter(|g| {
            g.resource == *resource
                && g.id != *grant
                && g.received >= freeze.start
                && g.received <= freeze.end
        });
        figures.handoffs += usize::from(others.count() > 0);
        let gone = frozen
            .ended
            .iter()
            .find(|e| e.grant == *grant && e.at >= freeze.end);
        figures.resumed_told_gone += usize::from(gone.is_some());
        figures.resumed_told_lost += usize::from(gone.is_some_and(|e| {
            matches!(
                e.reason.as_str(),
                "lost" | "ended" | "stream_error" | "released" | "expired"
            )
        }));
        check_delay(history, frozen, freeze, &mut figures, findings);
        if freeze.end - freeze.start < bound(freeze.ttl) {
            continue;
        }
        for write in frozen
            .writes
            .iter()
            .filter(|w| w.grant == *grant && w.checked >= freeze.end)
        {
            findings.violations.push(Violation {
                check: Check::FrozenClient,
                detail: format!(
                    "client {} frozen {:.3}..{:.3} s holding grant #{grant} on {resource} \
                     wrote under it at {:.3} s after resuming",
                    freeze.client,
                    freeze.start.as_secs_f64(),
                    freeze.end.as_secs_f64(),
                    write.checked.as_secs_f64()
                ),
            });
        }
    }
    figures
}
