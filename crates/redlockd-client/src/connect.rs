//! Reaching the daemon: the address (`HOST:PORT`, `http://`, `https://`),
//! the TLS settings (`tls.rs`), the bearer token (`auth.rs`), timeouts, and
//! the connection itself.

use crate::auth::BearerAuth;
use crate::client::{Client, Inner, DEFAULT_CALL_TIMEOUT};
use crate::error::Error;
use crate::tls;
use crate::unanswered::Releases;
use redlockd_proto::pb::lock_service_client::LockServiceClient;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio::runtime::Handle;
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
        let channel = endpoint.connect().await.map_err(|error| {
            let mut status = Status::unavailable(format!(
                "cannot connect to {}: {}",
                self.addr,
                chain(&error)
            ));
            status.set_source(Arc::new(error));
            Error::Unavailable(status)
        })?;
        self.client(channel, auth)
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
        self.client(channel, auth)
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
    fn client(self, channel: Channel, auth: BearerAuth) -> Result<Client, Error> {
        let runtime = Handle::try_current().map_err(|_| {
            Error::Other(Status::failed_precondition(
                "a redlockd client is made inside a Tokio runtime",
            ))
        })?;
        Ok(Client {
            inner: Arc::new(Inner {
                stub: LockServiceClient::with_interceptor(channel, auth),
                call_timeout: self.call_timeout,
                releases: Arc::new(Releases::new(runtime)),
                addr: self.addr,
            }),
        })
    }
}

/// The URI to connect to for `addr`, and whether it is TLS: `https://`, or
/// a bare `HOST:PORT` with TLS settings.
fn target(addr: &str, wants_tls: bool) -> Result<(String, bool), Error> {
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
fn chain(error: &dyn std::error::Error) -> String {
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
