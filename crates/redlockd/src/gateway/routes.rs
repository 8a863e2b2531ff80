//! Which call a request is: its path and method.

use super::errors::GatewayError;
use hyper::Method;
use std::time::Duration;

/// The calls, by path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Rpc {
    Acquire,
    Extend,
    Release,
    Validate,
    /// `GET /v1/elections/{name}`: the election's leader (the name as the
    /// rest of the path, percent-decoded); with `?after=TERM`, once it has
    /// moved on from that term (`service::election::long_poll`).
    Leader {
        name: String,
        poll: Option<Poll>,
    },
}

/// A long-polled leader's query: `after=TERM` (0: no leader seen), and
/// `wait=DURATION` (`30s`, `500ms`; absent: the daemon's default, see
/// `service::election::long_poll`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Poll {
    pub(super) after: u64,
    pub(super) wait: Option<Duration>,
}

/// Where an election's leader is read.
const ELECTIONS: &str = "/v1/elections/";

/// The call at `path`, or 404; a method other than the call's (POST, GET
/// for an election's leader): 405.
pub(super) fn route(method: &Method, path: &str, query: Option<&str>) -> Result<Rpc, GatewayError> {
    if let Some(name) = path.strip_prefix(ELECTIONS) {
        let name = percent_decoded(name).ok_or_else(|| GatewayError::not_found(path))?;
        return match *method == Method::GET {
            true => Ok(Rpc::Leader {
                name,
                poll: poll(query)?,
            }),
            false => Err(GatewayError::method_not_allowed("GET")),
        };
    }
    let rpc = match path {
        "/v1/locks:acquire" => Rpc::Acquire,
        "/v1/locks:extend" => Rpc::Extend,
        "/v1/locks:release" => Rpc::Release,
        "/v1/locks:validate" => Rpc::Validate,
        _ => return Err(GatewayError::not_found(path)),
    };
    match *method == Method::POST {
        true => Ok(rpc),
        false => Err(GatewayError::method_not_allowed("POST")),
    }
}

/// A leader's query: none, or `after` with an optional `wait`; anything
/// else is refused (400) rather than ignored.
fn poll(query: Option<&str>) -> Result<Option<Poll>, GatewayError> {
    let (mut after, mut wait) = (None, None);
    for pair in query
        .unwrap_or_default()
        .split('&')
        .filter(|p| !p.is_empty())
    {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "after" => {
                let term = value.parse().map_err(|_| {
                    GatewayError::bad_query(format!("after: {value:?} is not a term (0 or more)"))
                })?;
                after = Some(term);
            }
            "wait" => {
                let duration = humantime::parse_duration(value).map_err(|_| {
                    GatewayError::bad_query(format!(
                        "wait: {value:?} is not a duration (30s, 500ms)"
                    ))
                })?;
                wait = Some(duration);
            }
            _ => {
                return Err(GatewayError::bad_query(format!(
                    "unknown parameter {key:?}: after=TERM and wait=DURATION"
                )))
            }
        }
    }
    match (after, wait) {
        (None, None) => Ok(None),
        (None, Some(_)) => Err(GatewayError::bad_query(
            "wait without after: pass the term you last saw (0: none)".into(),
        )),
        (Some(after), wait) => Ok(Some(Poll { after, wait })),
    }
}

/// `text` with its `%XX` escapes decoded; `None` when an escape is
/// malformed or the result is not UTF-8.
fn percent_decoded(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            byte => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::StatusCode;

    /// The four paths, POST only; anything else 404 or 405.
    #[test]
    fn routes() {
        let route = |method: &Method, path: &str| route(method, path, None);
        assert_eq!(route(&Method::POST, "/v1/locks:acquire"), Ok(Rpc::Acquire));
        assert_eq!(route(&Method::POST, "/v1/locks:extend"), Ok(Rpc::Extend));
        assert_eq!(route(&Method::POST, "/v1/locks:release"), Ok(Rpc::Release));
        assert_eq!(
            route(&Method::POST, "/v1/locks:validate"),
            Ok(Rpc::Validate)
        );
        let wrong = route(&Method::GET, "/v1/locks:acquire").unwrap_err();
        assert_eq!(wrong.http, StatusCode::METHOD_NOT_ALLOWED);
        let unknown = route(&Method::POST, "/v1/locks:hold").unwrap_err();
        assert_eq!(unknown.http, StatusCode::NOT_FOUND);
        assert_eq!(
            route(&Method::GET, "/v1/elections/jobs/leader%20a"),
            Ok(Rpc::Leader {
                name: "jobs/leader a".into(),
                poll: None
            })
        );
        let wrong = route(&Method::POST, "/v1/elections/jobs").unwrap_err();
        assert_eq!(wrong.http, StatusCode::METHOD_NOT_ALLOWED);
        let malformed = route(&Method::GET, "/v1/elections/a%2").unwrap_err();
        assert_eq!(malformed.http, StatusCode::NOT_FOUND);
        assert_eq!(percent_decoded("%e2%9c%93"), Some("\u{2713}".into()));
        assert_eq!(percent_decoded("%ff"), None);
    }

    /// A long poll's query: `after` (and `wait`); anything else is a 400,
    /// not ignored.
    #[test]
    fn long_poll_queries() {
        let leader = |query| route(&Method::GET, "/v1/elections/jobs", Some(query));
        let poll = |after, wait| {
            Ok(Rpc::Leader {
                name: "jobs".into(),
                poll: Some(Poll { after, wait }),
            })
        };
        assert_eq!(
            leader("after=7&wait=500ms"),
            poll(7, Some(Duration::from_millis(500)))
        );
        assert_eq!(
            leader("wait=2s&after=0"),
            poll(0, Some(Duration::from_secs(2)))
        );
        assert_eq!(leader("after=3"), poll(3, None));
        assert_eq!(
            leader(""),
            Ok(Rpc::Leader {
                name: "jobs".into(),
                poll: None
            })
        );
        for bad in [
            "wait=1s",
            "after=-1",
            "after=x",
            "after=1&wait=soon",
            "term=1",
        ] {
            let refused = leader(bad).unwrap_err();
            assert_eq!(refused.http, StatusCode::BAD_REQUEST, "{bad}: {refused:?}");
        }
    }
}
