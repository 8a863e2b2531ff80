//! TLS material from PEM files: the gRPC port's certificate and optional
//! client CA (mutual TLS), and the CA that master certificates must chain
//! to for `rediss://`. Read once at start-up; an unreadable or empty file
//! stops the daemon with the key and path named, never a key's contents.

use crate::config::TlsConfig;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tonic::transport::{Certificate, Identity, ServerTlsConfig};

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
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

/// The gRPC server's TLS settings, or `None` when TLS is off.
pub(crate) fn server_config(tls: &TlsConfig) -> Result<Option<ServerTlsConfig>, TlsError> {
    let (Some(cert), Some(key)) = (&tls.cert, &tls.key) else {
        return Ok(None);
    };
    let cert_pem = read("server.tls.cert", cert)?;
    certificates("server.tls.cert", cert, &cert_pem)?;
    let identity = Identity::from_pem(cert_pem, read("server.tls.key", key)?);
    let mut config = ServerTlsConfig::new().identity(identity);
    if let Some(ca) = &tls.client_ca {
        let pem = read("server.tls.client_ca", ca)?;
        certificates("server.tls.client_ca", ca, &pem)?;
        // Client certificates are then required: tonic does not make them
        // optional unless asked to.
        config = config.client_ca_root(Certificate::from_pem(pem));
    }
    Ok(Some(config))
}

/// The DER certificates in a PEM bundle; at least one.
pub(crate) fn certificates(
    key: &'static str,
    path: &Path,
    pem: &[u8],
) -> Result<Vec<rustls::pki_types::CertificateDer<'static>>, TlsError> {
    use rustls::pki_types::pem::PemObject;
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
