//! What goes over the wire to a master and back: the shared bytes of a
//! round's keys, command arguments, and decoding replies and errors.

use crate::redlock::master::{Record, Seen};
use crate::redlock::{LockKeys, NodeError, Token};
use fred::bytes::Bytes;
use fred::prelude::{ErrorKind, Value};
use std::time::Duration;

pub(super) fn key(name: &str) -> Value {
    Value::from(name)
}

/// The strings every master's command about one subject carries, as shared
/// bytes: copied once per round, then cloned (a reference count) for each
/// master (see `LockKeys::encoded`).
pub(super) struct Wire {
    pub(super) lock: Bytes,
    pub(super) fence: Bytes,
    pub(super) base_fence: Bytes,
    pub(super) channel: Bytes,
    pub(super) token: Bytes,
}

impl Wire {
    /// `keys`' cached encoding, made now from them and `token` if this is
    /// the round's first command.
    pub(super) fn of<'k>(keys: &'k LockKeys, token: &Token) -> Option<&'k Wire> {
        let bytes = |s: &str| Bytes::copy_from_slice(s.as_bytes());
        keys.encoded.get_or_init(|| Wire {
            lock: bytes(&keys.lock),
            fence: bytes(&keys.fence),
            base_fence: bytes(&keys.base_fence),
            channel: bytes(&keys.channel),
            token: bytes(token.expose()),
        })
    }
}

/// `current` as a command argument: the cached copy if it still says the
/// same (always, unless a field changed after the cache was made), else a
/// fresh one.
pub(super) fn shared(cached: Option<&Bytes>, current: &str) -> Value {
    match cached {
        Some(bytes) if bytes.as_ref() == current.as_bytes() => Value::Bytes(bytes.clone()),
        _ => Value::from(current),
    }
}

/// A permit's semaphore limit as its token carries it, for the scripts that
/// keep the limit record beside a permit's key; '0' for any other token.
pub(super) fn permit_limit(token: &Token) -> Value {
    Value::String(token.limit().unwrap_or(0).to_string().into())
}

pub(super) fn millis(duration: Duration) -> Value {
    Value::Integer(i64::try_from(duration.as_millis()).unwrap_or(i64::MAX))
}

pub(super) fn node_error(error: fred::error::Error) -> NodeError {
    match error.kind() {
        ErrorKind::Timeout => NodeError::Timeout,
        ErrorKind::IO | ErrorKind::Canceled | ErrorKind::Backpressure | ErrorKind::Routing => {
            NodeError::Unavailable(error.details().to_owned())
        }
        _ => NodeError::Server(error.details().to_owned()),
    }
}

pub(super) fn array(value: Value) -> Result<Vec<Value>, NodeError> {
    match value {
        Value::Array(fields) => Ok(fields),
        other => Err(NodeError::Protocol(format!(
            "expected an array, got {other:?}"
        ))),
    }
}

pub(super) fn integer(value: &Value) -> Result<i64, NodeError> {
    match value {
        Value::Integer(i) => Some(*i),
        Value::String(s) => s.parse().ok(),
        Value::Bytes(b) => std::str::from_utf8(b).ok().and_then(|s| s.parse().ok()),
        _ => None,
    }
    .ok_or_else(|| NodeError::Protocol(format!("expected an integer, got {value:?}")))
}

pub(super) fn unsigned(value: &Value) -> Result<u64, NodeError> {
    u64::try_from(integer(value)?)
        .map_err(|_| NodeError::Protocol(format!("expected a non-negative integer, got {value:?}")))
}

/// The inspect script's reply (see `super::scripts::INSPECT`) as a [`Seen`].
pub(super) fn seen(fields: Vec<Value>) -> Result<Option<Seen>, NodeError> {
    let text = |v: &Value| v.as_string().unwrap_or_default();
    match fields.as_slice() {
        [_] => Ok(None),
        [token, pttl, holder, fence, owner, kind, at, proclaimed] => {
            let token = text(token);
            let fence = text(fence);
            let record = (text(holder) == token && !fence.is_empty()).then(|| Record {
                version: owner_version(&text(proclaimed), &fence),
                fence: fence.parse().unwrap_or(0),
                owner: text(owner),
                kind: text(kind),
                at_micros: text(at).parse().unwrap_or(0),
            });
            Ok(Some(Seen {
                token,
                // -1 (no expiry: set by hand) reads as no time left.
                pttl: Duration::from_millis(u64::try_from(integer(pttl)?).unwrap_or(0)),
                record,
            }))
        }
        _ => Err(NodeError::Protocol("inspect: unexpected reply".into())),
    }
}

