//! Session clients: `Hold` sessions on the hot resources, beside the
//! Acquire clients. A session keeps its lock past its ttl through the
//! daemon's extensions; each `acquired` and `extended` event is a window.
//! A plain session's critical section updates both registers, then the
//! client sends `release` and records the `released` answer. On `draining`
//! (its replica was sent SIGTERM) it cuts its work short and releases; on
//! `lost`, an error or the end of the stream it stops without writing.
//! Every wait is bounded.
//!
//! Under `--mix` ([`Menu::mix`]) sessions also hold shared locks and
//! permits of limit 2 and 3 of the same resources, some for seconds (the
//! long holders, alive across rolling restarts of the masters), and some
//! plain and shared sessions are retried with their request id
//! (`crate::hold_retry`).

use crate::clients::{ClientLog, Profile, Shared};
use crate::history::{Failure, Via};
use crate::hold_stream::{
    acquire_request, between, finish, follow, grant_kind, grant_of, open, Stop, TTL,
};
use crate::mix::Ask;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::time::Duration;

/// Lease of a long holder's sessions (below the runs' `max_ttl` of 3 s).
const LONG_TTL: Duration = Duration::from_secs(2);
/// Work inside a session's critical section, in ms.
const WORK_MS: (u64, u64) = (50, 700);
/// Session clients' ids start here (apart from the Acquire clients').
pub(crate) const FIRST_ID: u32 = 1_000;

/// What a session client holds, and how long.
#[derive(Debug, Clone)]
pub(crate) struct Menu {
    /// What it asks for, with weights.
    pub asks: Vec<(u32, Ask)>,
    /// Work of an ordinary session, in ms.
    pub work_ms: (u64, u64),
    /// Share of sessions held for long, and for how long (ms).
    pub long: (f64, u64, u64),
    /// Share of plain and shared sessions retried with their request id
    /// on a new connection while the first stream lingers.
    pub retry_share: f64,
    /// A long holder: what it holds across the rolling restart, on which
    /// hot resource.
    pub across_rolling: Option<(Ask, usize)>,
    /// The lease its sessions ask for (the daemon extends it).
    pub ttl: Duration,
}

impl Menu {
    /// Plain sessions only (without `--mix`).
    pub(crate) fn plain() -> Menu {
        Menu {
            asks: vec![(1, Ask::Exclusive)],
            work_ms: WORK_MS,
            long: (0.0, 0, 0),
            retry_share: 0.0,
            across_rolling: None,
            ttl: TTL,
        }
    }

    /// `--mix`: every kind, a few long holds, retries.
    pub(crate) fn mix() -> Menu {
        Menu {
            asks: vec![
                (4, Ask::Exclusive),
                (2, Ask::Shared),
                (2, Ask::Permit(2)),
                (1, Ask::Permit(3)),
            ],
            work_ms: WORK_MS,
            long: (0.1, 1_500, 5_000),
            // Half: a retry round counts only when its first session is
            // granted, which the permits and shared locks on the hot
            // resources often refuse; at a quarter a loaded CI run made 1
            // retry round in 40 s and the coverage check found none granted.
            retry_share: 0.5,
            across_rolling: None,
            ttl: TTL,
        }
    }

    /// `--mix`'s long holder `n`: permits and shared locks held for
    /// seconds; across the rolling restart, holder 0 holds a permit of
    /// limit 2 of hot resource 0, holder 1 one of limit 3 of hot resource
    /// 3 and holder 2 a shared lock of hot resource 1, from before it
    /// starts until after it ends.
    pub(crate) fn long(n: u32) -> Menu {
        Menu {
            asks: vec![(2, Ask::Permit(2)), (1, Ask::Shared), (1, Ask::Permit(3))],
            work_ms: WORK_MS,
            long: (1.0, 3_000, 9_000),
            retry_share: 0.0,
            across_rolling: Some(match n {
                0 => (Ask::Permit(2), 0),
                1 => (Ask::Permit(3), 3),
                _ => (Ask::Shared, 1),
            }),
            // Long enough that a starved daemon's late extension does not
            // cost a long hold its lock.
            ttl: LONG_TTL,
        }
    }

