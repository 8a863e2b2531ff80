//! The operations the engine sends a master: [`Master`] for [`ValkeyMaster`],
//! each one script operation queued in the master's next batch.

use super::scripts::Op;
use super::wire::{
    array, integer, key, millis, node_error, permit_limit, push_optional, seen, shared, unsigned,
    Wire,
};
use super::ValkeyMaster;
use crate::redlock::claim::{self, Claim, Epoch};
use crate::redlock::fence::{FenceRead, Proposal};
use crate::redlock::master::Seen;
use crate::redlock::{AcquireVote, Ending, ExtendVote, Holder, LockKeys, Master, NodeError, Token};
use fred::bytes::Bytes;
use fred::prelude::{ClientLike, Value};
use fred::types::{ClusterHash, CustomCommand};
use futures::future::BoxFuture;
use futures::FutureExt;
use std::time::Duration;

impl Master for ValkeyMaster {
    fn name(&self) -> &str {
        &self.name
    }

    fn trusted(&self) -> bool {
        self.state.trusted()
    }

    /// fred times each command out `node_timeout` after the batcher hands
    /// it its batch, which is when the batch is written (`batch.rs`).
    fn bounds_own_commands(&self) -> bool {
        true
    }

    fn answered_since(&self, at: tokio::time::Instant) -> bool {
        self.state.answered_since(at)
    }

    fn is_silent(&self) -> bool {
        self.state.is_silent()
    }

