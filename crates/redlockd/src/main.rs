//! The `redlockd` binary: configuration -> logs -> serve -> drain -> exit code.

/// With 10,000 open `Hold` sessions (the bench's sessions workload), glibc's
/// malloc spent a quarter of the machine on arena lock contention between
/// the two worker threads and on fragmentation (`malloc_consolidate`).
/// mimalloc's thread-local free lists avoid both.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod dev;

use clap::Parser;
use redlockd::config::{Config, LogFormat, ValidConfig};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use tokio::net::TcpListener;

/// redlockd: quorum locks (Redlock over independent Valkey/Redis masters)
/// behind a gRPC API.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// TOML configuration file (see config/redlockd.toml). Environment
    /// variables REDLOCKD__<SECTION>__<KEY> override it.
    #[arg(long, value_name = "PATH")]
    config: Option<PathBuf>,

    /// Try it out: start five local masters (valkey-server, else
    /// redis-server, on PATH or at REDLOCKD_SERVER_BIN) with no persistence
    /// and serve against them; they stop with the daemon.
    #[arg(long)]
    dev: bool,
}

/// Exit status for an unusable configuration.
const EXIT_CONFIG: u8 = 2;

/// After `server.shutdown_grace`, how long the release of what is left,
/// the end of in-flight calls and the closing of connections may take
/// before the process exits anyway (a release takes at most
/// `redlock.node_timeout`). Grace plus this stays under Kubernetes' 30 s
/// termination grace with the default 20 s grace.
const STOP_ALLOWANCE: Duration = Duration::from_secs(5);

fn main() -> ExitCode {
    let args = Args::parse();
    let mut config = match Config::read(args.config.as_deref()) {
        Ok(config) => config,
        Err(error) => return config_error(&error),
    };
    init_logging(config.log.format);
    // Kept alive until the daemon stops; dropping it stops the masters.
    let dev_masters = if args.dev {
        match dev::start(&mut config) {
            Ok(masters) => Some(masters),
            Err(error) => {
                tracing::error!("--dev: {error}");
                return ExitCode::FAILURE;
            }
        }
    } else {
        None
    };
    let config = match config.validated() {
        Ok(config) => config,
        Err(error) => return config_error(&error),
    };
    for warning in config.warnings() {
        tracing::warn!("{warning}");
    }
    let runtime = match redlockd::runtime::build(config.server.worker_threads) {
        Ok((runtime, workers)) => {
            tracing::info!(workers, "async runtime started");
            runtime
        }
        Err(error) => {
            tracing::error!(%error, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    let code = runtime.block_on(serve(config, dev_masters.is_some()));
    drop(dev_masters);
    code
}

fn config_error(error: &dyn std::fmt::Display) -> ExitCode {
    eprintln!("redlockd: {error}");
    ExitCode::from(EXIT_CONFIG)
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Logs go to stderr (stdout carries only the --dev banner).
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => logs
            .json()
            .with_current_span(true)
            .with_span_list(false)
            .init(),
    }
}

async fn serve(config: ValidConfig, dev: bool) -> ExitCode {
    let listener = match TcpListener::bind(config.server.listen).await {
        Ok(listener) => listener,
        Err(error) => {
            tracing::error!(listen = %config.server.listen, %error, "cannot listen");
            return ExitCode::FAILURE;
        }
    };
    if dev {
        dev::print_help(&config);
    }
    let limit = config.server.shutdown_grace + STOP_ALLOWANCE;
    let signals = redlockd::signal::StopSignals::listen();
    let server = redlockd::server::run_draining(config, listener, signals.nth(1), signals.nth(2));
    tokio::pin!(server);
    let early = tokio::select! {
        result = &mut server => Some(result),
        () = signals.nth(1) => None,
    };
    let result = match early {
        Some(result) => result,
        None => match tokio::time::timeout(limit, server).await {
            Ok(result) => result,
            Err(_) => {
                tracing::warn!(
                    ?limit,
                    "still not stopped after the shutdown grace; exiting"
                );
                return ExitCode::FAILURE;
            }
        },
    };
    match result {
        Ok(()) => {
            tracing::info!("stopped");
            ExitCode::SUCCESS
        }
        Err(error) if error.is_config() => config_error(&error),
        Err(error) => {
            tracing::error!(%error, "server failed");
            ExitCode::FAILURE
        }
    }
}
