//! `redlockd --dev`: five throw-away local masters (no persistence) and a
//! banner that says how to try the daemon. Built only with the `dev`
//! feature (on by default); the container image leaves it out.

use redlockd::config::Config;

/// Number of masters `--dev` starts.
#[cfg(feature = "dev")]
const DEV_MASTERS: usize = 5;

/// Where `--dev` serves the HTTP/JSON gateway unless `http.listen` is set.
#[cfg(feature = "dev")]
const DEV_HTTP: std::net::SocketAddr =
    std::net::SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8080);

/// The local masters of `--dev`: they stop when this value is dropped.
#[cfg(feature = "dev")]
pub(crate) type DevMasters = redlockd_masters::LocalMasters;

/// Without the `dev` feature there are no local masters to keep.
#[cfg(not(feature = "dev"))]
pub(crate) struct DevMasters;

/// Starts the local masters and points `config` at them.
#[cfg(feature = "dev")]
pub(crate) fn start(config: &mut Config) -> Result<DevMasters, String> {
    let binary = redlockd_masters::find_any_server().map_err(|e| e.to_string())?;
    let masters =
        redlockd_masters::LocalMasters::start(&binary, DEV_MASTERS).map_err(|e| e.to_string())?;
    tracing::info!(server = masters.version(), urls = ?masters.urls(), "--dev: started local masters (no persistence)");
    // Fresh masters: the default (horizon) quarantine finds no horizon on
    // them and lets them vote at once; --dev runs what users run.
    config.redlock.nodes = masters.urls();
    // The HTTP/JSON gateway too, unless the configuration placed it; on
    // another port of the user's choosing if 8080 is taken, rather than
    // failing the quick start over an optional extra.
    if config.http.listen.is_none() {
        match std::net::TcpListener::bind(DEV_HTTP) {
            Ok(probe) => {
                drop(probe);
                config.http.listen = Some(DEV_HTTP);
            }
            Err(error) => tracing::warn!(
                %error,
                "--dev: {DEV_HTTP} is taken, so the HTTP/JSON gateway is off; set \
                 REDLOCKD__HTTP__LISTEN to serve it elsewhere"
            ),
        }
    }
    Ok(masters)
}

/// `--dev` in a build without the `dev` feature: say so.
#[cfg(not(feature = "dev"))]
pub(crate) fn start(_config: &mut Config) -> Result<DevMasters, String> {
    Err("this build has no --dev mode (built without the `dev` feature)".into())
}

/// The banner: where the daemon serves and a first command to try.
pub(crate) fn print_help(config: &Config) {
    let addr = config.server.listen;
    println!(
        "\nredlockd --dev is serving on {addr} with {} local masters. Try:\n\n  \
         grpcurl -plaintext -import-path proto -proto redlock/v1/lock.proto \\\n    \
         -d '{{\"resource\":\"demo\",\"ttl\":\"10s\"}}' {addr} redlock.v1.LockService/Acquire\n\n{}\
         masters: {}\n\
         Stop with Ctrl-C.\n",
        config.redlock.nodes.len(),
        config.http.listen.map_or_else(String::new, |http| format!(
            "or over HTTP/JSON:\n\n  curl -s -X POST http://{http}/v1/locks:acquire \\\n    \
             -d '{{\"resource\":\"demo\",\"ttl\":\"10s\"}}'\n\n"
        )),
        config.redlock.nodes.join(" ")
    );
}
