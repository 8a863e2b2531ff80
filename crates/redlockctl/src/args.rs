//! The command line: subcommands, flags, durations, and `--help` (which
//! lists the exit codes).

use crate::exit::{self, Exit};
use crate::waiting::Wait;
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

/// Shortest `--ttl` that `run` accepts: a session's lock must outlive a few
/// network round trips and the margin kept before its validity ends.
pub(crate) const MIN_RUN_TTL: Duration = Duration::from_secs(1);

/// redlockctl: take quorum locks from redlockd, from the shell.
///
/// `redlockctl run RESOURCE -- COMMAND...` holds the lock exactly as long as
/// COMMAND runs, like flock(1) or `etcdctl lock`, but across machines. The
/// other subcommands expose the single calls: their output is shell
/// assignments (`REDLOCK_TOKEN=...`) or, with --json, one JSON object.
#[derive(Debug, Parser)]
#[command(name = "redlockctl", version)]
pub(crate) struct Cli {
    /// The redlockd daemon: http://HOST:PORT (or HOST:PORT), or
    /// https://HOST:PORT for a daemon serving TLS.
    #[arg(
        long,
        global = true,
        env = "REDLOCK_ADDR",
        default_value = "http://127.0.0.1:50051",
        value_name = "URL"
    )]
    pub addr: String,

    /// How to reach a secured daemon (TLS, client certificate, token).
    #[command(flatten)]
    pub security: SecurityArgs,

    /// Print results as one JSON object instead of shell assignments.
    #[arg(long, global = true)]
    pub json: bool,

    /// How long a call may take beyond its --wait before redlockctl gives
    /// up (DEADLINE_EXCEEDED); also bounds connecting.
    #[arg(long, global = true, default_value = "10s", value_parser = duration, value_name = "DURATION")]
    pub timeout: Duration,

    /// What to do.
    #[command(subcommand)]
    pub command: Cmd,
}