    fn acquire(
        &self,
        keys: &LockKeys,
        token: &Token,
        ttl: Duration,
        proposal: Proposal,
        waiter_marker: Duration,
        holder: &Holder,
    ) -> BoxFuture<'static, Result<AcquireVote, NodeError>> {
        let reply = if let Some(readers) = &keys.readers {
            self.run(
                Op::AcquireShared,
                vec![key(&keys.lock), key(&keys.fence), key(readers)],
                vec![token.expose().into(), millis(ttl), millis(waiter_marker)],
            )
        } else if keys.limit > 1 {
            self.run(
                Op::AcquirePermit,
                vec![
                    key(&keys.lock),
                    key(&keys.fence),
                    key(&keys.base),
                    key(&keys.base_fence),
                ],
                vec![
                    token.expose().into(),
                    millis(ttl),
                    keys.limit.to_string().into(),
                    millis(keys.limit_ttl),
                    millis(waiter_marker),
                ],
            )
        } else {
            let constants = self.constants;
            if proposal.fence > 0
                && (proposal.window, proposal.fence_ttl)
                    != (constants.proposal_window, constants.fence_ttl)
            {
                // The script takes proposals with its own window and fence
                // ttl: one built for other settings must not run this one.
                let error = NodeError::Protocol(format!(
                    "a proposal for window {:?} and fence ttl {:?} on a script built for {:?} and {:?}",
                    proposal.window,
                    proposal.fence_ttl,
                    constants.proposal_window,
                    constants.fence_ttl
                ));
                return futures::future::ready(Err(error)).boxed();
            }
            if proposal.fence > 0 {
                // The grant may stand without a commit (see `commit_fence`).
                self.peers.local().record(ttl);
            }
            let wire = Wire::of(keys, token);
            let mut args = vec![
                shared(wire.map(|w| &w.token), token.expose()),
                millis(ttl),
                Value::String(proposal.fence.to_string().into()),
                holder.owner.as_ref().into(),
                holder.kind.as_ref().into(),
            ];
            // The optional arguments (`OPT[6]` on), up to the last one set.
            let optional = [
                (waiter_marker > Duration::ZERO).then(|| millis(waiter_marker)),
                (holder.lock_delay > Duration::ZERO).then(|| millis(holder.lock_delay)),
                (holder.hold_at_least > Duration::ZERO).then(|| millis(holder.hold_at_least)),
                (keys.writer_mark > Duration::ZERO).then(|| millis(keys.writer_mark)),
                holder.epoch.map(|epoch| epoch.encode().into()),
            ];
            push_optional(&mut args, optional);
            self.run(
                Op::Acquire,
                vec![
                    shared(wire.map(|w| &w.lock), &keys.lock),
                    shared(wire.map(|w| &w.fence), &keys.fence),
                ],
                args,
            )
        };
        async move {
            let fields = array(reply.await?)?;
            match fields.as_slice() {
                [flag, max, now, took] if integer(flag)? == 1 => {
                    Ok(AcquireVote::Granted(FenceRead {
                        max: unsigned(max)?,
                        now_micros: unsigned(now)?,
                        took: integer(took)? == 1,
                    }))
                }
                // A permit's or shared grant's: no proposal taken.
                [flag, max, now] if integer(flag)? == 1 => Ok(AcquireVote::Granted(FenceRead {
                    max: unsigned(max)?,
                    now_micros: unsigned(now)?,
                    took: false,
                })),
                [_, pttl] => Ok(AcquireVote::Refused {
                    holder_ttl: u64::try_from(integer(pttl)?)
                        .ok()
                        .map(Duration::from_millis),
                    delayed: false,
                }),
                [_, _, tag] if tag.as_str().as_deref() == Some("own") => Ok(AcquireVote::Own),
                [_, left, _delay] => Ok(AcquireVote::Refused {
                    holder_ttl: Some(Duration::from_millis(unsigned(left)?)),
                    delayed: true,
                }),
                [_, _, _, _limit] => Ok(AcquireVote::Conflict),
                other => Err(NodeError::Protocol(format!("acquire: {other:?}"))),
            }
        }
        .boxed()
    }

    fn acquire_all(
        &self,
        keys: &[LockKeys],
        token: &Token,
        ttl: Duration,
        waiter_marker: Duration,
    ) -> BoxFuture<'static, Result<crate::redlock::AcquireAllVote, NodeError>> {
        self.run_acquire_all(keys, token, ttl, waiter_marker)
    }

    fn commit_fence(
        &self,
        keys: &LockKeys,
        token: &Token,
        fence: u64,
        fence_ttl: Duration,
        ttl: Duration,
        holder: &Holder,
    ) -> BoxFuture<'static, Result<bool, NodeError>> {
        // A grant is being committed: no holder of it believes in it past
        // now + ttl (the attempt started earlier).
        self.peers.local().record(ttl);
        let (op, mut script_keys) = match &keys.readers {
            Some(readers) => (Op::CommitShared, vec![key(readers)]),
            None => (Op::CommitFence, Vec::new()),
        };
        let wire = Wire::of(keys, token);
        script_keys.splice(
            0..0,
            [
                shared(wire.map(|w| &w.lock), &keys.lock),
                shared(wire.map(|w| &w.fence), &keys.fence),
            ],
        );
        if keys.readers.is_none() {
            // The resource's own hash keeps its one fence sequence.
            script_keys.push(shared(wire.map(|w| &w.base_fence), &keys.base_fence));
        }
        let reply = self.run(
            op,
            script_keys,
            vec![
                shared(wire.map(|w| &w.token), token.expose()),
                Value::String(fence.to_string().into()),
                millis(fence_ttl),
                millis(ttl),
                holder.owner.as_ref().into(),
                holder.kind.as_ref().into(),
                millis(holder.lock_delay),
                millis(holder.hold_at_least),
                claim::encode(holder.epoch).into(),
            ],
        );
        async move { Ok(integer(&reply.await?)? == 1) }.boxed()
    }

    fn extend(
        &self,
        keys: &LockKeys,
        token: &Token,
        ttl: Duration,
        fence_ttl: Duration,
        claim: Claim,
    ) -> BoxFuture<'static, Result<ExtendVote, NodeError>> {
        self.peers.local().record(ttl);
        let (op, mut script_keys) = match &keys.readers {
            Some(readers) => (Op::ExtendShared, vec![key(readers)]),
            None => (Op::Extend, Vec::new()),
        };
        script_keys.splice(0..0, [key(&keys.lock), key(&keys.fence)]);
        script_keys.push(key(&keys.base_fence));
        let reply = self.run(
            op,
            script_keys,
            vec![
                token.expose().into(),
                millis(ttl),
                millis(fence_ttl),
                permit_limit(token),
                claim.encode().into(),
            ],
        );
        async move {
            let fields = array(reply.await?)?;
            match fields.as_slice() {
                [flag] if integer(flag)? == 0 => Ok(ExtendVote::NotHeld),
                [flag] if integer(flag)? == 2 => Ok(ExtendVote::Missing),
                [flag] if integer(flag)? == 3 => Ok(ExtendVote::Superseded),
                [_, fence] => Ok(ExtendVote::Extended {
                    fence: Some(unsigned(fence)?).filter(|f| *f > 0),
                }),
                other => Err(NodeError::Protocol(format!("extend: {other:?}"))),
            }
        }
        .boxed()
    }

    fn recreate(
        &self,
        keys: &LockKeys,
        token: &Token,
        ttl: Duration,
        fence_ttl: Duration,
    ) -> BoxFuture<'static, Result<bool, NodeError>> {
        let reply = match &keys.readers {
            Some(readers) => self.run(
                Op::RecreateShared,
                vec![key(&keys.lock), key(&keys.fence), key(readers)],
                vec![token.expose().into(), millis(ttl)],
            ),
            None => self.run(
                Op::Recreate,
                vec![key(&keys.lock), key(&keys.base_fence), key(&keys.base)],
                vec![
                    token.expose().into(),
                    millis(ttl),
                    permit_limit(token),
                    millis(fence_ttl),
                ],
            ),
        };
        async move { Ok(integer(&reply.await?)? == 1) }.boxed()
    }

    fn release(
        &self,
        keys: &LockKeys,
        token: &Token,
        notice: &str,
        ending: Ending,
        epoch: Option<Epoch>,
    ) -> BoxFuture<'static, Result<bool, NodeError>> {
        // Static flags: no copy per command.
        let flag = |on: bool| Value::Bytes(Bytes::from_static(if on { b"1" } else { b"0" }));
        let delifeq = flag(self.state.has_delifeq());
        let (op, mut script_keys) = match &keys.readers {
            Some(readers) => (Op::ReleaseShared, vec![key(readers)]),
            None => (Op::Release, Vec::new()),
        };
        let wire = Wire::of(keys, token);
        script_keys.splice(
            0..0,
            [
                shared(wire.map(|w| &w.lock), &keys.lock),
                shared(wire.map(|w| &w.fence), &keys.fence),
            ],
        );
        script_keys.push(shared(wire.map(|w| &w.base_fence), &keys.base_fence));
        let mut args = vec![
            shared(wire.map(|w| &w.token), token.expose()),
            shared(wire.map(|w| &w.channel), &keys.channel),
            notice.into(),
            delifeq,
        ];
        // The optional arguments (`OPT[5]` on), up to the last one set.
        push_optional(
            &mut args,
            [
                ending_flag(ending),
                epoch.map(|epoch| epoch.encode().into()),
            ],
        );
        let reply = self.run(op, script_keys, args);
        async move { Ok(integer(&reply.await?)? == 1) }.boxed()
    }

    fn announce(&self, channel: &str, notice: &str) -> BoxFuture<'static, Result<(), NodeError>> {
        // Queued now: the caller may drop the answer.
        let reply = self.run(
            Op::Announce,
            Vec::new(),
            vec![channel.into(), notice.into()],
        );
        async move { reply.await.map(drop) }.boxed()
    }

    fn proclaim(
        &self,
        keys: &LockKeys,
        token: &Token,
        term: u64,
        version: u64,
        value: &str,
    ) -> BoxFuture<'static, Result<Option<u64>, NodeError>> {
        let reply = self.run(
            Op::Proclaim,
            vec![key(&keys.lock), key(&keys.fence)],
            vec![
                token.expose().into(),
                term.to_string().into(),
                version.to_string().into(),
                value.into(),
            ],
        );
        async move {
            let kept = integer(&reply.await?)?;
            match u64::try_from(kept) {
                Ok(kept) => Ok(Some(kept)),
                Err(_) if kept == -1 => Ok(None),
                Err(_) => Err(NodeError::Protocol(format!("proclaim: {kept}"))),
            }
        }
        .boxed()
    }

    fn check(
        &self,
        keys: &LockKeys,
        token: &Token,
    ) -> BoxFuture<'static, Result<Option<Duration>, NodeError>> {
        let reply = match &keys.readers {
            Some(readers) => self.run(
                Op::CheckShared,
                vec![key(&keys.lock), key(&keys.fence), key(readers)],
                vec![token.expose().into()],
            ),
            None => self.run(
                Op::Check,
                vec![key(&keys.lock)],
                vec![token.expose().into()],
            ),
        };
        async move {
            // -3: not ours; -2: gone; -1: no expiry (never set by us): not held.
            Ok(u64::try_from(integer(&reply.await?)?)
                .ok()
                .map(Duration::from_millis))
        }
        .boxed()
    }

    fn inspect(&self, keys: &LockKeys) -> BoxFuture<'static, Result<Option<Seen>, NodeError>> {
        let reply = self.run(
            Op::Inspect,
            vec![key(&keys.lock), key(&keys.fence)],
            Vec::new(),
        );
        async move { seen(array(reply.await?)?) }.boxed()
    }

    fn scan(
        &self,
        pattern: &str,
        cursor: u64,
        count: usize,
    ) -> BoxFuture<'static, Result<(u64, Vec<String>), NodeError>> {
        // Not batched: SCAN names no key, and its work is bounded by COUNT.
        let command = self.command.clone();
        let down = self.state.is_down();
        let args: Vec<Value> = vec![
            cursor.to_string().into(),
            "MATCH".into(),
            pattern.into(),
            "COUNT".into(),
            Value::Integer(i64::try_from(count).unwrap_or(i64::MAX)),
        ];
        async move {
            if down {
                return Err(NodeError::Unavailable("master is down".into()));
            }
            let cmd = CustomCommand::new_static("SCAN", ClusterHash::FirstKey, false);
            let reply: Value = command.custom(cmd, args).await.map_err(node_error)?;
            match array(reply)?.as_slice() {
                [next, Value::Array(found)] => Ok((
                    unsigned(next)?,
                    found.iter().filter_map(Value::as_string).collect(),
                )),
                other => Err(NodeError::Protocol(format!("scan: {other:?}"))),
            }
        }
        .boxed()
    }
}

/// The release script's `OPT[5]`: `1` a holder's release (hold-at-least
/// honoured, the lock-delay ended), `2` a lapsed lock's remains (the
/// lock-delay kept), none (`0`) a forced delete.
fn ending_flag(ending: Ending) -> Option<Value> {
    match ending {
        Ending::Released => Some(Value::Bytes(Bytes::from_static(b"1"))),
        Ending::Lapsed => Some(Value::Bytes(Bytes::from_static(b"2"))),
        Ending::Forced => None,
    }
}
