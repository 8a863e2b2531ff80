//! Reaching the daemon: the address (`HOST:PORT`, `http://`, `https://`),
//! the TLS settings (`tls.rs`), the bearer token (`auth.rs`), timeouts, and
//! the connection itself.

use crate::address::{chain, target};
use crate::auth::{BearerAuth, Stub};
use crate::client::{Client, Inner, DEFAULT_CALL_TIMEOUT};
use crate::error::Error;
use crate::tls;
use crate::unanswered::Releases;
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Handle;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::{Channel, Endpoint};
use tonic::Status;

/// How long connecting may take unless
/// [`ClientBuilder::connect_timeout`] says otherwise.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How to reach the daemon: address, TLS, token, timeouts. Made by
/// [`Client::builder`]; [`ClientBuilder::connect`] makes the [`Client`].
///
/// The address is `HOST:PORT`, `http://HOST:PORT` or `https://HOST:PORT`
/// (as `redlockctl --addr` takes it). `https://`, or any TLS setting with
/// a bare `HOST:PORT`, connects over TLS; TLS settings with `http://` are
/// refused as a contradiction.
///
/// # Examples
///
/// ```no_run
/// # async fn demo() -> Result<(), redlockd_client::Error> {
/// use std::time::Duration;
/// use redlockd_client::Client;
///
/// let client = Client::builder("https://locks.internal:50051")
///     .ca_certificate(std::fs::read("ca.pem").unwrap_or_default())
///     .bearer_token(std::env::var("REDLOCK_AUTH_TOKEN").unwrap_or_default())
///     .call_timeout(Duration::from_secs(5))
///     .connect()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ClientBuilder {
    addr: String,
    ca_pem: Option<Vec<u8>>,
    identity: Option<(Vec<u8>, Vec<u8>)>,
    domain_name: Option<String>,
    token: Option<String>,
    call_timeout: Duration,
    connect_timeout: Duration,
}

impl fmt::Debug for ClientBuilder {
    /// Everything but the token and the client key.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("addr", &self.addr)
            .field("ca_certificate", &self.ca_pem.is_some())
            .field("client_identity", &self.identity.is_some())
            .field("domain_name", &self.domain_name)
            .field("bearer_token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("call_timeout", &self.call_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .finish()
    }
}

impl Client {
    /// Connects to the daemon at `addr` (`HOST:PORT`, `http://HOST:PORT`,
    /// or `https://HOST:PORT` with the system's CA bundle), without a token.
    /// [`Error::Unavailable`] when it cannot be reached; for TLS settings or
    /// a token, see [`Client::builder`].
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), redlockd_client::Error> {
    /// let client = redlockd_client::Client::connect("127.0.0.1:50051").await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(addr: impl Into<String>) -> Result<Client, Error> {
        Client::builder(addr).connect().await
    }

    /// A builder for a client of the daemon at `addr`, with TLS, a bearer
    /// token or timeouts.
    ///
    /// ```no_run
    /// # async fn demo(token: String) -> Result<(), redlockd_client::Error> {
    /// let client = redlockd_client::Client::builder("127.0.0.1:50051")
    ///     .bearer_token(token)
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn builder(addr: impl Into<String>) -> ClientBuilder {
        ClientBuilder {
            addr: addr.into(),
            ca_pem: None,
            identity: None,
            domain_name: None,
            token: None,
            call_timeout: DEFAULT_CALL_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        }
    }
}

impl ClientBuilder {
    /// Trusts these PEM certificates (a private CA) instead of the system's
    /// bundle, and turns TLS on.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = redlockd_client::Client::builder("locks.internal:50051")
    ///     .ca_certificate(std::fs::read("ca.pem")?)
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn ca_certificate(mut self, pem: impl Into<Vec<u8>>) -> ClientBuilder {
        self.ca_pem = Some(pem.into());
        self
    }

    /// Presents this certificate chain and its key (PEM) to a daemon that
    /// asks for one (mutual TLS, `server.tls.client_ca`), and turns TLS on.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = redlockd_client::Client::builder("https://locks.internal:50051")
    ///     .ca_certificate(std::fs::read("ca.pem")?)
    ///     .client_identity(std::fs::read("client.pem")?, std::fs::read("client.key")?)
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn client_identity(
        mut self,
        cert_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> ClientBuilder {
        self.identity = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// The name the daemon's certificate must carry, when it is not the
    /// address's host (an IP address, a load balancer's name).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = redlockd_client::Client::builder("https://10.0.0.7:50051")
    ///     .ca_certificate(std::fs::read("ca.pem")?)
    ///     .tls_domain_name("locks.internal")
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn tls_domain_name(mut self, name: impl Into<String>) -> ClientBuilder {
        self.domain_name = Some(name.into());
        self
    }

    /// Sends `authorization: Bearer <token>` with every call and session,
    /// for a daemon with `[[auth.clients]]`. Without TLS the token crosses
    /// the network in clear: use it over `https://`, or on loopback.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = redlockd_client::Client::builder("https://locks.internal:50051")
    ///     .bearer_token(std::fs::read_to_string("/run/secrets/redlock-token")?.trim())
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn bearer_token(mut self, token: impl Into<String>) -> ClientBuilder {
        self.token = Some(token.into());
        self
    }

    /// How long a call may take beyond the wait it asks for
    /// ([`DEFAULT_CALL_TIMEOUT`] unless set): the gRPC deadline of every
    /// call, and how long a [`Lease`](crate::Lease)'s release waits.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), redlockd_client::Error> {
    /// use std::time::Duration;
    /// let client = redlockd_client::Client::builder("127.0.0.1:50051")
    ///     .call_timeout(Duration::from_secs(2))
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn call_timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.call_timeout = timeout;
        self
    }

    /// How long connecting may take (5 s unless set).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), redlockd_client::Error> {
    /// use std::time::Duration;
    /// let client = redlockd_client::Client::builder("127.0.0.1:50051")
    ///     .connect_timeout(Duration::from_secs(1))
    ///     .connect()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn connect_timeout(mut self, timeout: Duration) -> ClientBuilder {
        self.connect_timeout = timeout;
        self
    }

