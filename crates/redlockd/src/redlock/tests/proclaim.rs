//! `Redlock::proclaim` and the read that ranks an election leader's
//! records, against fake masters whose answers come in index order: a
//! read that kept the first or the last record it met, or ranked by
//! version alone, fails here every time.

use super::*;

/// The committed fence first (a master where only the proposal landed
/// keeps a lower one for the same token), then the highest version, then
/// the owner: the newest value sits on a middle master, an older one on
/// the last, a higher version under the lower fence on another.
#[tokio::test(start_paused = true)]
async fn a_read_ranks_records_by_fence_then_version() {
    let c = cluster();
    let lock = c
        .engine
        .acquire(RESOURCE, TTL, NO_WAIT)
        .await
        .expect("granted");
    let f = lock.fence;
    c.fakes[0].set_record(&c.keys, f, "old", 0);
    c.fakes[1].set_record(&c.keys, f - 1, "proposal only", 9);
    c.fakes[2].set_record(&c.keys, f, "newest", 5);
    c.fakes[3].set_record(&c.keys, f, "old", 0);
    c.fakes[4].set_record(&c.keys, f, "older", 3);
    let held = c
        .engine
        .inspect(RESOURCE)
        .await
        .expect("read")
        .expect("held");
    assert_eq!(
        (held.fence, held.owner.as_str(), held.owner_version),
        (f, "newest", 5)
    );
}

/// A master keeping a higher version (a Proclaim that failed, from a
/// replica whose clock runs ahead) would make reads that meet it answer
/// its value: the Proclaim writes again above it, and every master ends
/// with the new value.
#[tokio::test(start_paused = true)]
async fn a_proclaim_goes_again_above_a_newer_version() {
    let c = cluster();
    let lock = c
        .engine
        .acquire(RESOURCE, TTL, NO_WAIT)
        .await
        .expect("granted");
    let ahead = u64::MAX / 4;
    c.fakes[1].set_record(&c.keys, lock.fence, "failed, ahead", ahead);
    let version = c
        .engine
        .proclaim(RESOURCE, &lock.token, lock.fence, "moved")
        .await
        .expect("proclaimed");
    assert!(version > ahead, "{version} not above {ahead}");
    let held = c
        .engine
        .inspect(RESOURCE)
        .await
        .expect("read")
        .expect("held");
    assert_eq!(
        (held.owner.as_str(), held.owner_version),
        ("moved", version)
    );
    for fake in &c.fakes {
        let record = fake.record(&c.keys).expect("a record");
        assert_eq!(
            record,
            (Some(lock.fence), "moved".to_owned(), version),
            "{}",
            fake.name
        );
    }
}

/// Refusals: a term that is not the lock's, and a token that holds nothing
/// any more, are NotHeld (FAILED_PRECONDITION); with three masters keeping
/// no record of the grant (keys re-created after restarts) there is nothing
/// to write to on a majority: NoQuorum (UNAVAILABLE), not a refusal.
#[tokio::test(start_paused = true)]
async fn proclaim_refusals_and_outages() {
    let c = cluster();
    let lock = c
        .engine
        .acquire(RESOURCE, TTL, NO_WAIT)
        .await
        .expect("granted");
    let wrong_term = c
        .engine
        .proclaim(RESOURCE, &lock.token, lock.fence + 1, "x")
        .await;
    assert!(
        matches!(wrong_term, Err(LockError::NotHeld(_))),
        "{wrong_term:?}"
    );
    for fake in &c.fakes[..3] {
        fake.state().fences.remove(&c.keys.fence);
    }
    let unrecorded = c
        .engine
        .proclaim(RESOURCE, &lock.token, lock.fence, "x")
        .await;
    assert!(
        matches!(unrecorded, Err(LockError::NoQuorum(_))),
        "{unrecorded:?}"
    );
    assert!(c
        .engine
        .release(RESOURCE, &lock.token)
        .await
        .expect("released"));
    let over = c
        .engine
        .proclaim(RESOURCE, &lock.token, lock.fence, "x")
        .await;
    assert!(matches!(over, Err(LockError::NotHeld(_))), "{over:?}");
}
