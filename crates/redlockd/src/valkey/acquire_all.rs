//! A multi-resource acquire on one master: one
//! [`ACQUIRE_ALL`](super::scripts::multi::ACQUIRE_ALL) operation in the next batch.

use super::scripts::Op;
use super::wire::{array, integer, key, millis, unsigned};
use super::ValkeyMaster;
use crate::redlock::fence::FenceRead;
use crate::redlock::{AcquireAllVote, LockKeys, NodeError, Token};
use futures::future::BoxFuture;
use futures::FutureExt;
use std::time::Duration;

impl ValkeyMaster {
    /// [`crate::redlock::Master::acquire_all`] on this master: one
    /// [`ACQUIRE_ALL`](super::scripts::multi::ACQUIRE_ALL) operation in the next batch.
    pub(super) fn run_acquire_all(
        &self,
        keys: &[LockKeys],
        token: &Token,
        ttl: Duration,
        waiter_marker: Duration,
    ) -> BoxFuture<'static, Result<AcquireAllVote, NodeError>> {
        let names = keys
            .iter()
            .flat_map(|k| [key(&k.lock), key(&k.fence)])
            .collect();
        let count = keys.len();
        let reply = self.run(
            Op::AcquireAll,
            names,
            vec![
                token.expose().into(),
                millis(ttl),
                count.to_string().into(),
                millis(waiter_marker),
            ],
        );
        async move {
            let fields = array(reply.await?)?;
            match fields.as_slice() {
                [flag, now, maxes @ ..] if integer(flag)? == 1 && maxes.len() == count => {
                    let now_micros = unsigned(now)?;
                    let reads = maxes
                        .iter()
                        .map(|max| {
                            Ok(FenceRead {
                                max: unsigned(max)?,
                                now_micros,
                                took: false,
                            })
                        })
                        .collect::<Result<Vec<_>, NodeError>>()?;
                    Ok(AcquireAllVote::Granted(reads))
                }
                [_, wait] => Ok(AcquireAllVote::Refused {
                    holder_ttl: u64::try_from(integer(wait)?)
                        .ok()
                        .map(Duration::from_millis),
                    delayed: false,
                }),
                [_, left, _delay] => Ok(AcquireAllVote::Refused {
                    holder_ttl: Some(Duration::from_millis(unsigned(left)?)),
                    delayed: true,
                }),
                other => Err(NodeError::Protocol(format!("acquire_all: {other:?}"))),
            }
        }
        .boxed()
    }
}
