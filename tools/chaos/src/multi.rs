//! `--multi N`: clients that lock several hot resources at once
//! (`AcquireRequest.resources`) beside the plain contended
//! clients on the same resources.
//!
//! Each grant is recorded as one [`Grant`] per resource of it, with that
//! resource's own fence and the lock's windows (one Acquire, the same
//! Extends, one Release), so the ordinary per-resource checkers cover
//! every resource of a multi grant: no resource in two overlapping
//! windows (a multi grant beside a plain one or another multi grant on
//! any shared resource), fences ordered per resource, critical sections
//! apart, and both registers of every resource updated under it. That is
//! what "atomic" means to a holder: all of its resources are held, each
//! exclusively, for the whole window. The Release and Extend go through a
//! randomly chosen one of the names.

use crate::clients::{ClientLog, Profile, Shared};
use crate::history::{Failure, Grant, Kind, Via, Window, Workload};
use rand::rngs::StdRng;
use rand::seq::index::sample;
use rand::{Rng, SeedableRng};
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use redlockd_proto::pb::{AcquireRequest, Lock};
use std::sync::Arc;
use std::time::Duration;

/// Client ids of the multi clients (below `crate::sessions::FIRST_ID`,
/// whose range the session figures count).
pub(crate) const FIRST_ID: u32 = 500;

/// Added to a call's own wait for its client-side timeout.
const CALL_SLACK: Duration = Duration::from_millis(1500);

fn proto(d: Duration) -> Option<prost_types::Duration> {
    prost_types::Duration::try_from(d).ok()
}

