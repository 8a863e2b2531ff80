//! `redlockctl run`: take the lock through a Hold session, run the command
//! in its own process group while the lock is kept, forward signals to the
//! group, stop the group when the lock is lost, release when it exits.

use crate::args::RunArgs;
use crate::child::{self, Command};
use crate::client::{proto_duration, Target};
use crate::error::CtlError;
use crate::exit::Exit;
use crate::lease::{Lease, Lost, Released};
use crate::print::shell_word;
use crate::signals::Signals;
use crate::waiting::until_granted;
use redlockd_proto::pb;
use std::time::Duration;
use tokio::time::Instant;

/// Runs `args.command` under the lock; the exit is the command's status,
/// or [`Exit::Lost`] if the lock was lost while it ran.
pub(crate) async fn run(
    target: &Target,
    args: RunArgs,
    timeout: Duration,
) -> Result<Exit, CtlError> {
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
    let rounds = until_granted(&what, args.wait, |wait| {
        let acquire = pb::AcquireRequest {
            resource: match resources.is_empty() {
                true => args.resource.clone(),
                false => String::new(),
            },
            ttl: Some(proto_duration(args.ttl)),
            wait: Some(proto_duration(wait)),
            owner: args.owner.clone(),
            request_id: String::new(),
            lock_delay: Some(proto_duration(args.lock_delay)),
            hold_at_least: Some(proto_duration(args.at_least)),
            mode: match args.shared {
                true => pb::LockMode::Shared as i32,
                false => pb::LockMode::Exclusive as i32,
            },
            limit: args.limit,
            resources: resources.clone(),
        };
        let limit = wait.saturating_add(timeout);
        let what = what.clone();
        async move {
            match tokio::time::timeout(limit, Lease::open(target, acquire)).await {
                Ok(lease) => lease,
                Err(_) => Err(CtlError::TimedOut { what, limit }),
            }
        }
    });
    let mut lease = tokio::select! {
        lease = rounds => lease?,
        signal = signals.recv() => return Err(CtlError::Interrupted(signal)),
    };
    let mut env = vec![
        ("REDLOCK_RESOURCE", lease.lock.resource.clone()),
        ("REDLOCK_FENCE", lease.lock.fence.to_string()),
        ("REDLOCK_TOKEN", lease.lock.token.clone()),
        ("REDLOCK_PERMIT", lease.lock.permit.to_string()),
        ("REDLOCK_ADDR", target.url.clone()),
    ];
    env.extend(crate::run_multi::env(&lease.lock));
    env.extend(target.env.iter().cloned());
    let mut command = match Command::spawn(&args.command, &env) {
        Ok(command) => command,
        Err(error) => {
            report_release(&args.resource, lease.release(false).await);
            return Err(error);
        }
    };
    loop {
        tokio::select! {
            status = command.wait() => {
                let status = status?;
                report_release(&args.resource, lease.release(false).await);
                return Ok(Exit::Passed(child::shell_status(status)));
            }
            signal = signals.recv() => command.signal(signal),
            lost = lease.watch() => {
                stop(&mut command, &args, lost, &mut signals, lease).await?;
                return Ok(Exit::Lost);
            }
        }
    }
}

/// The lock is lost: SIGTERM to the group at once, SIGKILL at the latest
/// `--kill-after` later (sooner if the lock's validity ends sooner), then
/// release what may be left of the lock.
async fn stop(
    command: &mut Command,
    args: &RunArgs,
    lost: Lost,
    signals: &mut Signals,
    lease: Lease,
) -> Result<(), CtlError> {
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
    let status = {
        let stopping = command.stop(kill_at);
        tokio::pin!(stopping);
        loop {
            tokio::select! {
                status = &mut stopping => break status?,
                // Keep catching signals (so they cannot kill redlockctl
                // mid-stop); the group was told to stop already.
                _ = signals.recv() => {}
            }
        }
    };
    eprintln!(
        "redlockctl: {} ended ({}); exiting {}",
        command.program,
        child::describe(status),
        Exit::Lost.code()
    );
    if let Released::Failed(why) = lease.release(lost.gone).await {
        eprintln!("redlockctl: could not release what is left of the lock ({why})");
    }
    Ok(())
}

/// Says on stderr when releasing went wrong; silent when it went right.
fn report_release(resource: &str, released: Released) {
    match released {
        Released::Done { was_held: true } | Released::Nothing => {}
        Released::Done { was_held: false } => eprintln!(
            "redlockctl: released {}, but it had already expired or been taken over: \
             work done under it may have overlapped another holder's",
            shell_word(resource)
        ),
        Released::Failed(why) => eprintln!(
            "redlockctl: could not release {} ({why}); it expires within its ttl",
            shell_word(resource)
        ),
    }
}
