//! Lock tokens: the secret that proves ownership of a lock.

use std::fmt;

/// Number of random bytes in a token (128 bits, the contract's minimum).
const TOKEN_BYTES: usize = 16;

/// A lock token: 128 bits from the operating system's CSPRNG, written as 32
/// lowercase hex characters. The same value is stored on every master, and
/// any daemon replica accepts it. `Debug` does not print it, so a token never
/// reaches a log by accident.
///
/// A shared (read) grant's token is the same 32 characters after the
/// prefix [`SHARED_PREFIX`]: the mode travels with the token, so Extend,
/// Release and Validate, which carry only the resource and the token, find
/// the holder in the right structure on the masters (`super::kinds::rw`).
///
/// A semaphore permit's token carries its semaphore's limit and its
/// permit's index after dots (`<32 hex>.<limit>.<index>`, see
/// `super::kinds::semaphore`): both are public, the 128 random bits stay the
/// secret. The limit travels with the token so that a master that lost the
/// permit's key (a restart) gets the semaphore's limit record back with
/// the key when an Extend puts it back; without it, plain locks would be
/// granted beside the permit there.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Token {
    text: String,
    /// What kind of grant the token names, read from the text once, where
    /// the token is made or parsed.
    kind: TokenKind,
}

/// The kind of grant a token names, as its text says (see [`Token`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum TokenKind {
    /// A plain (exclusive) lock of one resource.
    Plain,
    /// A shared (read) grant: the text starts with [`SHARED_PREFIX`].
    Shared,
    /// Permit `index` of a semaphore of `limit`.
    Permit {
        /// The semaphore's limit.
        limit: u32,
        /// Which of its permits, 0 to `limit` - 1.
        index: u32,
    },
    /// A lock on several resources at once (`super::kinds::multi`).
    Multi,
}

/// Why a string is not a token; checked before any master is asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// No token was given.
    #[error("must not be empty")]
    Empty,
    /// Not 32 lowercase hex characters: no daemon ever issued it.
    #[error("malformed: expected {} lowercase hex characters", TOKEN_BYTES * 2)]
    Malformed,
    /// The operating system's random source failed.
    #[error("the OS random source failed: {0}")]
    Random(String),
}

/// What starts a shared grant's token (a read lock, `super::kinds::rw`). Never
/// a hex digit, so no exclusive token looks like a shared one.
pub(crate) const SHARED_PREFIX: char = 's';

impl Token {
    /// Draws a fresh token from the OS's CSPRNG.
    pub fn generate() -> Result<Token, TokenError> {
        let mut bytes = [0u8; TOKEN_BYTES];
        getrandom::fill(&mut bytes).map_err(|e| TokenError::Random(e.to_string()))?;
        let mut text = String::with_capacity(TOKEN_BYTES * 2);
        for b in bytes {
            text.push(hex_digit(b >> 4));
            text.push(hex_digit(b & 0x0f));
        }
        Ok(Token {
            text,
            kind: TokenKind::Plain,
        })
    }

    /// A fresh token for permit `index` of a semaphore of `limit` (see
    /// `super::kinds::semaphore`): a generated token, then the limit and the
    /// index in decimal, each after a dot.
    pub fn generate_permit(index: u32, limit: u32) -> Result<Token, TokenError> {
        let random = Token::generate()?.text;
        Ok(Token {
            text: format!("{random}.{limit}.{index}"),
            kind: TokenKind::Permit { limit, index },
        })
    }

    /// A token of `kind` with the text `text` (already checked to be one).
    pub(super) fn of_kind(text: String, kind: TokenKind) -> Token {
        Token { text, kind }
    }

    /// What kind of grant the token names.
    pub(crate) fn kind(&self) -> TokenKind {
        self.kind
    }

    /// The permit index a semaphore permit's token carries; `None` for a
    /// plain lock's token.
    pub fn permit(&self) -> Option<u32> {
        match self.kind {
            TokenKind::Permit { index, .. } => Some(index),
            _ => None,
        }
    }