/// One multi client until the deadline: 2 or 3 distinct hot resources per
/// lock (all of them when there are fewer).
pub(crate) async fn client(id: u32, shared: Arc<Shared>, profile: Profile, seed: u64) -> ClientLog {
    let mut rng = StdRng::seed_from_u64(seed ^ (u64::from(id) << 32) ^ 0x3A);
    let (home, clock, mut log) = (id as usize, shared.clock, ClientLog::default());
    while clock.now() < shared.deadline {
        let count = rng.random_range(2..=3).min(shared.hot.len());
        let picked: Vec<usize> = sample(&mut rng, shared.hot.len(), count).into_vec();
        let wait = profile
            .contended_wait
            .min(shared.deadline.saturating_sub(clock.now()));
        let (replica, channel) = shared.routes.pick(home);
        let names: Vec<String> = picked.iter().map(|&i| shared.hot[i].clone()).collect();
        let request = AcquireRequest {
            resources: names.clone(),
            ttl: proto(profile.contended_ttl),
            wait: proto(wait),
            owner: "chaos-multi".to_owned(),
            ..Default::default()
        };
        let sent = clock.now();
        let answer = tokio::time::timeout(
            wait + CALL_SLACK,
            LockServiceClient::new(channel).acquire(request),
        )
        .await;
        let received = clock.now();
        let failure = match answer {
            Ok(Ok(response)) => match response.into_inner().lock {
                Some(lock) => Ok(lock),
                None => Err((Failure::Status(tonic::Code::Internal), "no lock".to_owned())),
            },
            Ok(Err(status)) => Err((Failure::Status(status.code()), status.message().to_owned())),
            Err(_) => Err((
                Failure::TimedOut,
                "no answer in the client's time".to_owned(),
            )),
        };
        let lock = match failure {
            Ok(lock) => lock,
            Err(failed) => {
                let failure = failed.0;
                log.contended_failures.push(failure);
                log.failed.push(shared.failed(
                    FIRST_ID + id,
                    replica,
                    (Kind::Multi, Via::Unary),
                    &names,
                    None,
                    (sent, received),
                    failed,
                ));
                if failure != Failure::Status(tonic::Code::Aborted) {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                continue;
            }
        };
        log.grants.extend(
            hold(
                &shared, &profile, &mut rng, id, home, replica, &picked, &lock, sent, received,
            )
            .await,
        );
    }
    log
}

/// The critical section of a multi grant and its release: one [`Grant`]
/// per resource, in the order of `picked`.
#[allow(clippy::too_many_arguments)]
async fn hold(
    shared: &Shared,
    profile: &Profile,
    rng: &mut StdRng,
    id: u32,
    home: usize,
    replica: usize,
    picked: &[usize],
    lock: &Lock,
    sent: Duration,
    received: Duration,
) -> Vec<Grant> {
    let clock = shared.clock;
    let validity = lock
        .validity
        .and_then(|d| Duration::try_from(d).ok())
        .unwrap_or_default();
    let first = Window::of_call(sent, received, validity);
    // The lock's own shape: every resource asked, in order, with a fence.
    let shaped = lock.resources.len() == picked.len()
        && lock
            .resources
            .iter()
            .zip(picked)
            .all(|(r, &i)| r.resource == shared.hot[i]);
    let mut grants: Vec<Grant> = picked
        .iter()
        .enumerate()
        .map(|(n, &i)| {
            let member = Lock {
                resource: shared.hot[i].clone(),
                token: lock.token.clone(),
                // A misshapen answer gets fence 0: the fence checks flag it.
                fence: match shaped {
                    true => lock.resources[n].fence,
                    false => 0,
                },
                ..Lock::default()
            };
            let mut grant = shared.grant(Workload::Contended, FIRST_ID + id, replica, &member);
            grant.kind = Kind::Multi;
            (grant.sent, grant.received, grant.valid_until) = (sent, received, first.end);
            grant.windows.push(first);
            grant
        })
        .collect();
    let call = grants.first().map_or(0, |g| g.id);
    for grant in &mut grants {
        grant.call = call;
    }
    let valid_until = first.end;
    if valid_until <= received {
        let release = shared.release(home, lock).await;
        for grant in &mut grants {
            grant.cs_end = received;
            grant.release = Some(release);
        }
        return grants;
    }
    let fenced: Vec<Option<u64>> = picked
        .iter()
        .zip(&grants)
        .map(|(&i, g)| shared.registers[i].check_in(&clock, g.id, g.fence, valid_until))
        .collect();
    let plain: Vec<u64> = picked
        .iter()
        .map(|&i| shared.registers[i].read_plain())
        .collect();
    let room = valid_until.saturating_sub(clock.now() + Duration::from_millis(50));
    let work =
        Duration::from_millis(rng.random_range(profile.work_ms.0..=profile.work_ms.1)).min(room);
    let mut valid_until = valid_until;
    if rng.random_bool(profile.extend_share) {
        tokio::time::sleep(work / 2).await;
        // Through any one of its names.
        let name = &shared.hot[picked[rng.random_range(0..picked.len())]];
        let through = Lock {
            resource: name.clone(),
            ..lock.clone()
        };
        if let Some((head, rest)) = grants.split_first_mut() {
            shared
                .extend(home, &through, profile.contended_ttl, head)
                .await;
            valid_until = head.valid_until;
            for grant in rest {
                grant.windows.clone_from(&head.windows);
                grant.extends.clone_from(&head.extends);
                grant.valid_until = valid_until;
            }
        }
        tokio::time::sleep(work / 2).await;
    } else {
        tokio::time::sleep(work).await;
    }
    for ((&i, grant), (read, fenced)) in picked
        .iter()
        .zip(&grants)
        .zip(plain.into_iter().zip(fenced))
    {
        let registers = &shared.registers[i];
        registers.write_plain(&clock, grant.id, read, valid_until);
        if let Some(read) = fenced {
            registers.write_fenced(&clock, grant.id, grant.fence, read, valid_until);
        }
    }
    let cs_end = clock.now();
    let name = &shared.hot[picked[rng.random_range(0..picked.len())]];
    let through = Lock {
        resource: name.clone(),
        ..lock.clone()
    };
    let release = shared.release(home, &through).await;
    for grant in &mut grants {
        grant.cs_end = cs_end;
        grant.release = Some(release);
    }
    grants
}
