//! `redlockctl`: quorum locks from redlockd, from the shell.
//!
//! `redlockctl run RESOURCE -- COMMAND...` holds a lock exactly as long as a
//! command runs; `elect NAME -- COMMAND...` runs one only while leading an
//! election, `leader` and `observe` show who leads (`elect.rs`); `acquire`, `extend`, `release` and `validate` are the
//! single calls; `inspect`, `list` and `force-release` the operator's
//! (`admin`). Every outcome has its own exit status (`exit.rs`).
//!
//! Every call to the daemon goes through the client crate,
//! `redlockd-client`: its builder (TLS, bearer token, timeouts), its calls,
//! its reattaching `Lease` for `run`, and its authenticated channel for the
//! admin and health services.
//!
//! Modules: `args` (the command line), `exit` (the exit-code table),
//! `error` (what goes wrong, in words), `target` (the flags as the client
//! crate's builder, and as `run`'s command's environment), `waiting`
//! (`--wait`, in rounds), `calls` (the single calls), `print` (their
//! output), `admin` and `services` (the admin and health services), `run`
//! with `held` (what it says about its lease, and how hard to stop),
//! `run_multi` (several resources), `child` (the command's process group)
//! and `signals`.

mod admin;
mod args;
mod calls;
mod child;
mod elect;
mod error;
mod exit;
mod held;
mod print;
mod run;
mod run_multi;
mod services;
mod signals;
mod target;
mod waiting;

use args::{Cli, Cmd};
use error::CtlError;
use exit::Exit;
use std::process::ExitCode;
use target::Target;

fn main() -> ExitCode {
    let cli = match args::parse() {
        Ok(cli) => cli,
        Err(exit) => return exit.into(),
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("redlockctl: cannot start the async runtime: {error}");
            return Exit::Other.into();
        }
    };
    match runtime.block_on(dispatch(cli)) {
        Ok(exit) => exit.into(),
        Err(error) => {
            eprintln!("redlockctl: {error}");
            Exit::from(&error).into()
        }
    }
}

async fn dispatch(cli: Cli) -> Result<Exit, CtlError> {
    let target = Target::parse(&cli.addr, cli.timeout, &cli.security)?;
    let (timeout, json) = (cli.timeout, cli.json);
    match cli.command {
        Cmd::Run(args) => run::run(&target, args).await,
        Cmd::Acquire(args) => calls::acquire(&target, args, json).await,
        Cmd::Extend(args) => calls::extend(&target, args, json).await,
        Cmd::Release(args) => calls::release(&target, args, json).await,
        Cmd::Validate(args) => calls::validate(&target, args, json).await,
        Cmd::Health(args) => calls::health(&target, args, timeout, json).await,
        Cmd::Inspect(args) => admin::inspect(&target, args, timeout, json).await,
        Cmd::List(args) => admin::list(&target, args, timeout, json).await,
        Cmd::ForceRelease(args) => admin::force_release(&target, args, timeout, json).await,
        Cmd::Elect(args) => elect::elect(&target, args).await,
        Cmd::Leader(args) => elect::leader(&target, args, timeout, json).await,
        Cmd::Observe(args) => elect::observe(&target, args, timeout, json).await,
    }
}