    /// The semaphore's limit a permit's token carries; `None` for any
    /// other token.
    pub fn limit(&self) -> Option<u32> {
        match self.kind {
            TokenKind::Permit { limit, .. } => Some(limit),
            _ => None,
        }
    }

    /// Accepts a token a client sent back, if it has the shape of one we issue.
    pub(crate) fn parse(text: &str) -> Result<Token, TokenError> {
        if text.is_empty() {
            return Err(TokenError::Empty);
        }
        // A permit's token (`<random>.<index>`), a shared holder's
        // (`s<random>`) and a multi-resource lock's (`<random>:<hex list>`)
        // differ by their separator or prefix, so no text is two of them.
        let shared = text.starts_with(SHARED_PREFIX);
        let unprefixed = text.strip_prefix(SHARED_PREFIX).unwrap_or(text);
        let kind = match unprefixed.split_once('.') {
            Some((random, rest)) => match rest.split_once('.') {
                Some((limit, index)) if !shared && is_random(random) => {
                    match (permit_number(limit), permit_number(index)) {
                        (Some(limit), Some(index)) => Some(TokenKind::Permit { limit, index }),
                        _ => None,
                    }
                }
                _ => None,
            },
            None if is_random(unprefixed) => Some(match shared {
                true => TokenKind::Shared,
                false => TokenKind::Plain,
            }),
            None => None,
        };
        let kind = kind.or_else(|| well_formed(text).then_some(TokenKind::Multi));
        match kind {
            Some(kind) => Ok(Token {
                text: text.to_owned(),
                kind,
            }),
            None => Err(TokenError::Malformed),
        }
    }

    /// The token's text, for the masters and the caller only (never for logs).
    pub fn expose(&self) -> &str {
        &self.text
    }

    /// This token as a shared grant's (prefixed with [`SHARED_PREFIX`]);
    /// unchanged if it already is one.
    pub(crate) fn into_shared(self) -> Token {
        if self.is_shared() {
            return self;
        }
        Token {
            text: format!("{SHARED_PREFIX}{}", self.text),
            kind: TokenKind::Shared,
        }
    }

    /// Whether this token names a shared (read) grant.
    pub(crate) fn is_shared(&self) -> bool {
        self.kind == TokenKind::Shared
    }
}

/// Between the random part of a multi-resource token and its resources
/// (the token of a lock on several resources, `super::kinds::multi`).
const SEPARATOR: char = ':';

/// Between two resources in a token's list (a control character: no
/// resource name contains it).
const BETWEEN: char = '\n';

/// Longest token accepted at all (the service holds a token's list to
/// `redlock.max_resources_per_lock` and `max_resource_len` as well).
const MAX_TOKEN_LEN: usize = 1 << 20;

/// The token of a lock on `resources`: `random`'s text, [`SEPARATOR`], then the
/// resources joined by [`BETWEEN`], in lowercase hex (`super::kinds::multi`).
pub(crate) fn token_for(random: &Token, resources: &[String]) -> Token {
    let list = resources.join(&BETWEEN.to_string());
    let text = format!("{}{SEPARATOR}{}", random.expose(), hex::encode(list));
    Token::of_kind(text, TokenKind::Multi)
}

/// The resources a multi-resource token names, in the order asked; `None`
/// for a plain token.
pub(crate) fn members(token: &Token) -> Option<Vec<String>> {
    match token.kind() {
        TokenKind::Multi => decode(token.expose()),
        _ => None,
    }
}

/// Whether `text` has the shape of a multi-resource token (see
/// [`token_for`]): for `Token::parse`.
fn well_formed(text: &str) -> bool {
    text.len() <= MAX_TOKEN_LEN && decode(text).is_some()
}

