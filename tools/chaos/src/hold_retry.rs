//! A Hold retried with its request id while the first stream lingers
//! (`--mix`): session S1 takes the lock with request id X; the client then
//! opens S2 with X on a NEW connection, through the same replica or the
//! other one, as a client does that thinks its first stream broken (or
//! was told `draining`); once S2 answers (the same lock: the same token),
//! or after [`LINGER`] if the daemon holds S2 back until S1 ends, S1 is
//! closed, by a half-close or by dropping the stream, and S2 holds on for
//! its work.
//!
//! Both grants go into the history with their token: equal tokens are one
//! lock, so S1 and S2 may overlap each other, but S1's end must not end
//! the lock S2 holds: no other client may be granted while S2's windows
//! last (`crate::exclusion`), and S2's Release says `was_held`.

use crate::clients::{ClientLog, Shared};
use crate::history::{Failure, ReleaseRecord, Time, Via};
use crate::hold_stream::{self, acquire_request, follow, grant_of, open, Stop};
use crate::mix::{self, Ask};
use rand::rngs::StdRng;
use rand::Rng;
use std::time::Duration;

/// How long S1 holds before the retry is sent, in ms.
const FIRST_MS: (u64, u64) = (20, 200);
/// How long S1 lingers, at most, for the retry's answer.
const LINGER: Duration = Duration::from_millis(300);
/// How long S2 holds after S1 is closed, in ms.
const AFTER_MS: (u64, u64) = (100, 600);

/// One round: S1, S2 with the same request id, S1 closed, S2 on.
pub(crate) async fn round(
    shared: &Shared,
    rng: &mut StdRng,
    id: u32,
    resource: &str,
    ask: Ask,
    wait: Duration,
    log: &mut ClientLog,
) {
    let clock = shared.clock;
    let home = id as usize;
    let request_id = mix::request_id(rng);
    let (replica, channel) = shared.routes.pick(home);
    let request = acquire_request(resource, (ask, hold_stream::TTL), wait, Some(&request_id));
    let kind = (hold_stream::grant_kind(ask), Via::Hold);
    let names = [resource.to_owned()];
    let mut first = match open(shared, channel, request, wait).await {
        Ok(open) => open,
        Err((failure, message, sent, received)) => {
            log.contended_failures.push(failure);
            let answer = (failure, message);
            let rid = Some(request_id.as_str());
            log.failed.push(shared.failed(
                id,
                replica,
                kind,
                &names,
                rid,
                (sent, received),
                answer,
            ));
            tokio::time::sleep(Duration::from_millis(10)).await;
            return;
        }
    };
    let mut g1 = grant_of(shared, id, replica, ask, &first, Some(&request_id));
    let mut heard1 = first.received;
    let until = clock.now() + hold_stream::between(rng, FIRST_MS);
    let mut drained = 0;
    let stop = follow(
        shared,
        &mut first.events,
        &mut g1,
        &mut heard1,
        until,
        &mut drained,
    )
    .await;
    if stop == Stop::Gone {
        g1.cs_end = clock.now();
        log.grants.push(g1);
        return;
    }
    // The retry: a new connection, to this replica or the other one.
    let other = rng.random_bool(0.5);
    let (retry_replica, _) = shared.routes.pick(home + usize::from(other));
    let fresh = shared
        .addrs
        .get(retry_replica)
        .and_then(|addr| redlockd_testkit::client::endpoint(*addr).ok())
        .map(|endpoint| endpoint.connect_lazy());
    let Some(channel) = fresh else {
        g1.cs_end = clock.now();
        g1.release = Some(hold_stream::finish(shared, first, &g1).await);
        log.grants.push(g1);
        return;
    };
    log.hold_retries += 1;
    let request = acquire_request(resource, (ask, hold_stream::TTL), wait, Some(&request_id));
    let second = open(shared, channel, request, wait);
    tokio::pin!(second);
    // S1 lingers until the retry is answered, or [`LINGER`] at most (a
    // daemon may hold the retry back until the first stream ends).
    let early = tokio::time::timeout(LINGER, &mut second).await.ok();
    // S1 goes: half-closed (the daemon answers `released`) or dropped.
    let closed_at = clock.now();
    g1.cs_end = closed_at;
    let outcome = match rng.random_bool(0.5) {
        true => {
            let hold_stream::Open {
                requests,
                mut events,
                ..
            } = first;
            drop(requests);
            hold_stream::released(shared, &mut events).await
        }
        false => {
            drop(first);
            Err(Failure::Status(tonic::Code::Cancelled))
        }
    };
    g1.release = Some(ReleaseRecord {
        sent: closed_at,
        received: clock.now(),
        outcome,
        calls: 1,
        first_failure: None,
    });
    log.grants.push(g1);
    let second = match early {
        Some(answer) => answer,
        None => second.await,
    };
    let mut second = match second {
        Ok(open) => open,
        Err((failure, message, sent, received)) => {
            let answer = (failure, message);
            let rid = Some(request_id.as_str());
            log.failed.push(shared.failed(
                id,
                retry_replica,
                kind,
                &names,
                rid,
                (sent, received),
                answer,
            ));
            return;
        }
    };
    log.hold_retries_granted += 1;
    let mut g2 = grant_of(shared, id, retry_replica, ask, &second, Some(&request_id));
    let mut heard2: Time = second.received;
    let until = clock.now() + hold_stream::between(rng, AFTER_MS);
    let stop = follow(
        shared,
        &mut second.events,
        &mut g2,
        &mut heard2,
        until,
        &mut drained,
    )
    .await;
    g2.cs_end = clock.now();
    if stop == Stop::Done {
        g2.release = Some(hold_stream::finish(shared, second, &g2).await);
    }
    log.drained += drained;
    log.grants.push(g2);
}
