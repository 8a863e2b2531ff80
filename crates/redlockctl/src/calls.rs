//! The single calls: `acquire`, `extend`, `release`, `validate`, `health`.
//! Each connects, makes one call bounded by `--timeout` (plus the wait, for
//! `acquire`), prints the answer, and says how to exit. `acquire` waits in
//! rounds (`waiting.rs`) and stops cleanly on SIGINT or SIGTERM.

use crate::args::{AcquireArgs, ExtendArgs, HealthArgs, LockArgs};
use crate::client::{call, proto_duration, Target};
use crate::error::CtlError;
use crate::exit::Exit;
use crate::print;
use crate::signals::Signals;
use crate::waiting::until_granted;
use redlockd_proto::pb;
use std::time::Duration;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::HealthCheckRequest;

/// `acquire`: prints the lock.
pub(crate) async fn acquire(
    target: &Target,
    args: AcquireArgs,
    timeout: Duration,
    json: bool,
) -> Result<Exit, CtlError> {
    // A signal while waiting cancels the call in flight: the daemon drops
    // the waiter, and nothing is left locked.
    let mut signals =
        Signals::install().map_err(|e| CtlError::Local(format!("cannot catch signals: {e}")))?;
    let what = format!("acquire {}", print::shell_word(&args.resource));
    let rounds = until_granted(&what, args.wait, |wait| {
        let request = pb::AcquireRequest {
            resource: args.resource.clone(),
            ttl: Some(proto_duration(args.ttl)),
            wait: Some(proto_duration(wait)),
            owner: args.owner.clone(),
            request_id: String::new(),
            ..Default::default()
        };
        let what = what.as_str();
        async move {
            let mut client = target.connect().await?;
            call(what, wait.saturating_add(timeout), request, |r| {
                client.acquire(r)
            })
            .await
        }
    });
    let answer = tokio::select! {
        answer = rounds => answer?,
        signal = signals.recv() => return Err(CtlError::Interrupted(signal)),
    };
    let lock = answer
        .lock
        .ok_or_else(|| CtlError::Protocol(format!("{what}: granted without a lock")))?;
    println!("{}", print::lock(&lock, json));
    Ok(Exit::Success)
}

/// `extend`: prints the lock with its new validity.
pub(crate) async fn extend(
    target: &Target,
    args: ExtendArgs,
    timeout: Duration,
    json: bool,
) -> Result<Exit, CtlError> {
    let mut client = target.connect().await?;
    let what = format!("extend {}", print::shell_word(&args.lock.resource));
    let request = pb::ExtendRequest {
        resource: args.lock.resource,
        token: args.lock.token,
        ttl: Some(proto_duration(args.ttl)),
    };
    let answer = call(&what, timeout, request, |r| client.extend(r)).await?;
    let lock = answer
        .lock
        .ok_or_else(|| CtlError::Protocol(format!("{what}: extended without a lock")))?;
    println!("{}", print::lock(&lock, json));
    Ok(Exit::Success)
}

/// `release`: silent when it was held; exits [`Exit::NotHeld`] with a
/// warning when it was not.
pub(crate) async fn release(
    target: &Target,
    args: LockArgs,
    timeout: Duration,
    json: bool,
) -> Result<Exit, CtlError> {
    let mut client = target.connect().await?;
    let what = format!("release {}", print::shell_word(&args.resource));
    let request = pb::ReleaseRequest {
        resource: args.resource,
        token: args.token,
    };
    let answer = call(&what, timeout, request, |r| client.release(r)).await?;
    if let Some(line) = print::released(answer.was_held, json) {
        println!("{line}");
    }
    if answer.was_held {
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
    timeout: Duration,
    json: bool,
) -> Result<Exit, CtlError> {
    let mut client = target.connect().await?;
    let what = format!("validate {}", print::shell_word(&args.resource));
    let request = pb::ValidateRequest {
        resource: args.resource,
        token: args.token,
    };
    let answer = call(&what, timeout, request, |r| client.validate(r)).await?;
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
    let mut client = target.health().await?;
    let what = format!("health {}", print::shell_word(&args.service));
    let request = HealthCheckRequest {
        service: args.service,
    };
    let answer = call(&what, timeout, request, |r| client.check(r)).await?;
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
