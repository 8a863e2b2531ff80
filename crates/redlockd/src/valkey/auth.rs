//! How the daemon proves itself to the masters: an ACL user name and a
//! password read from a file or an environment variable at start-up, and
//! the CA that `rediss://` masters must chain to. The password lives in a
//! [`Secret`] that prints as `***`, so no log line or error can show it.

use crate::config::MastersConfig;
use fred::prelude::Config as FredConfig;
use std::fmt;
use std::path::PathBuf;

/// Why a master password could not be read; names the source, never the
/// value.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SecretError {
    /// `masters.password_file` could not be read.
    #[error("masters.password_file: cannot read {path}: {source}")]
    File {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// `masters.password_env` names an unset (or non-UTF-8) variable.
    #[error("masters.password_env: variable {name} is not set")]
    Env {
        /// The variable's name.
        name: String,
    },
    /// `masters.tls_ca` could not be used.
    #[error(transparent)]
    Tls(#[from] crate::tls::TlsError),
}

/// A password: shown as `***` by `Debug` and `Display`.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Secret(String);

impl Secret {
    /// The password itself, for the AUTH command only.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Credentials and TLS trust for every master connection.
#[derive(Clone, Default)]
pub(crate) struct MasterAccess {
    username: Option<String>,
    password: Option<Secret>,
    tls: Option<fred::types::config::TlsConfig>,
}

impl fmt::Debug for MasterAccess {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MasterAccess")
            .field("username", &self.username)
            .field("password", &self.password)
            .field("custom_ca", &self.tls.is_some())
            .finish()
    }
}

impl MasterAccess {
    /// Reads the password and the CA named by the `[masters]` section.
    pub(crate) fn load(config: &MastersConfig) -> Result<MasterAccess, SecretError> {
        let password = if let Some(path) = &config.password_file {
            let text = std::fs::read_to_string(path).map_err(|source| SecretError::File {
                path: path.clone(),
                source,
            })?;
            Some(Secret(text.trim_end_matches(['\r', '\n']).to_owned()))
        } else if let Some(name) = &config.password_env {
            let value = std::env::var(name).map_err(|_| SecretError::Env { name: name.clone() })?;
            Some(Secret(value))
        } else {
            None
        };
        let tls = match &config.tls_ca {
            Some(ca) => Some(crate::tls::master_client_config(ca)?.into()),
            None => None,
        };
        Ok(MasterAccess {
            username: config.username.clone(),
            password,
            tls,
        })
    }

    /// Fills in what the URL did not say: credentials for a URL without
    /// any, the custom CA for a `rediss://` URL.
    pub(crate) fn apply(&self, config: &mut FredConfig) {
        if config.username.is_none() && config.password.is_none() {
            config.username.clone_from(&self.username);
            config.password = self.password.as_ref().map(|p| p.expose().to_owned());
        }
        if config.tls.is_some() {
            if let Some(tls) = &self.tls {
                config.tls = Some(tls.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The password never shows in debug output, and the URL's own
    /// credentials win.
    #[test]
    fn secrets_stay_hidden_and_urls_win() {
        let access = MasterAccess {
            username: Some("redlockd".into()),
            password: Some(Secret("hunter2".into())),
            tls: None,
        };
        assert!(!format!("{access:?}").contains("hunter2"));
        let mut plain = FredConfig::from_url("redis://127.0.0.1:1").unwrap();
        access.apply(&mut plain);
        assert_eq!(plain.username.as_deref(), Some("redlockd"));
        assert_eq!(plain.password.as_deref(), Some("hunter2"));
        let mut own = FredConfig::from_url("redis://me:pw@127.0.0.1:1").unwrap();
        access.apply(&mut own);
        assert_eq!(own.password.as_deref(), Some("pw"));
    }

    /// A password file loses its trailing newline; a missing variable is
    /// an error naming it.
    #[test]
    fn password_sources() {
        let path = std::env::temp_dir().join(format!("redlockd-pw-{}", std::process::id()));
        std::fs::write(&path, "s3cret\n").unwrap();
        let from_file = MasterAccess::load(&MastersConfig {
            password_file: Some(path.clone()),
            ..MastersConfig::default()
        })
        .unwrap();
        assert_eq!(from_file.password.unwrap().expose(), "s3cret");
        let _ = std::fs::remove_file(&path);
        let err = MasterAccess::load(&MastersConfig {
            password_env: Some("REDLOCKD_TEST_SURELY_UNSET_VARIABLE".into()),
            ..MastersConfig::default()
        })
        .unwrap_err();
        assert!(err
            .to_string()
            .contains("REDLOCKD_TEST_SURELY_UNSET_VARIABLE"));
    }
}
