//! The exit-code table: the one place where an outcome of redlockctl
//! becomes an exit status. Codes sit in 80-90 (lock outcomes) and at 64
//! (usage, as in sysexits.h), away from the 1, 2, 126, 127 and 128+N that
//! commands and shells commonly use; `run` passes its command's own status
//! through, so a script can tell the command's failures from the lock's.

use crate::error::CtlError;
use std::process::ExitCode;
use tonic::Code;

/// How redlockctl ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Done as asked (for `validate`: held; for `release`: it was held).
    Success,
    /// `run`: the command's own exit status (128+N if a signal N ended it),
    /// or 128+N when signal N stopped redlockctl before the command started.
    Passed(u8),
    /// Bad flags or arguments: nothing was sent.
    Usage,
    /// `run`: the lock was lost while the command ran; the command was stopped.
    Lost,
    /// ABORTED: the resource stayed held by someone else for the whole wait.
    Busy,
    /// FAILED_PRECONDITION, or the daemon says the token no longer holds the
    /// lock (`validate` not held, `release` with `was_held = false`).
    NotHeld,
    /// UNAVAILABLE: too few masters answered in time (or the connection
    /// broke mid-call); nothing is left locked by the call.
    Unavailable,
    /// DEADLINE_EXCEEDED: the call's deadline (`--wait` + `--timeout`) ran out.
    DeadlineExceeded,
    /// RESOURCE_EXHAUSTED: a daemon limit (waiters, sessions) was hit.
    ResourceExhausted,
    /// INVALID_ARGUMENT: the daemon rejected the request.
    InvalidArgument,
    /// UNAUTHENTICATED.
    Unauthenticated,
    /// PERMISSION_DENIED.
    PermissionDenied,
    /// The daemon at `--addr` could not be reached, or closed the
    /// connection before answering.
    CannotConnect,
    /// Any other status, an answer outside the contract, or a local failure.
    Other,
    /// `run`: the command was found but could not be executed.
    CannotExecute,
    /// `run`: the command was not found.
    CommandNotFound,
}

/// Every code with its meaning, as `--help` and `docs/operations.md` list them.
pub(crate) const TABLE: &[(&str, &str)] = &[
    ("0", "success; `run`: the command exited 0"),
    ("64", "usage error: bad flag, argument or duration, or a --cacert, --cert, --key or --token-file that cannot be read; nothing was sent"),
    ("80", "`run`: the lock was lost while the command ran; the command was stopped"),
    ("81", "ABORTED: the resource stayed held by someone else for the whole --wait; `run` did not start the command"),
    ("82", "FAILED_PRECONDITION, or not held: `extend` failed, `validate` says not held, `release` says was_held = false"),
    ("83", "UNAVAILABLE: too few masters answered in time, or the connection broke; nothing left locked; safe to retry"),
    ("84", "DEADLINE_EXCEEDED: the call took longer than --wait plus --timeout"),
    ("85", "RESOURCE_EXHAUSTED: a daemon limit (waiters, sessions) was hit"),
    ("86", "INVALID_ARGUMENT: the daemon rejected the request (the message names the field)"),
    ("87", "UNAUTHENTICATED"),
    ("88", "PERMISSION_DENIED"),
    ("89", "cannot connect to the daemon at --addr, or it closed the connection unanswered (under mutual TLS: no client certificate it trusts)"),
    ("90", "any other gRPC status, an unexpected answer, or a local failure"),
    ("126", "`run`: the command could not be executed"),
    ("127", "`run`: the command was not found"),
    ("128+N", "`run`: the command was killed by signal N; `run`, `acquire`: signal N stopped redlockctl while it waited for the lock (nothing left locked)"),
    ("other", "`run`: the command's own exit status"),
];

impl Exit {
    /// The process exit status.
    pub fn code(self) -> u8 {
        match self {
            Exit::Success => 0,
            Exit::Passed(code) => code,
            Exit::Usage => 64,
            Exit::Lost => 80,
            Exit::Busy => 81,
            Exit::NotHeld => 82,
            Exit::Unavailable => 83,
            Exit::DeadlineExceeded => 84,
            Exit::ResourceExhausted => 85,
            Exit::InvalidArgument => 86,
            Exit::Unauthenticated => 87,
            Exit::PermissionDenied => 88,
            Exit::CannotConnect => 89,
            Exit::Other => 90,
            Exit::CannotExecute => 126,
            Exit::CommandNotFound => 127,
        }
    }

