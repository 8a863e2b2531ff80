//! Why the daemon could not serve: [`ServeError`], opaque over the stage
//! that failed.

use crate::metrics::MetricsError;
use crate::redlock::NoMasters;
use crate::valkey::NodeSetupError;

/// Why the daemon could not serve. Opaque, like `std::io::Error`: callers
/// print it (its `source` chain names the cause) and ask
/// [`ServeError::is_config`]; which stage failed is the daemon's business, so
/// a new stage is not a breaking change.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct ServeError(#[from] Failure);

/// The stage that failed, behind [`ServeError`].
#[derive(Debug, thiserror::Error)]
pub(crate) enum Failure {
    /// A master's URL could not be used.
    #[error(transparent)]
    Node(#[from] NodeSetupError),
    /// No masters configured.
    #[error(transparent)]
    NoMasters(#[from] NoMasters),
    /// The gRPC server failed.
    #[error("gRPC server: {0}")]
    Transport(#[from] tonic::transport::Error),
    /// The metrics endpoint could not start.
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    /// The reflection service could not read the descriptors.
    #[error("reflection: {0}")]
    Reflection(#[from] tonic_reflection::server::Error),
    /// TLS material could not be loaded.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
    /// The HTTP/JSON gateway could not start.
    #[error(transparent)]
    Gateway(#[from] crate::gateway::GatewayStartError),
    /// A master password could not be read.
    #[error(transparent)]
    Secret(#[from] crate::valkey::auth::SecretError),
}

/// `?` on any stage's error gives a [`ServeError`].
macro_rules! serve_error_from {
    ($($source:ty),* $(,)?) => {
        $(impl From<$source> for ServeError {
            fn from(error: $source) -> ServeError {
                ServeError(Failure::from(error))
            }
        })*
    };
}

serve_error_from!(
    NodeSetupError,
    NoMasters,
    tonic::transport::Error,
    MetricsError,
    tonic_reflection::server::Error,
    crate::tls::TlsError,
    crate::gateway::GatewayStartError,
    crate::valkey::auth::SecretError,
);

impl ServeError {
    /// Whether the configuration itself cannot be used (a file it names is
    /// unreadable or malformed, a master URL is unusable): the binary then
    /// exits 2 like any other invalid configuration, with a message naming
    /// the key.
    pub fn is_config(&self) -> bool {
        matches!(
            self.0,
            Failure::Node(_) | Failure::NoMasters(_) | Failure::Tls(_) | Failure::Secret(_)
        )
    }
}
