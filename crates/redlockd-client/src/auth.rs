//! The bearer token, sent as `authorization: Bearer <token>` on every call
//! and session, the connection that carries it ([`AuthChannel`], also what
//! [`Client::channel`](crate::Client::channel) hands out for the daemon's
//! other services), and the generated client on it. The token is kept as a
//! sensitive header value: nothing here prints or formats it.

use crate::error::Error;
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use std::fmt;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::interceptor::InterceptedService;
use tonic::service::Interceptor;
use tonic::transport::Channel;
use tonic::{Request, Status};

/// The generated client on a connection that adds the token to each call.
pub(crate) type Stub = LockServiceClient<AuthChannel>;

/// A connection to the daemon that adds the client's bearer token (if any)
/// to every call: what [`Client::channel`](crate::Client::channel) returns,
/// for the generated client of any of the daemon's services.
///
/// ```no_run
/// # async fn demo(client: redlockd_client::Client) -> Result<(), tonic::Status> {
/// use redlockd_client::AuthChannel;
/// use redlockd_proto::pb::lock_admin_service_client::LockAdminServiceClient;
///
/// let channel: AuthChannel = client.channel();
/// let mut admin = LockAdminServiceClient::new(channel);
/// # Ok(()) }
/// ```
pub type AuthChannel = InterceptedService<Channel, BearerAuth>;

/// The interceptor of an [`AuthChannel`]: adds `authorization: Bearer
/// <token>` to every call, when the client was given a token
/// ([`ClientBuilder::bearer_token`](crate::ClientBuilder::bearer_token)).
/// Made by the builder only; `Debug` never shows the token.
///
/// ```no_run
/// use redlockd_client::BearerAuth;
/// use tonic::service::interceptor::InterceptedService;
/// use tonic::transport::Channel;
///
/// // What an AuthChannel is, spelled out.
/// fn spelled_out(client: &redlockd_client::Client) -> InterceptedService<Channel, BearerAuth> {
///     client.channel()
/// }
/// ```
#[derive(Clone, Default)]
pub struct BearerAuth {
    header: Option<MetadataValue<Ascii>>,
}

impl BearerAuth {
    /// The header for `token`; refused (without quoting it) when it cannot
    /// be sent as one.
    pub(crate) fn new(token: Option<&str>) -> Result<BearerAuth, Error> {
        let Some(token) = token else {
            return Ok(BearerAuth::default());
        };
        if token.is_empty() {
            return Err(Error::invalid("bearer_token", "must not be empty"));
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(Error::invalid(
                "bearer_token",
                "may hold only printable ASCII without spaces",
            ));
        }
        let mut header = MetadataValue::try_from(format!("Bearer {token}"))
            .map_err(|_| Error::invalid("bearer_token", "cannot be sent as a header"))?;
        header.set_sensitive(true);
        Ok(BearerAuth {
            header: Some(header),
        })
    }

    /// Whether a token is sent.
    pub(crate) fn has_token(&self) -> bool {
        self.header.is_some()
    }
}

impl fmt::Debug for BearerAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let token = if self.has_token() {
            "Some(<redacted>)"
        } else {
            "None"
        };
        write!(f, "BearerAuth {{ token: {token} }}")
    }
}

impl Interceptor for BearerAuth {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(header) = &self.header {
            request
                .metadata_mut()
                .insert("authorization", header.clone());
        }
        Ok(request)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header is `Bearer <token>`, sensitive, never in Debug; tokens
    /// that cannot be a header are refused without being quoted.
    #[test]
    fn bearer_header() {
        let auth = BearerAuth::new(Some("s3cr3t-token")).expect("valid");
        let header = auth.header.clone().expect("a header");
        assert_eq!(header.to_str().ok(), Some("Bearer s3cr3t-token"));
        assert!(header.is_sensitive());
        assert!(!format!("{auth:?}").contains("s3cr3t"));
        for bad in ["", "two words", "caf\u{e9}"] {
            let error = BearerAuth::new(Some(bad)).expect_err(bad);
            assert_eq!(error.field(), Some("bearer_token"));
            assert!(bad.is_empty() || !error.to_string().contains(bad));
        }
        assert!(!BearerAuth::new(None).expect("none").has_token());
    }
}
