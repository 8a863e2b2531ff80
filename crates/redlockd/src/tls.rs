//! TLS material from PEM files: the gRPC port's certificate and optional
//! client CA (mutual TLS), and the CA that master certificates must chain
//! to for `rediss://`. Read once at start-up; an unreadable or empty file
//! stops the daemon with the key and path named, never a key's contents.

use crate::config::TlsConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::PrivateKeyDer;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TlsError {
    /// A PEM file could not be read.
    #[error("{key}: cannot read {path}: {source}")]
    Read {
        /// The configuration key naming the file.
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A file holds no usable certificate.
    #[error("{key}: {path} holds no PEM certificate")]
    NoCertificate {
        /// The configuration key naming the file.
        key: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// rustls refused the material.
    #[error("{key}: {reason}")]
    Rustls {
        /// The configuration key concerned.
        key: &'static str,
        /// What rustls said.
        reason: String,
    },
}

pub(crate) fn read(key: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read {
        key,
        path: path.to_owned(),
        source,
    })
}

/// The server side of `[server.tls]` (certificate, key and, for mutual
/// TLS, the client CA whose certificates are then required) as a rustls
/// configuration offering `alpn` (`h2` on the gRPC port, `http/1.1` on the
/// gateway), or `None` when TLS is off. Both ports do their handshakes
/// themselves (`conn::handshake`), so that a failed one is logged and
/// counted and a slow one times out.
pub(crate) fn server_config(
    tls: &TlsConfig,
    alpn: &[u8],
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
            // Client certificates are then required.
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
    config.alpn_protocols = vec![alpn.to_vec()];
    Ok(Some(Arc::new(config)))
}

/// The DER certificates in a PEM bundle; at least one.
pub(crate) fn certificates(
    key: &'static str,
    path: &Path,
    pem: &[u8],
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, TlsError> {
    let certs: Vec<_> = rustls::pki_types::CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(|e| TlsError::Rustls {
            key,
            reason: format!("{}: {e}", path.display()),
        })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            key,
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

/// A rustls client configuration trusting only the CAs in `ca` (PEM), for
/// `rediss://` masters with a private CA.
pub(crate) fn master_client_config(ca: &Path) -> Result<rustls::ClientConfig, TlsError> {
    const KEY: &str = "redlock.tls_ca";
    let pem = read(KEY, ca)?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in certificates(KEY, ca, &pem)? {
        roots.add(cert).map_err(|e| TlsError::Rustls {
            key: KEY,
            reason: e.to_string(),
        })?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Rustls {
            key: KEY,
            reason: e.to_string(),
        })?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(config)
}