    pub(crate) fn pick(&self, rng: &mut StdRng) -> Ask {
        let total: u32 = self.asks.iter().map(|(w, _)| w).sum();
        let mut at = rng.random_range(0..total.max(1));
        for (weight, ask) in &self.asks {
            if at < *weight {
                return *ask;
            }
            at -= weight;
        }
        Ask::Exclusive
    }
}

/// One session client until the deadline.
pub(crate) async fn session(
    id: u32,
    shared: std::sync::Arc<Shared>,
    profile: Profile,
    menu: Menu,
    seed: u64,
) -> ClientLog {
    let mut rng = StdRng::seed_from_u64(seed ^ (u64::from(id) << 32) ^ 0x5E);
    let (home, clock, mut log) = (id as usize, shared.clock, ClientLog::default());
    while clock.now() < shared.deadline {
        let mut hot = rng.random_range(0..shared.hot.len());
        let mut ask = menu.pick(&mut rng);
        let wait = profile
            .contended_wait
            .min(shared.deadline.saturating_sub(clock.now()));
        let (long_share, lo, hi) = menu.long;
        let mut work = match rng.random_bool(long_share) {
            true => between(&mut rng, (lo, hi)),
            false => between(&mut rng, menu.work_ms),
        };
        let across = shared.rolling.zip(menu.across_rolling);
        if let Some(((_, end), (held, resource))) =
            across.filter(|((_, end), _)| clock.now() < *end)
        {
            // Held until well after the last restarted master is back.
            (ask, hot) = (held, resource % shared.hot.len());
            work = (end + Duration::from_secs(3)).saturating_sub(clock.now());
        }
        if !matches!(ask, Ask::Permit(_)) && rng.random_bool(menu.retry_share) {
            let resource = shared.hot[hot].clone();
            crate::hold_retry::round(&shared, &mut rng, id, &resource, ask, wait, &mut log).await;
            continue;
        }
        let (replica, channel) = shared.routes.pick(home);
        let request = acquire_request(&shared.hot[hot], (ask, menu.ttl), wait, None);
        let mut open = match open(&shared, channel, request, wait).await {
            Ok(open) => open,
            Err((failure, message, sent, received)) => {
                log.contended_failures.push(failure);
                let resources = &shared.hot[hot..=hot];
                let what = (grant_kind(ask), Via::Hold);
                let answer = (failure, message);
                let failed =
                    shared.failed(id, replica, what, resources, None, (sent, received), answer);
                log.failed.push(failed);
                if failure != Failure::Status(tonic::Code::Aborted) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                continue;
            }
        };
        // Counted until the session ends, so a drain finds it.
        let _holding = shared.routes.holding(replica);
        let mut grant = grant_of(&shared, id, replica, ask, &open, None);
        let mut last_heard = open.received;
        let registers = &shared.registers[hot];
        let plain = ask == Ask::Exclusive;
        let fenced = plain
            .then(|| registers.check_in(&clock, grant.id, open.lock.fence, grant.valid_until))
            .flatten();
        let read = registers.read_plain();
        let until = clock.now() + work;
        let stop = follow(
            &shared,
            &mut open.events,
            &mut grant,
            &mut last_heard,
            until,
            &mut log.drained,
        )
        .await;
        if stop == Stop::Done && plain {
            registers.write_plain(&clock, grant.id, read, grant.valid_until);
            if let Some(read) = fenced {
                registers.write_fenced(&clock, grant.id, open.lock.fence, read, grant.valid_until);
            }
        }
        grant.cs_end = clock.now();
        if stop == Stop::Done {
            grant.release = Some(finish(&shared, open, &grant).await);
        }
        log.grants.push(grant);
    }
    log
}
