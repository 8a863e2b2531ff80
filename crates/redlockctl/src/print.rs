//! What the single calls print on stdout: shell assignments that `eval`
//! can read (`REDLOCK_TOKEN=...`, the names `run` gives its command), or
//! with `--json` one JSON object on one line.

use redlockd_client::{Lock, Validation};
use std::time::Duration;

/// A granted or extended lock.
pub(crate) fn lock(lock: &Lock, json: bool) -> String {
    lock_fields(
        lock.resource(),
        lock.token(),
        lock.fence(),
        lock.validity(),
        json,
    )
}

/// A lock from its fields: the token is printed on purpose (stdout, for
/// `eval` or a script that releases it later).
fn lock_fields(resource: &str, token: &str, fence: u64, validity: Duration, json: bool) -> String {
    let validity_ms = validity.as_millis();
    if json {
        format!(
            "{{\"resource\":{},\"token\":{},\"fence\":{fence},\"validity_ms\":{validity_ms}}}",
            json_string(resource),
            json_string(token),
        )
    } else {
        format!(
            "REDLOCK_RESOURCE={}\nREDLOCK_TOKEN={}\nREDLOCK_FENCE={fence}\nREDLOCK_VALIDITY_MS={validity_ms}",
            shell_word(resource),
            shell_word(token),
        )
    }
}

/// A `Validate` answer.
pub(crate) fn validity(answer: &Validation, json: bool) -> String {
    let validity_ms = answer.validity.as_millis();
    if json {
        format!("{{\"held\":{},\"validity_ms\":{validity_ms}}}", answer.held)
    } else {
        format!(
            "REDLOCK_HELD={}\nREDLOCK_VALIDITY_MS={validity_ms}",
            answer.held
        )
    }
}

/// A `Release` answer; nothing in text mode (the exit status says it).
pub(crate) fn released(was_held: bool, json: bool) -> Option<String> {
    json.then(|| format!("{{\"was_held\":{was_held}}}"))
}

/// `text` as one shell word: bare when it is plainly safe, else in single
/// quotes (a `'` inside becomes `'\''`).
pub(crate) fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_@%+=:,./-".contains(&b));
    if plain {
        text.to_owned()
    } else {
        format!("'{}'", text.replace('\'', r"'\''"))
    }
}

/// `text` as a JSON string.
pub(crate) fn json_string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Resource names survive `eval` whatever they contain.
    #[test]
    fn shell_words() {
        assert_eq!(shell_word("orders/42"), "orders/42");
        assert_eq!(shell_word("a b"), "'a b'");
        assert_eq!(shell_word("it's"), r"'it'\''s'");
        assert_eq!(shell_word("$(rm -rf /)"), "'$(rm -rf /)'");
        assert_eq!(shell_word(""), "''");
    }

    /// JSON strings escape quotes, backslashes and control characters.
    #[test]
    fn json_strings() {
        assert_eq!(json_string(r#"a"b\c"#), r#""a\"b\\c""#);
        assert_eq!(json_string("x\u{1}"), r#""x\u0001""#);
        assert_eq!(json_string("é"), "\"é\"");
    }

    /// A lock prints as assignments or as one JSON line.
    #[test]
    fn lock_output() {
        let validity = Duration::from_millis(1_500);
        assert_eq!(
            lock_fields("jobs/nightly", "ab", 7, validity, false),
            "REDLOCK_RESOURCE=jobs/nightly\nREDLOCK_TOKEN=ab\nREDLOCK_FENCE=7\nREDLOCK_VALIDITY_MS=1500"
        );
        assert_eq!(
            lock_fields("jobs/nightly", "ab", 7, validity, true),
            r#"{"resource":"jobs/nightly","token":"ab","fence":7,"validity_ms":1500}"#
        );
    }
}
