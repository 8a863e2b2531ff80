//! Lock tokens: the secret that proves ownership of a lock.

use std::fmt;

/// Number of random bytes in a token (128 bits, the contract's minimum).
const TOKEN_BYTES: usize = 16;

/// A lock token: 128 bits from the operating system's CSPRNG, written as 32
/// lowercase hex characters. The same value is stored on every master, and
/// any daemon replica accepts it. `Debug` does not print it, so a token never
/// reaches a log by accident.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Token(String);

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
        Ok(Token(text))
    }

    /// Accepts a token a client sent back, if it has the shape of one we issue.
    pub fn parse(text: &str) -> Result<Token, TokenError> {
        if text.is_empty() {
            return Err(TokenError::Empty);
        }
        let well_formed = text.len() == TOKEN_BYTES * 2
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        if well_formed {
            Ok(Token(text.to_owned()))
        } else {
            Err(TokenError::Malformed)
        }
    }

    /// The token's text, for the masters and the caller only (never for logs).
    pub fn expose(&self) -> &str {
        &self.0
    }
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

    /// Wrong length, case or alphabet is rejected.
    #[test]
    fn rejects_malformed() {
        assert_eq!(Token::parse(""), Err(TokenError::Empty));
        assert_eq!(Token::parse("abc"), Err(TokenError::Malformed));
        assert_eq!(Token::parse(&"A".repeat(32)), Err(TokenError::Malformed));
        assert_eq!(Token::parse(&"g".repeat(32)), Err(TokenError::Malformed));
        assert_eq!(Token::parse(&"a".repeat(33)), Err(TokenError::Malformed));
        assert!(Token::parse(&"0f".repeat(16)).is_ok());
    }
}
