//! Which call a request is: its path and method.

use super::errors::GatewayError;
use hyper::Method;

/// The calls, by path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Rpc {
    Acquire,
    Extend,
    Release,
    Validate,
    /// `GET /v1/elections/{name}`: the election's leader (the name as the
    /// rest of the path, percent-decoded).
    Leader(String),
}

/// Where an election's leader is read.
const ELECTIONS: &str = "/v1/elections/";

/// The call at `path`, or 404; a method other than the call's (POST, GET
/// for an election's leader): 405.
pub(super) fn route(method: &Method, path: &str) -> Result<Rpc, GatewayError> {
    if let Some(name) = path.strip_prefix(ELECTIONS) {
        let name = percent_decoded(name).ok_or_else(|| GatewayError::not_found(path))?;
        return match *method == Method::GET {
            true => Ok(Rpc::Leader(name)),
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
            Ok(Rpc::Leader("jobs/leader a".into()))
        );
        let wrong = route(&Method::POST, "/v1/elections/jobs").unwrap_err();
        assert_eq!(wrong.http, StatusCode::METHOD_NOT_ALLOWED);
        let malformed = route(&Method::GET, "/v1/elections/a%2").unwrap_err();
        assert_eq!(malformed.http, StatusCode::NOT_FOUND);
        assert_eq!(percent_decoded("%e2%9c%93"), Some("\u{2713}".into()));
        assert_eq!(percent_decoded("%ff"), None);
    }
}