    /// The exit for a gRPC status the daemon (or the transport) answered.
    pub fn of_status(code: Code) -> Exit {
        match code {
            Code::Ok => Exit::Success,
            Code::Aborted => Exit::Busy,
            Code::FailedPrecondition => Exit::NotHeld,
            Code::Unavailable => Exit::Unavailable,
            Code::DeadlineExceeded => Exit::DeadlineExceeded,
            Code::ResourceExhausted => Exit::ResourceExhausted,
            Code::InvalidArgument => Exit::InvalidArgument,
            Code::Unauthenticated => Exit::Unauthenticated,
            Code::PermissionDenied => Exit::PermissionDenied,
            _ => Exit::Other,
        }
    }

    /// The exit for a signal that ended a command or redlockctl: 128+N.
    pub fn of_signal(signal: i32) -> Exit {
        Exit::Passed(u8::try_from(128 + signal.clamp(0, 127)).unwrap_or(u8::MAX))
    }
}

impl From<&CtlError> for Exit {
    fn from(error: &CtlError) -> Exit {
        match error {
            CtlError::Usage(_) | CtlError::File { .. } => Exit::Usage,
            CtlError::Connect { .. } | CtlError::Closed { .. } => Exit::CannotConnect,
            CtlError::Status { status, .. } => Exit::of_status(status.code()),
            CtlError::TimedOut { .. } => Exit::DeadlineExceeded,
            CtlError::Spawn { source, .. } => match source.kind() {
                std::io::ErrorKind::NotFound => Exit::CommandNotFound,
                _ => Exit::CannotExecute,
            },
            CtlError::Interrupted(signal) => Exit::of_signal(*signal as i32),
            CtlError::Local(_) => Exit::Other,
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(exit: Exit) -> ExitCode {
        ExitCode::from(exit.code())
    }
}

/// The table as `--help` shows it.
pub(crate) fn help() -> String {
    let mut text = String::from("Exit status:\n");
    for (code, meaning) in TABLE {
        text.push_str(&format!("  {code:>5}  {meaning}\n"));
    }
    text
}

/// The table as `docs/operations.md` shows it (markdown; a test keeps them
/// equal).
#[cfg(test)]
pub(crate) fn markdown() -> String {
    let mut text = String::from("| exit | meaning |\n| --- | --- |\n");
    for (code, meaning) in TABLE {
        text.push_str(&format!("| {code} | {meaning} |\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: &[Exit] = &[
        Exit::Success,
        Exit::Usage,
        Exit::Lost,
        Exit::Busy,
        Exit::NotHeld,
        Exit::Unavailable,
        Exit::DeadlineExceeded,
        Exit::ResourceExhausted,
        Exit::InvalidArgument,
        Exit::Unauthenticated,
        Exit::PermissionDenied,
        Exit::CannotConnect,
        Exit::Other,
        Exit::CannotExecute,
        Exit::CommandNotFound,
    ];

    /// Every outcome has its own code, and every code is in the table.
    #[test]
    fn codes_are_distinct_and_documented() {
        let mut seen = std::collections::HashSet::new();
        for exit in ALL {
            assert!(seen.insert(exit.code()), "{exit:?} shares its code");
            assert!(
                TABLE
                    .iter()
                    .any(|(code, _)| *code == exit.code().to_string()),
                "{exit:?} missing from the table"
            );
        }
        assert_eq!(
            TABLE.len(),
            ALL.len() + 2,
            "the table has only 128+N and other more"
        );
    }

    /// The statuses of the contract each map to a distinct exit.
    #[test]
    fn contract_statuses() {
        let codes = [
            Code::Aborted,
            Code::FailedPrecondition,
            Code::Unavailable,
            Code::DeadlineExceeded,
            Code::ResourceExhausted,
            Code::InvalidArgument,
            Code::Unauthenticated,
            Code::PermissionDenied,
            Code::Internal,
        ];
        let exits: std::collections::HashSet<u8> =
            codes.iter().map(|c| Exit::of_status(*c).code()).collect();
        assert_eq!(exits.len(), codes.len());
        assert_eq!(Exit::of_signal(15).code(), 143);
    }

    /// The operations doc's table is the one in the code.
    #[test]
    fn readme_shows_this_table() {
        let readme = include_str!("../../../docs/operations.md");
        assert!(
            readme.contains(&markdown()),
            "docs/operations.md's exit-code table differs; it should read:\n{}",
            markdown()
        );
    }
}
