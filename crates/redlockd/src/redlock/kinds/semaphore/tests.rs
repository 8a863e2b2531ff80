//! The engine's semaphores over five fake masters (see [`super`]):
//! permits are distinct, a full semaphore is contended, a released permit
//! is the next grant's, with a greater fence; a permit extends, validates
//! and releases through its token alone.

use super::*;
use crate::redlock::fake;
use crate::redlock::{Quorum, Tally};
use std::collections::BTreeSet;

fn contended(free_in: Option<u64>) -> Failure {
    let tally = Tally::new(Quorum::majority(5).expect("5 > 0"));
    Failure {
        error: LockError::Contended(tally),
        holder_free_in: free_in.map(Duration::from_millis),
        own: false,
    }
}

/// The earliest known time wins; unknown counts as never.
#[test]
fn earliest_free_permit() {
    let f = earlier_free(Some(contended(Some(30))), contended(Some(10)));
    assert_eq!(f.holder_free_in, Some(Duration::from_millis(10)));
    let f = earlier_free(Some(contended(Some(10))), contended(Some(30)));
    assert_eq!(f.holder_free_in, Some(Duration::from_millis(10)));
    let f = earlier_free(Some(contended(None)), contended(Some(30)));
    assert_eq!(f.holder_free_in, Some(Duration::from_millis(30)));
    let f = earlier_free(Some(contended(Some(5))), contended(None));
    assert_eq!(f.holder_free_in, Some(Duration::from_millis(5)));
    assert!(earlier_free(None, contended(None)).holder_free_in.is_none());
}

const TTL: Duration = Duration::from_secs(10);

fn engine() -> Arc<Redlock> {
    let nodes = fake::as_nodes(&fake::five());
    Arc::new(Redlock::new(nodes, fake::settings(Duration::from_millis(50))).expect("five"))
}

async fn take(engine: &Arc<Redlock>, limit: u32) -> Result<Lock, LockError> {
    let holder = Holder::default().with_limit(limit);
    engine
        .acquire_detached_as("sem".into(), None, TTL, Duration::ZERO, holder)
        .await
}

/// Three permits of a limit-3 semaphore, then contention; a released
/// permit goes to the next caller with a greater fence.
#[tokio::test(start_paused = true)]
async fn three_permits_then_contended() {
    let engine = engine();
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(take(&engine, 3).await.expect("a free permit"));
    }
    let permits: BTreeSet<u32> = held.iter().filter_map(|l| l.token.permit()).collect();
    assert_eq!(permits, BTreeSet::from([0, 1, 2]));
    let full = take(&engine, 3).await.expect_err("all three are held");
    assert!(matches!(full, LockError::Contended(_)), "{full:?}");
    let freed = held.remove(1);
    assert!(engine.release("sem", &freed.token).await.expect("quorum"));
    let next = take(&engine, 3).await.expect("the freed permit");
    assert_eq!(next.token.permit(), freed.token.permit());
    assert!(next.fence > freed.fence);
    assert_ne!(next.token, freed.token);
}

/// A permit's token alone finds its keys: Extend keeps its fence,
/// Validate sees it, Release frees it, and a plain lock's keys are apart.
#[tokio::test(start_paused = true)]
async fn a_permit_acts_through_its_token() {
    let engine = engine();
    let permit = take(&engine, 2).await.expect("a permit");
    let extended = engine
        .extend("sem", &permit.token, TTL)
        .await
        .expect("held");
    assert_eq!(extended.fence, permit.fence);
    assert!(engine
        .validate("sem", &permit.token)
        .await
        .expect("quorum")
        .is_some());
    let plain = Token::parse(&permit.token.expose()[..32]).expect("the random part");
    assert_eq!(engine.validate("sem", &plain).await.expect("quorum"), None);
    assert!(engine.release("sem", &permit.token).await.expect("quorum"));
    assert_eq!(
        engine.validate("sem", &permit.token).await.expect("quorum"),
        None
    );
}
