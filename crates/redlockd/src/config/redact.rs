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
pub(crate) fn redact_url(url: &str) -> String {
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

/// Hides the password of every URL in a free text, such as a TOML parse
/// error that quotes the offending line.
///
/// A password may hold spaces and quotes (`redis://u:pa ss"word@h`), so a
/// URL's credentials are not taken to end at a space or a quote: they run
/// from its `://` to the last `@` before the next `://` on the same line.
/// Whatever lies between is hidden, so a malformed line hides too much
/// rather than too little.
pub(super) fn redact_text(text: &str) -> String {
    text.split_inclusive('\n').map(redact_line).collect()
}

/// [`redact_text`] for one line.
fn redact_line(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(pos) = rest.find("://") {
        let after = pos + 3;
        let segment_end = rest[after..].find("://").map_or(rest.len(), |i| after + i);
        match rest[after..segment_end].rfind('@') {
            Some(at) => {
                let userinfo = &rest[after..after + at];
                out.push_str(&rest[..after]);
                match userinfo.find(':') {
                    Some(colon) => {
                        out.push_str(&userinfo[..colon]);
                        out.push_str(":***");
                    }
                    None => out.push_str(userinfo),
                }
                out.push('@');
                rest = &rest[after + at + 1..];
            }
            None => {
                out.push_str(&rest[..after]);
                rest = &rest[after..];
            }
        }
    }
    out.push_str(rest);
    out
}
