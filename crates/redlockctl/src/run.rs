//! `redlockctl run`: take the lock through a Hold session (the client
//! crate's `Lease`, reattaching: see `held.rs`), run the command in its own
//! process group while the lock is kept, forward signals to the group,
//! stop the group when the lock is lost, release when it exits.

use crate::args::RunArgs;
use crate::child::{self, Command};
use crate::error::CtlError;
use crate::exit::Exit;
use crate::held::{self, Held, Released};
use crate::print::shell_word;
use crate::signals::Signals;
use crate::target::{interrupted, Target};
use crate::waiting::until_granted;
use redlockd_client::{Acquire, Client, Lease};
use std::cell::RefCell;
use std::time::Duration;
use tokio::time::Instant;

/// Runs `args.command` under the lock; the exit is the command's status,
/// or [`Exit::Lost`] if the lock was lost while it ran.
pub(crate) async fn run(target: &Target, args: RunArgs) -> Result<Exit, CtlError> {
    // Handlers first: a signal while waiting for the lock must not kill
    // redlockctl in a way that skips the daemon's cleanup.
    let mut signals =
        Signals::install().map_err(|e| CtlError::Local(format!("cannot catch signals: {e}")))?;
    let (resources, args) =
        crate::run_multi::split(args, crate::run_multi::separators_after_run())?;
    let what = match resources.is_empty() {
        true => format!("run {}", shell_word(&args.resource)),
        false => format!("run {}", crate::run_multi::words(&resources)),
    };
    let last = RefCell::new(None);
    let rounds = until_granted(&what, args.wait, |wait| {
        let (what, last, args, resources) = (what.as_str(), &last, &args, &resources);
        async move {
            let client = target.connect_round(last).await?;
            hold(&client, args, resources, wait)
                .await
                .map_err(|error| CtlError::call(what, error))
        }
    });
    let lease = tokio::select! {
        lease = rounds => lease?,
        signal = signals.recv() => {
            interrupted(&last).await;
            return Err(CtlError::Interrupted(signal));
        }
    };
    let lock = lease.lock();
    let mut env = vec![
        ("REDLOCK_RESOURCE", lock.resource().to_owned()),
        ("REDLOCK_FENCE", lock.fence().to_string()),
        ("REDLOCK_TOKEN", lock.token().to_owned()),
        ("REDLOCK_PERMIT", lock.permit().to_string()),
        ("REDLOCK_ADDR", target.url.clone()),
    ];
    env.extend(crate::run_multi::env(&lock));
    env.extend(target.env.iter().cloned());
    let mut command = match Command::spawn(&args.command, &env) {
        Ok(command) => command,
        Err(error) => {
            held::report_release(&args.resource, held::release(lease).await);
            return Err(error);
        }
    };
    let mut kept = Held::new(&lease, &args.resource);
    loop {
        tokio::select! {
            status = command.wait() => {
                let status = status?;
                held::report_release(&args.resource, held::release(lease).await);
                return Ok(Exit::Passed(child::shell_status(status)));
            }
            signal = signals.recv() => command.signal(signal),
            Some(event) = kept.next() => kept.say(&event, &lease),
            _ = lease.lost() => {
                stop(&mut command, &args, &mut signals, lease).await?;
                return Ok(Exit::Lost);
            }
        }
    }
}

/// One round's Hold: the lock on `args.resource`, or on `resources` all
/// at once when there are several; waiting up to `wait`, reattaching.
fn hold(client: &Client, args: &RunArgs, resources: &[String], wait: Duration) -> Acquire<Lease> {
    let (first, more) = match resources.split_first() {
        Some((first, more)) => (first.clone(), more),
        None => (args.resource.clone(), &[][..]),
    };
    let hold = client
        .hold(first, args.ttl)
        .resources(more.iter().cloned())
        .wait(wait)
        .owner(args.owner.as_str())
        .limit(args.limit)
        .lock_delay(args.lock_delay)
        .hold_at_least(args.at_least)
        .reattach();
    match args.shared {
        true => hold.shared(),
        false => hold,
    }
}

/// The lock is lost: SIGTERM to the group at once, SIGKILL at the latest
/// `--kill-after` later (sooner if the lock may still be held and its
/// validity ends sooner), then release what may be left of the lock.
async fn stop(
    command: &mut Command,
    args: &RunArgs,
    signals: &mut Signals,
    lease: Lease,
) -> Result<(), CtlError> {
    let lost = held::lost(&lease, args.ttl).await;
    let now = Instant::now();
    let mut kill_at = now + args.kill_after;
    if let Some(kill_by) = lost.kill_by {
        kill_at = kill_at.min(kill_by);
    }
    eprintln!(
        "redlockctl: lost the lock on {}: {}; stopping {} (SIGTERM to process group {}, \
         SIGKILL in {} ms if it still runs)",
        shell_word(&args.resource),
        lost.reason,
        command.program,
        command.group(),
        kill_at.saturating_duration_since(now).as_millis()
    );
    command.stop_lost(kill_at, signals).await?;
    if lost.gone {
        return Ok(());
    }
    if let Released::Failed(why) = held::release(lease).await {
        eprintln!("redlockctl: could not release what is left of the lock ({why})");
    }
    Ok(())
}
