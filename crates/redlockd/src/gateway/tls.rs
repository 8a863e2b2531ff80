//! The gateway's TLS: the gRPC port's `[server.tls]` (certificate, key and,
//! for mTLS, the client CA whose certificates are then required), as a
//! rustls configuration for HTTP/1.1.

use crate::config::TlsConfig;
use crate::tls::{certificates, read, TlsError};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::PrivateKeyDer;
use std::sync::Arc;

/// The rustls server configuration for `tls`, or `None` when TLS is off.
pub(crate) fn server_config(
    tls: &TlsConfig,
) -> Result<Option<Arc<rustls::ServerConfig>>, TlsError> {
    let (Some(cert), Some(key)) = (&tls.cert, &tls.key) else {
        return Ok(None);
    };
    let rustls_error = |key: &'static str| {
        move |e: &dyn std::fmt::Display| TlsError::Rustls {
            key,
            reason: e.to_string(),
        }
    };
    let chain = certificates("server.tls.cert", cert, &read("server.tls.cert", cert)?)?;
    let private = PrivateKeyDer::from_pem_slice(&read("server.tls.key", key)?)
        .map_err(|e| rustls_error("server.tls.key")(&e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| rustls_error("server.tls")(&e))?;
    let builder = match &tls.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for root in certificates(
                "server.tls.client_ca",
                ca,
                &read("server.tls.client_ca", ca)?,
            )? {
                roots
                    .add(root)
                    .map_err(|e| rustls_error("server.tls.client_ca")(&e))?;
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(|e| rustls_error("server.tls.client_ca")(&e))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(chain, private)
        .map_err(|e| rustls_error("server.tls.key")(&e))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Some(Arc::new(config)))
}
