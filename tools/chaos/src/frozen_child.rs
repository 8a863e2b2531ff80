//! The session client that runs as its own OS process (the chaos binary
//! re-executed with [`CHILD_FLAG`]), so that the checker can freeze it with
//! SIGSTOP while it holds a lock (see `crate::frozen`).
//!
//! It loops until its deadline: a `Hold` session on the frozen children's resource
//! (ttl [`TTL`], or for a third of the sessions [`LONG_TTL`]), work while the daemon extends, then, before its one
//! critical-section write, a `Validate` round trip: the write is made only
//! if the lock is still held and `now` is before the validity counted on
//! CLOCK_MONOTONIC from when the Validate was *sent*. A client frozen
//! anywhere before that round trip therefore learns after SIGCONT that its
//! lock is gone (`lost`, the stream ending, or `held = false`) before it
//! writes. It keeps its own deadline as a client library does (the grant's
//! validity from the send, moved by each `extended` counted from the
//! previous event's arrival, if that came before the deadline): resumed
//! past it, it stops at once (`expired`), before reading further events
//! or validating; an extension read after the deadline (one that waited in
//! the socket while it was frozen) never revives it. The write itself goes
//! to the checker, which owns the registers.
//!
//! Lines to the checker (stdout), times in ns on the run's clock:
//! - `G <hot> <fence> <sent> <received> <valid_until> <lock_delay_ms> <ttl_ms>`:
//!   granted; the checker answers `R <grant id>` on stdin;
//! - `W <id> <checked> <validate_received> <valid_until>`: the write,
//!   decided at `checked`; the checker answers `A`;
//! - `D <id> <at>`: the session was ended (the lock released) from `at`:
//!   its stream dropped, or, for a lock with a lock_delay ([`LOCK_DELAY`],
//!   a third of the sessions), a `release` sent;
//! - `L <id> <at> <reason>`: the lock was found gone (`lost`, `released`,
//!   `ended`, `stream_error`, `expired` by its own deadline, or by
//!   Validate: `not_held`, `expired_at_validate`, `validate_failed`); no
//!   write.

use crate::cluster::BoxError;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redlockd_proto::pb::hold_event::Event;
use redlockd_proto::pb::hold_request::Request;
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use redlockd_proto::pb::{AcquireRequest, HoldRequest, ValidateRequest};
use std::io::BufRead;
use std::io::Write;
use std::net::SocketAddr;
use std::time::Duration;
use tonic::transport::Channel;

/// The hidden first argument of the child mode.
pub(crate) const CHILD_FLAG: &str = "--session-client";
/// Lease of the child's sessions.
pub(crate) const TTL: Duration = Duration::from_millis(500);
/// Lease of a third of them: the run's `max_ttl` (3 s by default; a
/// longer one is refused). A freeze soon after the grant finds the
/// validity told in `acquired` still running when the second replica, with
/// its shorter keepalive (`crate::replicas`), closes the silent connection
/// 1.5 to 2 s into the freeze. A daemon that released the lock then,
/// rather than leaving it to expire with that validity, would grant it to
/// another client inside the frozen child's window
/// (`overlapping_validity`).
pub(crate) const LONG_TTL: Duration = Duration::from_secs(3);
/// Work between the grant and the write, in ms.
const WORK_MS: (u64, u64) = (200, 1200);
/// How long an acquisition waits.
const WAIT: Duration = Duration::from_secs(1);
/// The `lock_delay` a third of the sessions ask for: longer than the daemons'
/// keepalive bound (interval 1 s + timeout 2 s), so a daemon that released
/// a vanished (frozen) holder's lock when it dropped the connection, instead
/// of leaving it to expire and the delay to follow, would hand it over
/// inside the delay (`crate::frozen::check`).
pub(crate) const LOCK_DELAY: Duration = Duration::from_secs(4);
/// Bound on any one call.
const PATIENCE: Duration = Duration::from_secs(3);

/// CLOCK_MONOTONIC in ns (the clock of `std::time::Instant` on Linux).
pub(crate) fn monotonic_ns() -> u64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).map_or(0, |t| {
        t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64
    })
}

fn to_proto(d: Duration) -> Option<prost_types::Duration> {
    prost_types::Duration::try_from(d).ok()
}