/// Flags for a daemon that serves TLS or asks for a bearer token. The
/// token itself is never a flag (it would show in `ps`): it comes from a
/// file or from REDLOCK_AUTH_TOKEN.
#[derive(Debug, Args)]
pub(crate) struct SecurityArgs {
    /// PEM file of the CA(s) that signed the daemon's certificate (https://
    /// only); without it the system's CA bundle is trusted.
    #[arg(long, global = true, env = "REDLOCK_CACERT", value_name = "FILE")]
    pub cacert: Option<PathBuf>,
    /// PEM certificate presented to a daemon that asks for client
    /// certificates (mutual TLS); needs --key.
    #[arg(
        long,
        global = true,
        env = "REDLOCK_CERT",
        value_name = "FILE",
        requires = "key"
    )]
    pub cert: Option<PathBuf>,
    /// PEM private key of --cert.
    #[arg(
        long,
        global = true,
        env = "REDLOCK_KEY",
        value_name = "FILE",
        requires = "cert"
    )]
    pub key: Option<PathBuf>,
    /// File holding the bearer token sent as `authorization: Bearer ...`
    /// (surrounding whitespace ignored). Without it, the token is taken from
    /// REDLOCK_AUTH_TOKEN if set. Never printed.
    #[arg(long, global = true, env = "REDLOCK_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub(crate) enum Cmd {
    /// Run COMMAND while holding the lock on RESOURCE (a Hold session);
    /// release it when COMMAND exits, and exit with COMMAND's status.
    ///
    /// COMMAND runs in its own process group with REDLOCK_RESOURCE,
    /// REDLOCK_FENCE, REDLOCK_TOKEN and REDLOCK_ADDR in its environment.
    /// SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to
    /// redlockctl are forwarded to that whole group. If the lock is lost, the
    /// group gets SIGTERM at once and SIGKILL after --kill-after, and
    /// redlockctl exits 80. If the daemon goes quiet, redlockctl keeps the lock
    /// through Extend on a new connection; failing that, it stops COMMAND
    /// before the lock's last known validity runs out. The lock is released
    /// when COMMAND (the group leader) exits, even if processes it started in
    /// the background still run. Being in its own group, COMMAND is a
    /// background job to a terminal: one that reads the terminal is stopped
    /// (SIGTTIN). `run` is made for scripts, cron jobs and services.
    Run(RunArgs),
    /// Take the lock on RESOURCE and print it (token, fence, validity); it
    /// stays held until its ttl runs out or it is released.
    Acquire(AcquireArgs),
    /// Reset the lock's time to live to --ttl, if TOKEN still holds it.
    Extend(ExtendArgs),
    /// Give the lock up. Exits 82 if it had already expired or been taken
    /// over: the work done under it may have overlapped another holder's.
    Release(LockArgs),
    /// Ask whether TOKEN still holds the lock, and for how long it is
    /// guaranteed. Exits 0 if held, 82 if not.
    Validate(LockArgs),
    /// Ask the daemon's standard gRPC health service (grpc.health.v1)
    /// whether it serves locks: exits 0 only when SERVING (a quorum of
    /// trusted masters is up), 83 when NOT_SERVING, 89 when it cannot be
    /// reached. Made for container health checks and readiness scripts.
    Health(HealthArgs),
    /// Who holds RESOURCE (owner, fence, when acquired, time left, unary or
    /// Hold session and its replica), as a quorum of masters sees it.
    /// Exits 0 if held, 82 if not. Needs the admin role (auth.admins).
    Inspect(ResourceArg),
    /// Every held lock whose resource starts with PREFIX (all without one),
    /// one per line (tab-separated, with a header; --json: one object per
    /// line). Needs the admin role.
    List(ListArgs),
    /// Release RESOURCE whoever holds it; a Hold session holding it is told
    /// `lost`. Exits 0 if something was held, 82 if not. Needs the admin
    /// role; the daemon logs who did it.
    ForceRelease(ResourceArg),
    /// Run COMMAND only while this candidate leads election NAME: campaign
    /// (waiting as long as it takes, campaigning again while the daemon is
    /// unreachable), run COMMAND once elected, and resign when it exits.
    ///
    /// COMMAND runs in its own process group with REDLOCK_ELECTION,
    /// REDLOCK_TERM (the leadership's fence, also as REDLOCK_FENCE),
    /// REDLOCK_VALUE and REDLOCK_ADDR in its environment; signals are
    /// forwarded as by `run`. If the leadership is lost (the daemon says so,
    /// the stream breaks, or its validity runs out with no extension), the
    /// group gets SIGTERM at once and SIGKILL after --kill-after or when the
    /// last known validity ends, and redlockctl exits 80. A standby on
    /// another machine takes over within about --ttl of a leader's death.
    Elect(ElectArgs),
    /// The current leader of election NAME (value, term, since, time
    /// left), read from a quorum of masters. Exits 0 if there is one, 82
    /// if not.
    Leader(ElectionArg),
    /// Print the leader of election NAME, then one line per change (TERM,
    /// VALUE and SINCE tab-separated; `-` when there is no leader; --json:
    /// one object per line), in term order, until interrupted.
    Observe(ElectionArg),
}

/// The election of `leader` and `observe`.
#[derive(Debug, Args)]
pub(crate) struct ElectionArg {
    /// The election's name.
    pub name: String,
}

/// `elect`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct ElectArgs {
    /// The election's name.
    pub name: String,
    /// What this candidate publishes while it leads (an address, a host
    /// name): what `leader` and `observe` print.
    #[arg(long, default_value = "")]
    pub value: String,
    /// The leadership's time to live: a frozen or killed leader keeps it
    /// this long at most; the daemon extends it while COMMAND runs (at
    /// least 1s).
    #[arg(long, default_value = "10s", value_parser = run_ttl, value_name = "DURATION")]
    pub ttl: Duration,
    /// After the leadership is lost and the group was sent SIGTERM, how
    /// long before SIGKILL (never past the last known validity).
    #[arg(long, default_value = "10s", value_parser = duration, value_name = "DURATION")]
    pub kill_after: Duration,
    /// The command and its arguments (after `--`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<OsString>,
}

/// The resource of an operator's call.
#[derive(Debug, Args)]
pub(crate) struct ResourceArg {
    /// The resource (with --election: the election's name).
    pub resource: String,
    /// Name an election instead: its leadership (the lock its leader's
    /// Campaign holds).
    #[arg(long)]
    pub election: bool,
}

/// `list`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// Only resources starting with this (glob characters match themselves).
    #[arg(default_value = "")]
    pub prefix: String,
    /// Locks per call to the daemon (at most 1000; 0: the daemon's 100).
    #[arg(long, default_value_t = 0)]
    pub page_size: u32,
}

/// `health`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct HealthArgs {
    /// The service to ask about; "" asks whether the process is up at all.
    #[arg(long, default_value = "redlock.v1.LockService")]
    pub service: String,
}