    /// Connects now: [`Error::Unavailable`] when the daemon cannot be
    /// reached, [`Error::InvalidArgument`] naming the setting that is
    /// wrong. The connection is made again by itself when it breaks. Call
    /// it inside a Tokio runtime: the client's background work runs there.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), redlockd_client::Error> {
    /// let client = redlockd_client::Client::builder("127.0.0.1:50051").connect().await?;
    /// # Ok(()) }
    /// ```
    pub async fn connect(self) -> Result<Client, Error> {
        let (endpoint, auth) = self.endpoint()?;
        let channel = endpoint
            .connect()
            .await
            .map_err(|error| unreachable(&self.addr, error))?;
        self.client(endpoint, channel, auth)
    }

    /// A client that connects at its first call (and then as
    /// [`ClientBuilder::connect`]'s does): an unreachable daemon is the
    /// first call's [`Error::Unavailable`]. Call it inside a Tokio runtime.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), redlockd_client::Error> {
    /// let client = redlockd_client::Client::builder("127.0.0.1:50051").connect_lazy()?;
    /// # Ok(()) }
    /// ```
    pub fn connect_lazy(self) -> Result<Client, Error> {
        let (endpoint, auth) = self.endpoint()?;
        let channel = endpoint.connect_lazy();
        self.client(endpoint, channel, auth)
    }

    /// The endpoint and the token's interceptor, settings checked.
    fn endpoint(&self) -> Result<(Endpoint, BearerAuth), Error> {
        if self.call_timeout.is_zero() {
            return Err(Error::invalid("call_timeout", "must be positive"));
        }
        let wants_tls =
            self.ca_pem.is_some() || self.identity.is_some() || self.domain_name.is_some();
        let (uri, tls) = target(&self.addr, wants_tls)?;
        let mut endpoint = Endpoint::from_shared(uri)
            .map_err(|e| Error::invalid("addr", format!("{}: {}", self.addr, chain(&e))))?
            .connect_timeout(self.connect_timeout)
            .tcp_nodelay(true);
        if tls {
            let identity = self
                .identity
                .as_ref()
                .map(|(cert, key)| (cert.as_slice(), key.as_slice()));
            let config = tls::config(
                self.ca_pem.as_deref(),
                identity,
                self.domain_name.as_deref(),
            )?;
            endpoint = endpoint
                .tls_config(config)
                .map_err(|e| Error::invalid("tls", chain(&e)))?;
        }
        let auth = BearerAuth::new(self.token.as_deref())?;
        Ok((endpoint, auth))
    }

    /// The client on `channel`; its background work runs on this runtime.
    fn client(
        self,
        endpoint: Endpoint,
        channel: Channel,
        auth: BearerAuth,
    ) -> Result<Client, Error> {
        let runtime = Handle::try_current().map_err(|_| {
            Error::Other(Status::failed_precondition(
                "a redlockd client is made inside a Tokio runtime",
            ))
        })?;
        let channel = InterceptedService::new(channel, auth.clone());
        Ok(Client {
            inner: Arc::new(Inner {
                stub: LockServiceClient::new(channel.clone()),
                channel,
                endpoint,
                auth,
                call_timeout: self.call_timeout,
                releases: Arc::new(Releases::new(runtime)),
                addr: self.addr,
            }),
        })
    }
}

impl Client {
    /// A client of the lock service on a connection of its own, made now
    /// (never the shared one, which may be the connection that hangs): how
    /// a lease that [reattaches](crate::Acquire::reattach) reaches the
    /// daemon once its session broke or went silent.
    pub(crate) async fn connect_anew(&self) -> Result<Stub, Error> {
        let inner = &self.inner;
        let channel = inner
            .endpoint
            .connect()
            .await
            .map_err(|error| unreachable(&inner.addr, error))?;
        let channel = InterceptedService::new(channel, inner.auth.clone());
        Ok(LockServiceClient::new(channel))
    }
}

/// The daemon at `addr` cannot be reached: UNAVAILABLE, the transport's
/// error (with its causes) in the message and as the source.
fn unreachable(addr: &str, error: tonic::transport::Error) -> Error {
    let mut status = Status::unavailable(format!("cannot connect to {addr}: {}", chain(&error)));
    status.set_source(Arc::new(error));
    Error::Unavailable(status)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bad settings are refused naming the setting, before connecting.
    #[test]
    fn settings_named() {
        let named = |builder: ClientBuilder| builder.endpoint().map(drop).expect_err("refused");
        let b = || Client::builder("h:1");
        assert_eq!(
            named(b().call_timeout(Duration::ZERO)).field(),
            Some("call_timeout")
        );
        assert_eq!(
            named(b().ca_certificate("nope")).field(),
            Some("ca_certificate")
        );
        let pem = "-----BEGIN CERTIFICATE-----\n";
        assert_eq!(
            named(b().ca_certificate(pem).client_identity(pem, "key")).field(),
            Some("client_identity")
        );
        assert_eq!(named(b().bearer_token("a b")).field(), Some("bearer_token"));
    }

    /// Debug shows neither the token nor the key.
    #[test]
    fn debug_redacts() {
        let b = Client::builder("h:1")
            .bearer_token("s3cr3t")
            .client_identity("cert", "k3y-s3cr3t");
        let shown = format!("{b:?}");
        assert!(!shown.contains("s3cr3t"), "{shown}");
    }
}