fn from_proto(d: Option<prost_types::Duration>) -> Duration {
    d.and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default()
}

/// The child's view of the run clock and its pipe to the checker.
struct Link {
    /// CLOCK_MONOTONIC at the run clock's zero.
    start_ns: u64,
    /// The checker's answers, read by a thread of their own (stdin is
    /// blocking).
    replies: tokio::sync::mpsc::Receiver<String>,
}

impl Link {
    fn now(&self) -> u64 {
        monotonic_ns().saturating_sub(self.start_ns)
    }

    fn say(&self, line: &str) -> Result<(), BoxError> {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}")?;
        out.flush()?;
        Ok(())
    }

    async fn ask(&mut self, line: &str) -> Result<String, BoxError> {
        self.say(line)?;
        Ok(self.replies.recv().await.ok_or("the checker is gone")?)
    }
}

/// `--session-client START_NS DEADLINE_NS SEED HOME ADDRS HOT`: runs one
/// frozen-able session client (ADDRS and HOT comma-separated).
pub(crate) fn child_main(args: &[String]) -> Result<(), BoxError> {
    let [start, deadline, seed, home, addrs, hot] = args else {
        return Err("usage: --session-client START_NS DEADLINE_NS SEED HOME ADDRS HOT".into());
    };
    let addrs: Vec<SocketAddr> = addrs.split(',').map(str::parse).collect::<Result<_, _>>()?;
    let hot: Vec<String> = hot.split(',').map(str::to_owned).collect();
    let (deadline, seed, home): (u64, u64, usize) =
        (deadline.parse()?, seed.parse()?, home.parse()?);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let (answer, replies) = tokio::sync::mpsc::channel(4);
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { return };
                if answer.blocking_send(line).is_err() {
                    return;
                }
            }
        });
        let link = Link {
            start_ns: start.parse()?,
            replies,
        };
        let mut channels = Vec::new();
        for addr in &addrs {
            channels.push(redlockd_testkit::client::endpoint(*addr)?.connect_lazy());
        }
        run(link, deadline, seed, home, &channels, &hot).await
    })
}

