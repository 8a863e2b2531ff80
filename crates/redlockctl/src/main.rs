//! `redlockctl`: quorum locks from redlockd, from the shell.
//!
//! `redlockctl run RESOURCE -- COMMAND...` holds a lock exactly as long as a
//! command runs; `acquire`, `extend`, `release` and `validate` are the
//! single calls; `inspect`, `list` and `force-release` the operator's
//! (`admin`). Every outcome has its own exit status (`exit.rs`).
//!
//! Modules: `args` (the command line), `exit` (the exit-code table),
//! `error` (what goes wrong, in words), `client` (reaching the daemon)
//! with `security` (TLS, bearer token), `waiting` (`--wait`, in rounds),
//! `calls` (the single calls), `print` (their output), `run` with `lease`
//! (keeping the lock), `child` (the command's process group) and `signals`.

mod admin;
mod args;
mod calls;
mod child;
mod client;
mod error;
mod exit;
mod lease;
mod print;
mod run;
mod run_multi;
mod security;
mod signals;
mod waiting;

use args::{Cli, Cmd};
use client::Target;
use error::CtlError;
use exit::Exit;
use std::process::ExitCode;

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
        Cmd::Run(args) => run::run(&target, args, timeout).await,
        Cmd::Acquire(args) => calls::acquire(&target, args, timeout, json).await,
        Cmd::Extend(args) => calls::extend(&target, args, timeout, json).await,
        Cmd::Release(args) => calls::release(&target, args, timeout, json).await,
        Cmd::Validate(args) => calls::validate(&target, args, timeout, json).await,
        Cmd::Health(args) => calls::health(&target, args, timeout, json).await,
        Cmd::Inspect(args) => admin::inspect(&target, args, timeout, json).await,
        Cmd::List(args) => admin::list(&target, args, timeout, json).await,
        Cmd::ForceRelease(args) => admin::force_release(&target, args, timeout, json).await,
    }
}