/// `run`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The resource to lock.
    pub resource: String,
    /// The lock's time to live; the daemon extends it every third of it while
    /// the command runs (at least 1s).
    #[arg(long, default_value = "10s", value_parser = run_ttl, value_name = "DURATION")]
    pub ttl: Duration,
    /// How long to wait while someone else holds the lock: a duration (0:
    /// try once, the default), or `forever`: until granted, in rounds of the
    /// daemon's max_wait, retrying (with growing pauses) while the daemon is
    /// unavailable or unreachable; SIGINT or SIGTERM stops the wait.
    #[arg(long, default_value = "0s", value_parser = wait, value_name = "DURATION|forever")]
    pub wait: Wait,
    /// After the lock is lost and the group was sent SIGTERM, how long before
    /// SIGKILL (never past the lock's last known validity when the daemon is
    /// unreachable).
    #[arg(long, default_value = "10s", value_parser = duration, value_name = "DURATION")]
    pub kill_after: Duration,
    /// Lock-delay: if redlockctl vanishes (killed, its host or connection
    /// lost) and the lock expires, nobody gets it until this long after the
    /// expiry (0: none). A normal exit releases at once.
    #[arg(long, default_value = "0s", value_parser = duration, value_name = "DURATION")]
    pub lock_delay: Duration,
    /// Hold the lock at least this long from its acquisition, even if the
    /// command exits sooner (0: no minimum): the cron case, so that nodes
    /// whose clocks or schedules differ a little do not run a job twice.
    #[arg(long, default_value = "0s", value_parser = duration, value_name = "DURATION")]
    pub at_least: Duration,
    /// Take one of N permits of a semaphore on RESOURCE: at most N such
    /// commands run at once (0 or 1: a plain lock). The permit's index is
    /// in $REDLOCK_PERMIT.
    #[arg(long, default_value = "0", value_name = "N")]
    pub limit: u32,
    /// Take a shared (read) lock: it coexists with other --shared holders of
    /// RESOURCE, never with an exclusive one (the default). A waiting
    /// exclusive `run` stops new shared grants, so writers are not starved.
    /// Not with --lock-delay or --at-least.
    #[arg(long, conflicts_with_all = ["lock_delay", "at_least"])]
    pub shared: bool,
    /// Who holds the lock, for the daemon's logs.
    #[arg(long, default_value = "redlockctl")]
    pub owner: String,
    /// The command and its arguments (after `--`, or after RESOURCE). More
    /// resources before a `--` make one lock on all of them at once
    /// (`run a b c -- cmd`, see `run_multi.rs`).
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "COMMAND"
    )]
    pub command: Vec<OsString>,
}

/// `acquire`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct AcquireArgs {
    /// The resource to lock.
    pub resource: String,
    /// The lock's time to live.
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub ttl: Duration,
    /// How long to wait while someone else holds the lock: a duration (0:
    /// try once, the default), or `forever`: until granted, in rounds of the
    /// daemon's max_wait, retrying (with growing pauses) while the daemon is
    /// unavailable or unreachable; SIGINT or SIGTERM stops the wait.
    #[arg(long, default_value = "0s", value_parser = wait, value_name = "DURATION|forever")]
    pub wait: Wait,
    /// Who holds the lock, for the daemon's logs.
    #[arg(long, default_value = "redlockctl")]
    pub owner: String,
}

/// `extend`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct ExtendArgs {
    /// The lock.
    #[command(flatten)]
    pub lock: LockArgs,
    /// The new time to live.
    #[arg(long, value_parser = duration, value_name = "DURATION")]
    pub ttl: Duration,
}

/// A held lock: resource and token (as `acquire` printed them).
#[derive(Debug, Args)]
pub(crate) struct LockArgs {
    /// The locked resource.
    #[arg(env = "REDLOCK_RESOURCE")]
    pub resource: String,
    /// The token `acquire` printed (REDLOCK_TOKEN inside `run`).
    #[arg(env = "REDLOCK_TOKEN", hide_env_values = true)]
    pub token: String,
}

/// Parses the command line; `--help` and `--version` print and end with
/// [`Exit::Success`], mistakes print and end with [`Exit::Usage`].
pub(crate) fn parse() -> Result<Cli, Exit> {
    let table = exit::help();
    let command = Cli::command()
        .after_help(table.clone())
        .mut_subcommands(|sub| sub.after_help(table.clone()));
    let matches = command.try_get_matches().map_err(clap_exit)?;
    Cli::from_arg_matches(&matches).map_err(clap_exit)
}