async fn run(
    mut link: Link,
    deadline: u64,
    seed: u64,
    home: usize,
    channels: &[Channel],
    hot: &[String],
) -> Result<(), BoxError> {
    let mut rng = StdRng::seed_from_u64(seed ^ ((home as u64) << 40) ^ 0xF0);
    let mut replica = home % channels.len().max(1);
    while link.now() < deadline {
        let h = rng.random_range(0..hot.len());
        // A third of the sessions: the rest keep handing the lock over
        // while their holder is frozen (a delayed one cannot within a
        // freeze), which the run's coverage asks for.
        let delay = if rng.random_bool(1.0 / 3.0) {
            LOCK_DELAY
        } else {
            Duration::ZERO
        };
        let ttl = if rng.random_bool(1.0 / 3.0) {
            LONG_TTL
        } else {
            TTL
        };
        let channel = channels[replica].clone();
        let (requests, outgoing) = tokio::sync::mpsc::channel(1);
        let first = HoldRequest {
            request: Some(Request::Acquire(AcquireRequest {
                resource: hot[h].clone(),
                ttl: to_proto(ttl),
                wait: to_proto(WAIT),
                owner: "chaos-frozen-client".to_owned(),
                request_id: String::new(),
                lock_delay: to_proto(delay),
                ..Default::default()
            })),
        };
        requests.send(first).await?;
        let sent = link.now();
        let opened = tokio::time::timeout(
            WAIT + PATIENCE,
            LockServiceClient::new(channel.clone())
                .hold(tokio_stream::wrappers::ReceiverStream::new(outgoing)),
        )
        .await;
        let mut events = match opened {
            Ok(Ok(response)) => response.into_inner(),
            _ => {
                replica = (replica + 1) % channels.len();
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let lock = match tokio::time::timeout(WAIT + PATIENCE, events.message()).await {
            Ok(Ok(Some(event))) => match event.event {
                Some(Event::Acquired(lock)) => lock,
                _ => continue,
            },
            Ok(Err(status)) if status.code() == tonic::Code::Aborted => continue,
            _ => {
                replica = (replica + 1) % channels.len();
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
        };
        let received = link.now();
        let valid_until = sent + from_proto(lock.validity).as_nanos() as u64;
        let reply = link
            .ask(&format!(
                "G {h} {} {sent} {received} {valid_until} {} {}",
                lock.fence,
                delay.as_millis(),
                ttl.as_millis()
            ))
            .await?;
        let id: u64 = reply.strip_prefix("R ").ok_or("expected R <id>")?.parse()?;
        let work = Duration::from_millis(rng.random_range(WORK_MS.0..=WORK_MS.1));
        let work_until = tokio::time::Instant::now() + work;
        // The local deadline (run-clock ns) and when the last event came.
        let (mut deadline_ns, mut last_heard) = (valid_until, received);
        // Work while the daemon extends; `lost`, the end of the stream or
        // the local deadline ends it without a write.
        let gone = loop {
            let expiry = tokio::time::Instant::now()
                + Duration::from_nanos(deadline_ns.saturating_sub(link.now()));
            // The deadline first: resumed past it, the client stops before
            // anything else; then events (what arrived while frozen is read
            // before the expired work timer ends the work).
            tokio::select! {
                biased;
                _ = tokio::time::sleep_until(expiry) => break Some("expired"),
                event = events.message() => match event {
                    Ok(Some(event)) => match event.event {
                        Some(Event::Extended(extended)) => {
                            let now = link.now();
                            if now >= deadline_ns {
                                break Some("expired");
                            }
                            let validity = from_proto(extended.validity).as_nanos() as u64;
                            deadline_ns = deadline_ns.max(last_heard + validity);
                            last_heard = now;
                        }
                        Some(Event::Lost(_)) => break Some("lost"),
                        Some(Event::Released(_)) => break Some("released"),
                        Some(Event::Draining(_)) => break None,
                        _ => last_heard = link.now(),
                    },
                    Ok(None) => break Some("ended"),
                    Err(_) => break Some("stream_error"),
                },
                _ = tokio::time::sleep_until(work_until) => break None,
            }
        };
        if let Some(reason) = gone {
            link.say(&format!("L {id} {} {reason}", link.now()))?;
            continue;
        }
        // A fresh proof before the write, counted from when it was asked.
        let validate_sent = link.now();
        let answer = tokio::time::timeout(
            PATIENCE,
            LockServiceClient::new(channel).validate(ValidateRequest {
                resource: lock.resource.clone(),
                token: lock.token.clone(),
            }),
        )
        .await;
        let validate_received = link.now();
        let reason = match answer {
            Ok(Ok(response)) => {
                let answer = response.into_inner();
                let until = validate_sent + from_proto(answer.validity).as_nanos() as u64;
                let checked = link.now();
                match (answer.held, checked < until) {
                    (true, true) => {
                        link.ask(&format!("W {id} {checked} {validate_received} {until}"))
                            .await?;
                        None
                    }
                    (true, false) => Some("expired_at_validate"),
                    (false, _) => Some("not_held"),
                }
            }
            _ => Some("validate_failed"),
        };
        match reason {
            Some(reason) => link.say(&format!("L {id} {} {reason}", link.now()))?,
            None if delay.is_zero() => {
                // Dropping the stream releases the lock at once.
                drop(events);
                drop(requests);
                link.say(&format!("D {id} {}", link.now()))?;
            }
            None => {
                // With a lock_delay a dropped stream is a vanished holder
                // (the lock is left to expire, the delay follows): end the
                // session in order instead, and wait (bounded) for the
                // daemon's answer. The lock may be free from the send on.
                let at = link.now();
                let release = HoldRequest {
                    request: Some(Request::Release(Default::default())),
                };
                if requests.send(release).await.is_ok() {
                    let _ = tokio::time::timeout(PATIENCE, async {
                        while let Ok(Some(event)) = events.message().await {
                            if matches!(event.event, Some(Event::Released(_) | Event::Lost(_))) {
                                return;
                            }
                        }
                    })
                    .await;
                }
                drop(events);
                drop(requests);
                link.say(&format!("D {id} {at}"))?;
            }
        }
    }
    Ok(())
}