/// The resources of a multi-resource token's text, if it is one.
fn decode(text: &str) -> Option<Vec<String>> {
    let (random, list) = text.split_once(SEPARATOR)?;
    if random.len() != 32 || !is_lower_hex(random) || !is_lower_hex(list) {
        return None;
    }
    let list = String::from_utf8(hex::decode(list).ok()?).ok()?;
    let names: Vec<String> = list.split(BETWEEN).map(str::to_owned).collect();
    let mut seen = std::collections::HashSet::new();
    let valid = names
        .iter()
        .all(|n| !n.is_empty() && !n.chars().any(char::is_control) && seen.insert(n.as_str()));
    valid.then_some(names)
}

/// Shortest and longest request id accepted (see [`RequestId`]).
const REQUEST_ID_LEN: std::ops::RangeInclusive<usize> = 22..=64;

/// A client-chosen idempotency key of an Acquire (`AcquireRequest.request_id`):
/// 22 to 64 characters of the URL-safe base64 or hex alphabets
/// (`A-Z a-z 0-9 - _`). The client must put at least 128 random bits in it
/// (22 base64 or 32 hex characters); the daemon cannot check that, only the
/// shape. It is a secret like a token: whoever knows it (and the resource)
/// can release the lock, so `Debug` does not print it and nothing logs it.
#[derive(Clone, PartialEq, Eq)]
pub struct RequestId(String);

/// Why a string is not a request id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("must be 22 to 64 characters of A-Z, a-z, 0-9, '-' and '_' (at least 128 random bits)")]
pub struct RequestIdError;

impl RequestId {
    /// Accepts a client's request id if it has the required shape.
    pub fn parse(text: &str) -> Result<RequestId, RequestIdError> {
        let well_formed = REQUEST_ID_LEN.contains(&text.len())
            && text
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if well_formed {
            Ok(RequestId(text.to_owned()))
        } else {
            Err(RequestIdError)
        }
    }
}

impl fmt::Debug for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("RequestId(<redacted>)")
    }
}

impl Token {
    /// The token of every acquisition made with `request_id` on `resource`:
    /// the first 128 bits, in hex, of
    /// `SHA-256("redlockd/v1/token" 0x00 resource 0x00 request_id)`.
    ///
    /// Why derived and not stored: every daemon replica computes the same
    /// token with no shared state, so a retried Acquire (through any
    /// replica) finds the lock its request id already holds, and a caller
    /// that never saw the answer computes the token and Releases or
    /// Validates with it. The derivation is public (clients implement it);
    /// the token stays unguessable because the request id carries at least
    /// 128 secret random bits. The resource is in the hash so that one
    /// request id reused on two resources never names one lock twice.
    pub fn derive(request_id: &RequestId, resource: &str) -> Token {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        hash.update(b"redlockd/v1/token\0");
        hash.update(resource.as_bytes());
        hash.update(b"\0");
        hash.update(request_id.0.as_bytes());
        let digest = hash.finalize();
        let mut text = String::with_capacity(TOKEN_BYTES * 2);
        for &b in digest.iter().take(TOKEN_BYTES) {
            text.push(hex_digit(b >> 4));
            text.push(hex_digit(b & 0x0f));
        }
        Token {
            text,
            kind: TokenKind::Plain,
        }
    }
}

/// A permit's limit or index as issued: decimal, no leading zero, at most
/// 5 digits (far above any configurable limit).
fn permit_number(text: &str) -> Option<u32> {
    let well_formed = (1..=5).contains(&text.len())
        && text.bytes().all(|b| b.is_ascii_digit())
        && (text == "0" || !text.starts_with('0'));
    well_formed.then(|| text.parse().ok()).flatten()
}

/// Whether `text` is a token's random part: 32 lowercase hex digits.
fn is_random(text: &str) -> bool {
    text.len() == TOKEN_BYTES * 2 && is_lower_hex(text)
}

/// Whether `text` is all lowercase hex digits.
fn is_lower_hex(text: &str) -> bool {
    text.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn hex_digit(nibble: u8) -> char {
    char::from(b"0123456789abcdef"[usize::from(nibble & 0x0f)])
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

#[cfg(test)]
mod tests;