/// The version of a record's owner: the `version` of a `pv` of
/// `term:version` written by `Proclaim` for this grant's fence, else 0 (the
/// campaign's own value, or a `pv` left by an earlier grant, see
/// `super::scripts::PROCLAIM`).
fn owner_version(proclaimed: &str, fence: &str) -> u64 {
    match proclaimed.split_once(':') {
        Some((term, version)) if term == fence => version.parse().unwrap_or(0),
        _ => 0,
    }
}

/// Appends a script's optional arguments (read as `OPT[n]`, see
/// `super::scripts::batch_script`) up to the last one set: the ones before
/// it that are not set go as `'0'`, the ones after it not at all.
pub(super) fn push_optional<const N: usize>(args: &mut Vec<Value>, optional: [Option<Value>; N]) {
    let Some(last) = optional.iter().rposition(Option::is_some) else {
        return;
    };
    let zero = || Value::Bytes(Bytes::from_static(b"0"));
    args.extend(
        optional
            .into_iter()
            .take(last + 1)
            .map(|value| value.unwrap_or_else(zero)),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Proclaim's version counts for the grant of its own term only: a
    /// `pv` an earlier grant left (another term), or none, is version 0.
    #[test]
    fn owner_versions_of_this_term_only() {
        assert_eq!(owner_version("17:3", "17"), 3);
        assert_eq!(owner_version("12:9", "17"), 0);
        assert_eq!(owner_version("", "17"), 0);
        assert_eq!(owner_version("17:x", "17"), 0);
        assert_eq!(owner_version("173", "17"), 0);
    }

    /// A round's commands share one copy of the keys and token; a cached
    /// string that no longer says what its field says is never sent.
    #[test]
    fn keys_are_encoded_once_per_subject_and_never_stale() {
        let token = Token::generate().expect("OS RNG");
        let mut keys = LockKeys::new("redlock:", "orders/42");
        let first = Wire::of(&keys, &token).expect("made") as *const Wire;
        let again = Wire::of(&keys, &token).expect("cached") as *const Wire;
        assert_eq!(first, again, "made once, then reused");
        let wire = Wire::of(&keys, &token);
        let lock = shared(wire.map(|w| &w.lock), &keys.lock);
        assert_eq!(lock.as_str().as_deref(), Some("redlock:lock:orders/42"));
        assert!(matches!(lock, Value::Bytes(_)), "the shared copy");
        let other = Token::generate().expect("OS RNG");
        let sent = shared(wire.map(|w| &w.token), other.expose());
        assert_eq!(sent.as_str().as_deref(), Some(other.expose()));
        // A field changed after the cache was made: its current value goes.
        keys.lock = "redlock:lock:other".into();
        let wire = Wire::of(&keys, &token);
        let lock = shared(wire.map(|w| &w.lock), &keys.lock);
        assert_eq!(lock.as_str().as_deref(), Some("redlock:lock:other"));
        // A clone starts without the cache (and compares equal).
        assert_eq!(keys.clone(), keys);
    }

    /// The inspect script's replies: absent, held with this token's record,
    /// held with another token's record (no record shown).
    #[test]
    fn inspect_replies() {
        let s = |t: &str| Value::String(t.to_owned().into());
        assert_eq!(seen(vec![s("")]).expect("absent"), None);
        let held = seen(vec![
            s("tok"),
            Value::Integer(1500),
            s("tok"),
            s("42"),
            s("cron"),
            s("unary"),
            s("1700000000000000"),
            s("42:2"),
        ])
        .expect("held")
        .expect("some");
        assert_eq!(held.pttl, Duration::from_millis(1500));
        let record = held.record.expect("this token's record");
        assert_eq!((record.fence, record.owner.as_str()), (42, "cron"));
        assert_eq!(record.version, 2);
        assert_eq!(record.at_micros, 1_700_000_000_000_000);
        let other = seen(vec![
            s("tok"),
            Value::Integer(-1),
            s("older"),
            s("41"),
            s(""),
            s(""),
            s(""),
            s(""),
        ])
        .expect("held")
        .expect("some");
        assert_eq!((other.record, other.pttl), (None, Duration::ZERO));
        assert!(seen(vec![s("a"), s("b")]).is_err());
    }
}
