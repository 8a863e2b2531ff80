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
pub enum TokenKind {
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
    pub fn kind(&self) -> TokenKind {
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
    pub fn parse(text: &str) -> Result<Token, TokenError> {
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
    pub fn into_shared(self) -> Token {
        if self.is_shared() {
            return self;
        }
        Token {
            text: format!("{SHARED_PREFIX}{}", self.text),
            kind: TokenKind::Shared,
        }
    }

    /// Whether this token names a shared (read) grant.
    pub fn is_shared(&self) -> bool {
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
mod tests {
    use super::*;

    /// Generated tokens parse back, differ, and never show in Debug output.
    #[test]
    fn generate_parse_roundtrip() {
        let a = Token::generate().expect("OS RNG");
        let b = Token::generate().expect("OS RNG");
        assert_ne!(a, b);
        assert_eq!(Token::parse(a.expose()), Ok(a.clone()));
        assert!(!format!("{a:?}").contains(a.expose()));
    }

    const DERIVED_VECTOR: &str = "df346cfde84a8078cf125d1c05366bf4";

    /// A derived token is a well-formed token, the same for the same
    /// request id and resource, different otherwise; it matches the
    /// documented derivation (the value the client packages compute).
    #[test]
    fn derived_tokens() {
        let id = RequestId::parse("AAAAAAAAAAAAAAAAAAAAAA").expect("22 base64 chars");
        let other = RequestId::parse(&"0f".repeat(16)).expect("32 hex chars");
        let token = Token::derive(&id, "orders/42");
        assert_eq!(Token::parse(token.expose()), Ok(token.clone()));
        assert_eq!(token, Token::derive(&id, "orders/42"));
        assert_ne!(token, Token::derive(&id, "orders/43"));
        assert_ne!(token, Token::derive(&other, "orders/42"));
        // printf 'redlockd/v1/token\0orders/42\0AAAAAAAAAAAAAAAAAAAAAA' | sha256sum | cut -c1-32
        assert_eq!(token.expose(), DERIVED_VECTOR);
        assert!(!format!("{id:?}").contains("AAAA"));
    }

    /// Request ids: length 22 to 64, URL-safe base64 or hex alphabet.
    #[test]
    fn request_id_shape() {
        assert!(RequestId::parse(&"a".repeat(21)).is_err());
        assert!(RequestId::parse(&"a".repeat(22)).is_ok());
        assert!(RequestId::parse(&"Z-_9".repeat(16)).is_ok());
        assert!(RequestId::parse(&"a".repeat(65)).is_err());
        assert!(RequestId::parse(&format!("{}=", "a".repeat(22))).is_err());
        assert!(RequestId::parse(&format!("{}/", "a".repeat(22))).is_err());
        assert!(RequestId::parse("").is_err());
    }

    /// Wrong length, case or alphabet is rejected.
    #[test]
    fn rejects_malformed() {
        assert_eq!(Token::parse(""), Err(TokenError::Empty));
        assert_eq!(Token::parse("abc"), Err(TokenError::Malformed));
        assert_eq!(Token::parse(&"A".repeat(32)), Err(TokenError::Malformed));
        assert_eq!(Token::parse(&"g".repeat(32)), Err(TokenError::Malformed));
        assert_eq!(Token::parse(&"a".repeat(33)), Err(TokenError::Malformed));
        assert!(Token::parse(&"0f".repeat(16)).is_ok());
        assert_eq!(
            Token::parse(&format!("S{}", "0f".repeat(16))),
            Err(TokenError::Malformed)
        );
        assert_eq!(Token::parse("s"), Err(TokenError::Malformed));
    }

    /// A shared token is the prefix and 32 hex characters; it parses back
    /// as shared, and an exclusive one never is.
    #[test]
    fn shared_tokens() {
        let plain = Token::generate().expect("OS RNG");
        assert!(!plain.is_shared());
        let shared = plain.clone().into_shared();
        assert!(shared.is_shared());
        assert_eq!(shared.expose().len(), 33);
        assert_eq!(shared.clone().into_shared(), shared);
        assert_eq!(Token::parse(shared.expose()), Ok(shared.clone()));
        assert!(Token::parse(shared.expose()).expect("parses").is_shared());
        assert_eq!(&shared.expose()[1..], plain.expose());
    }

    /// Each kind is read from the text once, where the token is parsed or
    /// made, and every form parses back to its own kind.
    #[test]
    fn kinds() {
        let plain = Token::generate().expect("OS RNG");
        let shared = plain.clone().into_shared();
        let permit = Token::generate_permit(1, 3).expect("OS RNG");
        let multi = token_for(&plain, &["a".to_owned(), "b".to_owned()]);
        for (token, kind) in [
            (&plain, TokenKind::Plain),
            (&shared, TokenKind::Shared),
            (&permit, TokenKind::Permit { limit: 3, index: 1 }),
            (&multi, TokenKind::Multi),
        ] {
            assert_eq!(token.kind(), kind);
            assert_eq!(Token::parse(token.expose()).map(|t| t.kind()), Ok(kind));
        }
        let hex = "0f".repeat(16);
        assert_eq!(
            Token::parse(&format!("s{hex}.2.1")),
            Err(TokenError::Malformed),
            "no shared permit"
        );
    }

    /// Permit tokens: a token, then the limit and the index after dots;
    /// both are read back, and malformed suffixes are refused.
    #[test]
    fn permit_tokens() {
        let t = Token::generate_permit(7, 9).expect("OS RNG");
        assert_eq!((t.permit(), t.limit()), (Some(7), Some(9)));
        assert_eq!(Token::parse(t.expose()), Ok(t.clone()));
        let plain = Token::generate().expect("OS RNG");
        assert_eq!((plain.permit(), plain.limit()), (None, None));
        let hex = "0f".repeat(16);
        assert_eq!(
            Token::parse(&format!("{hex}.2.0")).map(|t| (t.permit(), t.limit())),
            Ok((Some(0), Some(2)))
        );
        for bad in [
            ".",
            ".0",
            ".2.01",
            ".x.1",
            ".2.x",
            ".2.123456",
            ".2.-1",
            ".1.2.3",
            ".2.",
            "..1",
        ] {
            assert_eq!(
                Token::parse(&format!("{hex}{bad}")),
                Err(TokenError::Malformed),
                "{bad}"
            );
        }
        assert_eq!(Token::parse("ab.1"), Err(TokenError::Malformed));
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    /// A multi-resource token parses, names its resources in order, and
    /// differs from a plain token; a plain token names none.
    #[test]
    fn token_names_its_resources() {
        let random = Token::generate().expect("OS RNG");
        let token = token_for(&random, &names(&["b/1", "a é", "c"]));
        let parsed = Token::parse(token.expose()).expect("well formed");
        assert_eq!(members(&parsed), Some(names(&["b/1", "a é", "c"])));
        assert!(token.expose().starts_with(random.expose()));
        assert_eq!(members(&random), None);
        assert!(!format!("{token:?}").contains(random.expose()));
    }

    /// Tampered or malformed lists are not tokens.
    #[test]
    fn malformed_lists() {
        let random = "0123456789abcdef0123456789abcdef";
        for bad in [
            format!("{random}:"),
            format!("{random}:zz"),
            format!("{random}:ABCD"),
            format!("{random}:{}", hex::encode("a\n\nb")),
            format!("{random}:{}", hex::encode("a\na")),
            format!("{random}:{}", hex::encode("a\tb")),
            format!("{}:{}", &random[1..], hex::encode("a")),
            format!("{random}:{}", "f".repeat(MAX_TOKEN_LEN)),
        ] {
            assert!(Token::parse(&bad).is_err(), "{bad}");
        }
        assert!(Token::parse(&format!("{random}:{}", hex::encode("a\nb"))).is_ok());
        // A semaphore permit's token (`.`, a decimal limit, `.` and a
        // decimal index) is never read as a list, even where the numbers
        // are valid hex ("41" = "A").
        let permit = Token::parse(&format!("{random}.42.41")).expect("a permit's token");
        assert_eq!(members(&permit), None);
        assert_eq!(permit.permit(), Some(41));
    }
}
