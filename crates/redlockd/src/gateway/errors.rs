//! How a failed HTTP call is answered: the gRPC status the same call would
//! have got (decided in `service::status`, as for gRPC), told with the
//! standard gRPC-to-HTTP status mapping and a JSON body
//! `{"code": <gRPC code number>, "message": "..."}`.

use super::json::JsonError;
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{header, Response, StatusCode};
use tonic::{Code, Status};

/// A refused or failed HTTP call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GatewayError {
    /// The HTTP status.
    pub(crate) http: StatusCode,
    /// The gRPC code in the body.
    pub(crate) code: Code,
    /// What went wrong; never a token.
    pub(crate) message: String,
}

impl GatewayError {
    /// No such path: NOT_FOUND, 404.
    pub(crate) fn not_found(path: &str) -> GatewayError {
        GatewayError {
            http: StatusCode::NOT_FOUND,
            code: Code::NotFound,
            message: format!(
                "no such path {path:?}: POST /v1/locks:acquire, /v1/locks:extend, \
                 /v1/locks:release or /v1/locks:validate, or GET /v1/elections/NAME[?after=TERM&wait=30s]"
            ),
        }
    }

    /// A known path with another method than its own (`allowed`): 405
    /// (UNIMPLEMENTED, as grpc-gateway answers it).
    pub(crate) fn method_not_allowed(allowed: &str) -> GatewayError {
        GatewayError {
            http: StatusCode::METHOD_NOT_ALLOWED,
            code: Code::Unimplemented,
            message: format!("method not allowed: use {allowed}"),
        }
    }

    /// A body over `server.max_request_bytes`: 413 (OUT_OF_RANGE, as the
    /// gRPC port answers a message too large).
    pub(crate) fn too_large(max: usize) -> GatewayError {
        GatewayError {
            http: StatusCode::PAYLOAD_TOO_LARGE,
            code: Code::OutOfRange,
            message: format!("body larger than server.max_request_bytes = {max}"),
        }
    }

    /// A query string the call does not take: 400 (INVALID_ARGUMENT).
    pub(crate) fn bad_query(message: String) -> GatewayError {
        GatewayError {
            http: StatusCode::BAD_REQUEST,
            code: Code::InvalidArgument,
            message: format!("query: {message}"),
        }
    }

    /// The body could not be read from the connection.
    pub(crate) fn unreadable(error: &dyn std::fmt::Display) -> GatewayError {
        GatewayError {
            http: StatusCode::BAD_REQUEST,
            code: Code::InvalidArgument,
            message: format!("body: {error}"),
        }
    }

    /// The answer: the status, `content-type: application/json`, the body.
    pub(crate) fn response(&self) -> Response<Full<Bytes>> {
        let body = serde_json::json!({ "code": self.code as i32, "message": self.message });
        let mut response = super::json_response(body.to_string().into_bytes());
        *response.status_mut() = self.http;
        if self.http == StatusCode::METHOD_NOT_ALLOWED {
            // The one method the path takes (`method_not_allowed` names it
            // last): GET for an election's leader, POST for the lock calls.
            let allowed = match self.message.ends_with("GET") {
                true => "GET",
                false => "POST",
            };
            response
                .headers_mut()
                .insert(header::ALLOW, header::HeaderValue::from_static(allowed));
        }
        response
    }
}

/// The standard mapping of gRPC codes to HTTP statuses (as grpc-gateway and
/// Google APIs use it).
pub(crate) fn http_status(code: Code) -> StatusCode {
    match code {
        Code::Ok => StatusCode::OK,
        Code::InvalidArgument | Code::FailedPrecondition | Code::OutOfRange => {
            StatusCode::BAD_REQUEST
        }
        Code::Unauthenticated => StatusCode::UNAUTHORIZED,
        Code::PermissionDenied => StatusCode::FORBIDDEN,
        Code::NotFound => StatusCode::NOT_FOUND,
        Code::Aborted | Code::AlreadyExists => StatusCode::CONFLICT,
        Code::ResourceExhausted => StatusCode::TOO_MANY_REQUESTS,
        // 499 "client closed request", as grpc-gateway.
        Code::Cancelled => StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST),
        Code::Unimplemented => StatusCode::NOT_IMPLEMENTED,
        Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        Code::DeadlineExceeded => StatusCode::GATEWAY_TIMEOUT,
        Code::Unknown | Code::Internal | Code::DataLoss => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<Status> for GatewayError {
    fn from(status: Status) -> GatewayError {
        GatewayError {
            http: http_status(status.code()),
            code: status.code(),
            message: status.message().to_owned(),
        }
    }
}

impl From<JsonError> for GatewayError {
    fn from(error: JsonError) -> GatewayError {
        let code = match error {
            JsonError::Body(_) => Code::InvalidArgument,
            JsonError::Contract { .. } => Code::Internal,
        };
        GatewayError {
            http: http_status(code),
            code,
            message: error.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table of the brief and of grpc-gateway, pinned.
    #[test]
    fn mapping() {
        for (code, http) in [
            (Code::Aborted, 409),
            (Code::FailedPrecondition, 400),
            (Code::Unavailable, 503),
            (Code::InvalidArgument, 400),
            (Code::ResourceExhausted, 429),
            (Code::DeadlineExceeded, 504),
            (Code::Unauthenticated, 401),
            (Code::PermissionDenied, 403),
            (Code::Internal, 500),
            (Code::Cancelled, 499),
        ] {
            assert_eq!(http_status(code).as_u16(), http, "{code:?}");
        }
        let error = GatewayError::from(Status::aborted("held"));
        assert_eq!((error.http.as_u16(), error.code), (409, Code::Aborted));
        assert_eq!(GatewayError::method_not_allowed("POST").http.as_u16(), 405);
        assert_eq!(GatewayError::too_large(10).http.as_u16(), 413);
        assert_eq!(GatewayError::not_found("/x").http.as_u16(), 404);
    }

    /// The body is `{"code": n, "message": "..."}`.
    #[test]
    fn body() {
        let response = GatewayError::from(Status::permission_denied("outside")).response();
        assert_eq!(response.status().as_u16(), 403);
        assert_eq!(response.headers()[header::CONTENT_TYPE], "application/json");
    }

    /// A 405 names the one method its path takes in `Allow`.
    #[test]
    fn allow_names_the_paths_method() {
        for method in ["GET", "POST"] {
            let response = GatewayError::method_not_allowed(method).response();
            assert_eq!(response.headers()[header::ALLOW], method);
        }
    }
}
