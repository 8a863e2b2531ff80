//! Extend, Release and Validate of a lock on several resources (see
//! [`super`]): the plain per-resource round on every resource at once.

use super::Member;
use crate::redlock::{Claim, Ending, Lock, LockError, Redlock, Tally, Token};
use futures::future::join_all;
use std::time::Duration;

impl Redlock {
    /// [`Redlock::extend_lease`] of a lock on several resources: every
    /// resource extended (see [`super`]). The fence is the first resource's,
    /// `None` unless every resource's fence is vouched for.
    pub(in crate::redlock) async fn extend_multi(
        &self,
        resource: &str,
        members: &[String],
        token: &Token,
        ttl: Duration,
    ) -> Result<(Option<u64>, Lock), LockError> {
        if !members.iter().any(|m| m == resource) {
            return Err(LockError::NotHeld(Tally::new(self.quorum)));
        }
        let results = join_all(
            members
                .iter()
                .map(|member| self.extend_lease_one(member, token, ttl, Claim::Any)),
        )
        .await;
        let mut extended = Vec::with_capacity(members.len());
        for result in results {
            extended.push(result?);
        }
        let all_known = extended.iter().all(|(fence, _)| fence.is_some());
        let first_fence = extended.first().and_then(|(fence, _)| *fence);
        let shortest = extended
            .iter()
            .map(|(_, lock)| lock.clone())
            .min_by_key(|lock| lock.validity)
            .ok_or(LockError::Internal(
                "a multi-resource token names no resource",
            ))?;
        let members = members
            .iter()
            .zip(&extended)
            .map(|(resource, (fence, _))| Member {
                resource: resource.clone(),
                fence: fence.unwrap_or(0),
            })
            .collect();
        let lock = Lock {
            resource: extended[0].1.resource.clone(),
            members,
            ..shortest
        };
        Ok((first_fence.filter(|_| all_known), lock))
    }

    /// [`Redlock::release_as`] of a lock on several resources: every
    /// resource released; held if every one still was.
    pub(in crate::redlock) async fn release_multi(
        &self,
        resource: &str,
        members: &[String],
        token: &Token,
        ending: Ending,
    ) -> Result<bool, LockError> {
        if !members.iter().any(|m| m == resource) {
            return Ok(false);
        }
        let results = join_all(
            members
                .iter()
                .map(|member| self.release_one(member, token, None, ending)),
        )
        .await;
        let mut all_held = true;
        for result in results {
            all_held &= result?;
        }
        Ok(all_held)
    }

    /// [`Redlock::validate`] of a lock on several resources: held if every
    /// resource is, for the shortest validity.
    pub(in crate::redlock) async fn validate_multi(
        &self,
        resource: &str,
        members: &[String],
        token: &Token,
    ) -> Result<Option<Duration>, LockError> {
        if !members.iter().any(|m| m == resource) {
            return Ok(None);
        }
        let results = join_all(
            members
                .iter()
                .map(|member| self.validate_one(member, token)),
        )
        .await;
        let mut shortest: Option<Duration> = None;
        for result in results {
            match result? {
                Some(left) => shortest = Some(shortest.map_or(left, |s| s.min(left))),
                None => return Ok(None),
            }
        }
        Ok(shortest)
    }
}
