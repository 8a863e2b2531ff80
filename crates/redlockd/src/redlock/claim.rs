//! Which acquisition of a request id holds its lock now.
//!
//! All acquisitions made with one request id use one token (derived from
//! it, see [`super::Token::derive`]), so the token alone cannot tell them
//! apart: a `Hold` retried with its request id on a new connection (or
//! through another replica) resumes the very lock the first session
//! holds, and when that first session's stream finally ends, its release
//! would delete the lock under the retry. Each acquisition with a request
//! id therefore draws an [`Epoch`], and the masters keep the epoch of the
//! acquisition that holds the lock beside the token's record (the fence
//! hash's `ep`; a shared holder's `e:<token>`):
//! - a grant records its epoch with its fence (the commit, or the
//!   one-round acquire);
//! - a resuming acquisition's Extend takes the lock over
//!   ([`Claim::Take`]): it writes its epoch wherever the token holds the
//!   key;
//! - the operations an acquisition makes for itself afterwards (a session's
//!   extensions, its release, an orphaned grant's release, a failed
//!   attempt's clean-up) act only where no other epoch of the token is
//!   recorded ([`Claim::Own`]), so the acquisition that was taken over
//!   learns it lost the lock and deletes nothing of its successor's;
//! - a client's own calls with the token (unary Extend, Release, Validate)
//!   act whatever the epoch ([`Claim::Any`]): the client owns every
//!   acquisition of its request id.
//!
//! Where a master has the token's key but no record (a restart lost the
//! hash, or the grant's record landed elsewhere), nothing is known of the
//! epoch and [`Claim::Own`] acts there: at worst a superseded session
//! deletes keys of its successor on masters the successor's take-over did
//! not reach, which the successor's quorum does not count on.

use std::fmt;

/// One acquisition of a request id: 64 random bits, never zero (zero
/// stands for "none" on the masters).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Epoch(u64);

impl Epoch {
    /// A fresh epoch from the thread's RNG (uniqueness, not secrecy: the
    /// token is the secret).
    pub(crate) fn generate() -> Epoch {
        Epoch(rand::random::<u64>().max(1))
    }

    /// As the scripts receive it: lowercase hex.
    pub(crate) fn encode(self) -> String {
        format!("{:x}", self.0)
    }
}

impl fmt::Debug for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Epoch({:x})", self.0)
    }
}

/// How an Extend treats the epochs recorded on the masters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Claim {
    /// Whatever the epoch: a client's own call with its token.
    Any,
    /// Only where no other epoch of the token is recorded: an acquisition
    /// acting for itself (a session's extension).
    Own(Epoch),
    /// Wherever the token holds the key, and record this epoch: a
    /// resuming acquisition takes the lock over.
    Take(Epoch),
}

impl Claim {
    /// An acquisition's own claim, if it has an epoch; else [`Claim::Any`].
    pub(crate) fn own(epoch: Option<Epoch>) -> Claim {
        epoch.map_or(Claim::Any, Claim::Own)
    }

    /// As the extend scripts receive it: `0`, `o<hex>` or `t<hex>`.
    pub(crate) fn encode(self) -> String {
        match self {
            Claim::Any => "0".to_owned(),
            Claim::Own(epoch) => format!("o{}", epoch.encode()),
            Claim::Take(epoch) => format!("t{}", epoch.encode()),
        }
    }
}

/// An optional epoch as the scripts receive it (`0`: none).
pub(crate) fn encode(epoch: Option<Epoch>) -> String {
    epoch.map_or_else(|| "0".to_owned(), Epoch::encode)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The wire forms the scripts parse: never zero, hex, a mode letter.
    #[test]
    fn encodings() {
        let epoch = Epoch(0xab);
        assert_eq!(epoch.encode(), "ab");
        assert_eq!(encode(Some(epoch)), "ab");
        assert_eq!(encode(None), "0");
        assert_eq!(Claim::Any.encode(), "0");
        assert_eq!(Claim::Own(epoch).encode(), "oab");
        assert_eq!(Claim::Take(epoch).encode(), "tab");
        assert_eq!(Claim::own(None), Claim::Any);
        assert_eq!(Claim::own(Some(epoch)), Claim::Own(epoch));
        for _ in 0..100 {
            assert_ne!(Epoch::generate().encode(), "0");
        }
    }
}