fn clap_exit(error: clap::Error) -> Exit {
    let _ = error.print();
    if error.use_stderr() {
        Exit::Usage
    } else {
        Exit::Success
    }
}

/// A duration: `30s`, `1m`, `500ms`, `1h 30m`, or bare seconds (`30`, `0.5`).
pub(crate) fn duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(seconds) = text.parse::<f64>() {
        return Duration::try_from_secs_f64(seconds)
            .map_err(|_| format!("`{text}` is not a duration of zero or more seconds"));
    }
    humantime::parse_duration(text).map_err(|e| format!("`{text}`: {e} (try 30s, 1m, 500ms)"))
}

/// `--wait`: a duration, or `forever` (redlockctl then waits in rounds of
/// the daemon's max_wait until it is granted the lock or stopped).
pub(crate) fn wait(text: &str) -> Result<Wait, String> {
    if text.trim().eq_ignore_ascii_case("forever") {
        return Ok(Wait::Forever);
    }
    duration(text).map(Wait::For)
}

fn run_ttl(text: &str) -> Result<Duration, String> {
    let ttl = duration(text)?;
    if ttl < MIN_RUN_TTL {
        return Err(format!("`run` needs a ttl of at least {MIN_RUN_TTL:?}"));
    }
    Ok(ttl)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Durations read like `sleep` and humantime both.
    #[test]
    fn durations() {
        assert_eq!(duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(duration("0.5"), Ok(Duration::from_millis(500)));
        assert!(duration("-1").is_err());
        assert!(duration("soon").is_err());
        assert!(run_ttl("500ms").is_err());
        assert_eq!(wait("forever"), Ok(Wait::Forever));
        assert_eq!(wait("0"), Ok(Wait::For(Duration::ZERO)));
        assert_eq!(wait("5s"), Ok(Wait::For(Duration::from_secs(5))));
        assert!(wait("never").is_err());
    }

    /// The TLS and token flags go before or after the subcommand; a
    /// certificate needs its key.
    #[test]
    fn security_flags() {
        let cli = Cli::try_parse_from([
            "redlockctl",
            "--cacert",
            "ca.pem",
            "health",
            "--token-file",
            "t",
        ])
        .expect("parses");
        assert_eq!(cli.security.cacert, Some(PathBuf::from("ca.pem")));
        assert_eq!(cli.security.token_file, Some(PathBuf::from("t")));
        assert!(Cli::try_parse_from(["redlockctl", "--cert", "c.pem", "health"]).is_err());
        assert!(Cli::try_parse_from(["redlockctl", "--key", "k.pem", "health"]).is_err());
    }

    /// `run` takes the command after `--` or straight after the resource,
    /// with its own flags untouched.
    #[test]
    fn run_command_line() {
        let cli = Cli::try_parse_from(["redlockctl", "run", "r", "--ttl", "5s", "--", "ls", "-l"])
            .expect("parses");
        let Cmd::Run(run) = cli.command else {
            panic!("run")
        };
        assert_eq!(run.ttl, Duration::from_secs(5));
        assert_eq!(run.command, ["ls", "-l"]);
        let cli = Cli::try_parse_from(["redlockctl", "run", "r", "sh", "-c", "x", "--ttl", "1"])
            .expect("parses");
        let Cmd::Run(run) = cli.command else {
            panic!("run")
        };
        assert_eq!(run.command, ["sh", "-c", "x", "--ttl", "1"]);
        assert_eq!(run.limit, 0);
        let cli = Cli::try_parse_from(["redlockctl", "run", "--limit", "3", "r", "--", "x"])
            .expect("parses");
        let Cmd::Run(run) = cli.command else {
            panic!("run")
        };
        assert_eq!((run.limit, run.command), (3, vec!["x".into()]));
        let cli = Cli::try_parse_from([
            "redlockctl",
            "run",
            "jobs/nightly",
            "--at-least",
            "5m",
            "--lock-delay",
            "15s",
            "--",
            "./nightly.sh",
        ])
        .expect("parses");
        let Cmd::Run(run) = cli.command else {
            panic!("run")
        };
        assert_eq!(run.at_least, Duration::from_secs(300));
        assert_eq!(run.lock_delay, Duration::from_secs(15));
        assert_eq!(run.command, ["./nightly.sh"]);
        assert_eq!(run.ttl, Duration::from_secs(10));
    }

    /// The clap definition is consistent.
    #[test]
    fn clap_debug_assert() {
        Cli::command().debug_assert();
    }
}
