//! Password redaction for master URLs, so that no error, warning or `Debug`
//! output of the configuration ever prints a secret.

/// Hides the password of a node URL so it can be shown in errors and logs:
/// `redis://user:secret@host:6379/0` becomes `redis://user:***@host:6379/0`
/// (and `redis://:secret@host` becomes `redis://:***@host`).
///
/// A URL without a password, including one with only a user name
/// (`redis://user@host`, which Valkey/Redis clients send as a user name),
/// comes back unchanged. To err on the side of hiding too much, the
/// credentials are taken to end at the *last* `@`, and a string without
/// `://` is treated as starting with them, so a malformed URL does not leak
/// its password either.
pub fn redact_url(url: &str) -> String {
    let start = url.find("://").map_or(0, |i| i + 3);
    let rest = &url[start..];
    let Some(at) = rest.rfind('@') else {
        return url.to_owned();
    };
    let userinfo = &rest[..at];
    match userinfo.find(':') {
        Some(colon) => format!("{}{}:***{}", &url[..start], &userinfo[..colon], &rest[at..]),
        None => url.to_owned(),
    }
}

/// Applies [`redact_url`] to every URL-looking word of a free text, such as
/// a TOML parse error that quotes the offending line.
pub(super) fn redact_text(text: &str) -> String {
    let is_scheme_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.');
    let ends_word = |c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '`');
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find("://") {
        let start = rest[..pos]
            .char_indices()
            .rev()
            .find(|&(_, c)| !is_scheme_char(c))
            .map_or(0, |(i, c)| i + c.len_utf8());
        let end = rest[pos + 3..]
            .find(ends_word)
            .map_or(rest.len(), |i| pos + 3 + i);
        out.push_str(&rest[..start]);
        out.push_str(&redact_url(&rest[start..end]));
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}
