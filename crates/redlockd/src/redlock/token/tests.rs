//! Tokens: generated, derived from a request id, parsed back, and the
//! multi-resource token's list.

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
