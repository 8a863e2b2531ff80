//! The single calls: `acquire`, `extend`, `release`, `validate`, `health`.
//! Each connects through the client crate, makes one call bounded by
//! `--timeout` (the client's call timeout; plus the wait, for `acquire`),
//! prints the answer, and says how to exit. `acquire` waits in rounds
//! (`waiting.rs`) and stops cleanly on SIGINT or SIGTERM.

use crate::args::{AcquireArgs, ExtendArgs, HealthArgs, LockArgs};
use crate::error::CtlError;
use crate::exit::Exit;
use crate::print;
use crate::services::{self, call};
use crate::signals::Signals;
use crate::target::{interrupted, Target};
use crate::waiting::until_granted;
use redlockd_client::Lock;
use std::cell::RefCell;
use std::time::Duration;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::HealthCheckRequest;

/// `acquire`: prints the lock.
pub(crate) async fn acquire(
    target: &Target,
    args: AcquireArgs,
    json: bool,
) -> Result<Exit, CtlError> {
    // A signal while waiting cancels the call in flight: the daemon drops
    // the waiter, and the client crate releases in the background what the
    // call may have got an instant before (waited for below).
    let mut signals =
        Signals::install().map_err(|e| CtlError::Local(format!("cannot catch signals: {e}")))?;
    let what = format!("acquire {}", print::shell_word(&args.resource));
    let last = RefCell::new(None);
    let rounds = until_granted(&what, args.wait, |wait| {
        let (what, last, args) = (what.as_str(), &last, &args);
        async move {
            let client = target.connect_round(last).await?;
            client
                .acquire(&args.resource, args.ttl)
                .wait(wait)
                .owner(&args.owner)
                .await
                .map_err(|error| CtlError::call(what, error))
        }
    });
    let lock = tokio::select! {
        lock = rounds => lock?,
        signal = signals.recv() => {
            interrupted(&last).await;
            return Err(CtlError::Interrupted(signal));
        }
    };
    println!("{}", print::lock(&lock, json));
    Ok(Exit::Success)
}

/// `extend`: prints the lock with its new validity.
pub(crate) async fn extend(
    target: &Target,
    args: ExtendArgs,
    json: bool,
) -> Result<Exit, CtlError> {
    let client = target.connect().await?;
    let what = format!("extend {}", print::shell_word(&args.lock.resource));
    let lock = Lock::from_parts(args.lock.resource, args.lock.token);
    let lock = client
        .extend(&lock, args.ttl)
        .await
        .map_err(|error| CtlError::call(&what, error))?;
    println!("{}", print::lock(&lock, json));
    Ok(Exit::Success)
}

/// `release`: silent when it was held; exits [`Exit::NotHeld`] with a
/// warning when it was not.
pub(crate) async fn release(target: &Target, args: LockArgs, json: bool) -> Result<Exit, CtlError> {
    let client = target.connect().await?;
    let what = format!("release {}", print::shell_word(&args.resource));
    let was_held = client
        .release(&Lock::from_parts(args.resource, args.token))
        .await
        .map_err(|error| CtlError::call(&what, error))?;
    if let Some(line) = print::released(was_held, json) {
        println!("{line}");
    }
    if was_held {
        return Ok(Exit::Success);
    }
    eprintln!(
        "redlockctl: {what}: the lock had already expired or been taken over (was_held = false): \
         work done under it may have overlapped another holder's"
    );
    Ok(Exit::NotHeld)
}

/// `validate`: prints whether it is held and for how long; exits
/// [`Exit::NotHeld`] when it is not.
pub(crate) async fn validate(
    target: &Target,
    args: LockArgs,
    json: bool,
) -> Result<Exit, CtlError> {
    let client = target.connect().await?;
    let what = format!("validate {}", print::shell_word(&args.resource));
    let answer = client
        .validate(&Lock::from_parts(args.resource, args.token))
        .await
        .map_err(|error| CtlError::call(&what, error))?;
    println!("{}", print::validity(&answer, json));
    Ok(if answer.held {
        Exit::Success
    } else {
        Exit::NotHeld
    })
}

/// `health`: one grpc.health.v1 Check; SERVING exits 0, anything else 83.
pub(crate) async fn health(
    target: &Target,
    args: HealthArgs,
    timeout: Duration,
    json: bool,
) -> Result<Exit, CtlError> {
    let mut health = services::health(&target.connect().await?);
    let what = format!("health {}", print::shell_word(&args.service));
    let request = HealthCheckRequest {
        service: args.service,
    };
    let answer = call(&what, timeout, request, |r| health.check(r)).await?;
    let status = ServingStatus::try_from(answer.status).unwrap_or(ServingStatus::Unknown);
    let name = status.as_str_name();
    match json {
        true => println!("{{\"status\":\"{name}\"}}"),
        false => println!("REDLOCK_HEALTH={name}"),
    }
    Ok(match status {
        ServingStatus::Serving => Exit::Success,
        _ => Exit::Unavailable,
    })
}
