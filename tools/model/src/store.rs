//! One master's keys for the model's one resource `R`, as
//! `crates/redlockd/src/redlock/keys.rs` lays them out: the lock key
//! `lock:R`, the permit keys `lock:R<0x1f>i`, the readers sorted set
//! `readers:R`, the resource's fence hash `fence:R` and the permits' fence
//! hashes `fence:R<0x1f>i`. Only the fields a safety argument reads are
//! kept (see the crate doc for what is left out).

use crate::small::Small;

/// The most permits a semaphore has in the model (limits 2 and 3).
pub const PERMITS: usize = 3;

/// A lock token: the client that drew it and which of its attempts (an
/// attempt without a request id draws a token of its own; with one, every
/// attempt is attempt 0: the token derived from the request id).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Token {
    /// The client's index.
    pub client: u8,
    /// The attempt that drew it.
    pub attempt: u8,
}

/// A key as it stands on a master: its value (the token) and, as ghost
/// state the master does not have, the round of its holder whose start the
/// key's expiry counts from (its `SET .. PX ttl` or `PEXPIRE` ran after
/// that round was sent, so the key lives at least until that round's start
/// plus the ttl; see the crate doc, "Time").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Stamp {
    /// The key's value.
    pub token: Token,
    /// The holder's round (a client's round counter) the expiry counts from.
    pub gen: u8,
}

/// What `lock:R` holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LockVal {
    /// An exclusive token (plain or multi-resource grant).
    Token(Stamp),
    /// The sentinel `'shared'` (`SHARED_SENTINEL`) while readers hold.
    Shared,
}

/// The `holder` and `fence` fields of a fence hash: the latest commit's
/// token and fence, which an Extend reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Holder {
    /// `holder`.
    pub token: Token,
    /// `fence`.
    pub fence: u8,
}

/// `fence:R`: the resource's own hash.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ResourceHash {
    /// `max`: the resource's fence counter.
    pub max: u8,
    /// `holder`, `fence`: a plain (or multi-resource) grant's record.
    pub holder: Option<Holder>,
    /// `lim`: the limit of the semaphore whose permits live beside `R`.
    pub lim: Option<u8>,
    /// `r:<token>`: each shared holder's fence.
    pub readers: Small<(Token, u8), 4>,
}

/// `fence:R<0x1f>i`: a permit's own hash.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PermitHash {
    /// `max`: the permit's own counter (read and raised only with
    /// `per_kind_fences`, the behaviour before the fix of D3).
    pub max: u8,
    /// `holder`, `fence`: the permit holder's record.
    pub holder: Option<Holder>,
}

/// A key an expiry can remove.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Key {
    /// `lock:R` (an exclusive token's; the sentinel goes with the readers).
    Lock,
    /// `lock:R<0x1f>i`.
    Permit(u8),
    /// A member of `readers:R`.
    Reader(Token),
}

/// One master's keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Store {
    /// `lock:R`.
    pub lock: Option<LockVal>,
    /// `lock:R<0x1f>i`.
    pub permits: [Option<Stamp>; PERMITS],
    /// `readers:R`'s members, sorted (their scores are the ghost stamps).
    pub readers: Small<Stamp, 4>,
    /// `fence:R`.
    pub fence: ResourceHash,
    /// `fence:R<0x1f>i`.
    pub permit_fences: [PermitHash; PERMITS],
}

impl Store {
    /// Whether a permit of the semaphore with limit `lim` stands here: the
    /// scripts' `EXISTS lock:R<0x1f>0 .. lock:R<0x1f>(lim-1)`.
    pub fn permit_of_limit_held(&self, lim: u8) -> bool {
        self.permits
            .iter()
            .take(usize::from(lim))
            .any(Option::is_some)
    }

    /// The readers set's member of `token`, if any.
    pub fn reader(&self, token: Token) -> Option<usize> {
        self.readers
            .as_slice()
            .iter()
            .position(|s| s.token == token)
    }

    /// `cover()` of `valkey/scripts/rw.rs`: the sentinel stands while a member
    /// does (and expires with the latest one), else the lock key is
    /// deleted. Only called where no exclusive token holds the key.
    pub fn cover(&mut self) {
        self.readers.sort();
        self.lock = match self.readers.is_empty() {
            true => None,
            false => Some(LockVal::Shared),
        };
    }

    /// Every key standing here, with its stamp: what a restart loses.
    pub fn stamps(&self) -> Small<Stamp, 8> {
        let mut out = Small::default();
        if let Some(LockVal::Token(s)) = self.lock {
            out.push(s);
        }
        for s in self.permits.iter().flatten().chain(self.readers.as_slice()) {
            out.push(*s);
        }
        out
    }

    /// Every key an expiry could remove now.
    pub fn keys(&self) -> Vec<(Key, Stamp)> {
        let mut out = Vec::new();
        if let Some(LockVal::Token(s)) = self.lock {
            out.push((Key::Lock, s));
        }
        for (i, p) in self.permits.iter().enumerate() {
            if let Some(s) = p {
                out.push((Key::Permit(i as u8), *s));
            }
        }
        out.extend(
            self.readers
                .as_slice()
                .iter()
                .map(|s| (Key::Reader(s.token), *s)),
        );
        out
    }

    /// The key's expiry (`PX`/`PEXPIRE` ran out): removes it and returns
    /// its stamp. A reader's expiry is its score passing: `prune` would
    /// drop it (and its fence field) and the sentinel expires with the
    /// latest member, which `cover` keeps true.
    pub fn expire(&mut self, key: Key) -> Option<Stamp> {
        match key {
            Key::Lock => match self.lock {
                Some(LockVal::Token(s)) => {
                    self.lock = None;
                    Some(s)
                }
                _ => None,
            },
            Key::Permit(i) => self.permits[usize::from(i)].take(),
            Key::Reader(token) => {
                let at = self.reader(token)?;
                let s = self.readers.remove(at);
                self.fence.readers.retain(|(t, _)| *t != token);
                self.cover();
                Some(s)
            }
        }
    }
}
