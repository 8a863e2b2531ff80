//! The daemon's address as given (`HOST:PORT`, `http://HOST:PORT`,
//! `https://HOST:PORT`): the URI connected to and whether it is TLS; and
//! transport errors in words.

use crate::error::Error;

/// The URI to connect to for `addr`, and whether it is TLS: `https://`, or
/// a bare `HOST:PORT` with TLS settings.
pub(crate) fn target(addr: &str, wants_tls: bool) -> Result<(String, bool), Error> {
    let addr = addr.trim().trim_end_matches('/');
    if addr.is_empty() {
        return Err(Error::invalid("addr", "must not be empty"));
    }
    if let Some(rest) = addr.strip_prefix("https://") {
        return Ok((format!("https://{rest}"), true));
    }
    if let Some(rest) = addr.strip_prefix("http://") {
        if wants_tls {
            return Err(Error::invalid(
                "addr",
                format!("{addr}: TLS settings need https://HOST:PORT (or a bare HOST:PORT)"),
            ));
        }
        return Ok((format!("http://{rest}"), false));
    }
    if addr.contains("://") {
        return Err(Error::invalid(
            "addr",
            format!("{addr}: give HOST:PORT, http://HOST:PORT or https://HOST:PORT"),
        ));
    }
    let scheme = if wants_tls { "https" } else { "http" };
    Ok((format!("{scheme}://{addr}"), wants_tls))
}

/// An error and its sources, joined: tonic's transport errors say little
/// at the top ("transport error").
pub(crate) fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The address forms redlockctl takes, and the TLS rule.
    #[test]
    fn targets() {
        let ok = |addr: &str, tls: bool| target(addr, tls).expect(addr);
        assert_eq!(
            ok("127.0.0.1:50051", false),
            ("http://127.0.0.1:50051".into(), false)
        );
        assert_eq!(ok("http://h:1/", false), ("http://h:1".into(), false));
        assert_eq!(ok("https://h:1", false), ("https://h:1".into(), true));
        assert_eq!(ok("h:1", true), ("https://h:1".into(), true));
        for (addr, tls) in [("", false), ("http://h:1", true), ("unix:///x", false)] {
            let error = target(addr, tls).expect_err(addr);
            assert_eq!(error.field(), Some("addr"), "{addr}: {error}");
        }
    }
}
