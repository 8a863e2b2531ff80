//! A batch as one script call's arguments: the horizon key and the
//! operations' keys, then the operations' count, headers and arguments,
//! packed into one value for batches of several operations
//! ([`crate::valkey::scripts::pack`]; layout: `batch_script`).

use super::{Awaiting, Queued};
use crate::valkey::scripts::pack::Pack;
use fred::prelude::Value;

/// Batches of at least this many operations send their arguments packed
/// into one value ([`crate::valkey::scripts::pack`]); smaller ones send each as
/// its own. Unpacking has a fixed cost on the master (a call to
/// `cmsgpack.unpack` and a table) that a batch of one operation's few
/// arguments does not win back (docs/benchmarks.md, "One value for a
/// batch's arguments").
pub(crate) const PACK_FROM: usize = 2;

/// Whether `arg` is of a kind the batch script takes (and [`Pack`] packs):
/// anything else is refused at submission, not guessed at.
pub(super) fn packable(arg: &Value) -> bool {
    matches!(arg, Value::Bytes(_) | Value::String(_) | Value::Integer(_))
}

/// EVAL's (or EVALSHA's) arguments for `batch` (emptied) and the reply
/// channels in order: the horizon key, then every operation's keys; then
/// the operations' count, then each one's header and arguments, packed
/// into one value from [`PACK_FROM`] operations on (see `batch_script`).
pub(super) fn encode(
    script: Value,
    horizon_key: &Value,
    batch: &mut Vec<Queued>,
) -> (Vec<Value>, Vec<Awaiting>) {
    // A batch holds its first operation before it is cut (`run`): a plain
    // layout always has at least two arguments, the count and a header,
    // which is how the script tells it from a packed one (one argument).
    debug_assert!(!batch.is_empty(), "an empty batch");
    let keys: usize = 1 + batch.iter().map(|q| q.keys.len()).sum::<usize>();
    let packed = batch.len() >= PACK_FROM;
    let args: usize = match packed {
        true => 1,
        false => 1 + batch.iter().map(|q| 1 + q.args.len()).sum::<usize>(),
    };
    let mut argv: Vec<Value> = Vec::with_capacity(2 + keys + args);
    argv.push(script);
    argv.push(Value::Integer(keys as i64));
    // Cloning a key value shares its bytes.
    argv.push(horizon_key.clone());
    argv.extend(batch.iter().flat_map(|q| q.keys.iter().cloned()));
    let mut replies = Vec::with_capacity(batch.len());
    if packed {
        let bytes = batch
            .iter()
            .flat_map(|q| &q.args)
            .map(packed_len)
            .sum::<usize>();
        let mut pack = Pack::with_capacity(8 + 8 * batch.len() + bytes);
        pack.push_integer(batch.len() as i64);
        for queued in batch.drain(..) {
            pack.push_integer(queued.header);
            for arg in &queued.args {
                match arg {
                    Value::Bytes(bytes) => pack.push(bytes),
                    Value::String(text) => pack.push(text.as_bytes()),
                    Value::Integer(n) => pack.push_integer(*n),
                    // Refused at submission (`packable`).
                    _ => pack.push(b""),
                }
            }
            replies.push(queued.awaiting);
        }
        argv.push(Value::Bytes(pack.finish().into()));
    } else {
        argv.push(Value::Integer(batch.len() as i64));
        for mut queued in batch.drain(..) {
            argv.push(Value::Integer(queued.header));
            argv.append(&mut queued.args);
            replies.push(queued.awaiting);
        }
    }
    (argv, replies)
}

/// About what `arg` takes packed, to size the buffer once.
fn packed_len(arg: &Value) -> usize {
    match arg {
        Value::Bytes(bytes) => 5 + bytes.len(),
        Value::String(text) => 5 + text.len(),
        _ => 21,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::valkey::scripts::Op;
    use fred::bytes::Bytes;
    use std::time::Instant;

    fn queued(header: i64, args: Vec<Value>) -> Queued {
        Queued {
            header,
            keys: vec![Value::from("k")],
            args,
            awaiting: Awaiting {
                op: Op::Release,
                submitted: Instant::now(),
                reply: tokio::sync::oneshot::channel().0,
            },
        }
    }

    /// One operation: its count, header and arguments each a value, as
    /// before packing. Two: one value, the packed array of the same
    /// strings, integers as their digits.
    #[test]
    fn one_operation_plain_several_packed() {
        let script = Value::from("sha");
        let horizon = Value::from("h");
        let mut one = vec![queued(7, vec![Value::from("tok"), Value::Integer(30)])];
        let (argv, replies) = encode(script.clone(), &horizon, &mut one);
        assert_eq!(replies.len(), 1);
        assert_eq!(
            argv,
            vec![
                script.clone(),
                Value::Integer(2),
                horizon.clone(),
                Value::from("k"),
                Value::Integer(1),
                Value::Integer(7),
                Value::from("tok"),
                Value::Integer(30),
            ]
        );
        let mut two = vec![
            queued(7, vec![Value::from("tok"), Value::Integer(30)]),
            queued(8, vec![Value::Bytes(Bytes::from_static(b"\xff"))]),
        ];
        let (argv, replies) = encode(script.clone(), &horizon, &mut two);
        assert_eq!(replies.len(), 2);
        assert!(two.is_empty());
        let mut pack = Pack::default();
        for element in [&b"2"[..], b"7", b"tok", b"30", b"8", b"\xff"] {
            pack.push(element);
        }
        assert_eq!(
            argv,
            vec![
                script,
                Value::Integer(3),
                horizon,
                Value::from("k"),
                Value::from("k"),
                Value::Bytes(pack.finish().into()),
            ]
        );
    }
}
