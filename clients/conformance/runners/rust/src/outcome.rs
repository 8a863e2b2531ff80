//! What a step that calls the daemon must observe: success, or, with
//! `"error": <kind>`, that kind of failure (and with `"field"`, an
//! INVALID_ARGUMENT naming that field). Kinds are read from the client's
//! `Error` variants, never from raw status codes, as the suite requires.

use crate::spec::Step;
use redlockd_client::Error;

/// The scenario language's word for the kind of `error`; `None` for a
/// kind the language does not name.
pub(crate) fn kind(error: &Error) -> Option<&'static str> {
    Some(match error {
        Error::Held(_) => "held_elsewhere",
        Error::NotHeld(_) => "not_held",
        Error::Unavailable(_) => "unavailable",
        Error::DeadlineExceeded(_) => "deadline",
        Error::InvalidArgument(_) => "invalid_argument",
        Error::ResourceExhausted(_) => "resource_exhausted",
        Error::Unauthenticated(_) => "unauthenticated",
        Error::PermissionDenied(_) => "permission_denied",
        Error::Lost(_) => "lost",
        _ => return None,
    })
}

/// Checks a call's result against the step: the value when the call
/// succeeded as expected, `None` when it failed as expected, an error
/// saying what differed otherwise.
pub(crate) fn expect<T>(step: &Step, result: Result<T, Error>) -> Result<Option<T>, String> {
    let error = match (result, &step.error) {
        (Ok(value), None) => return Ok(Some(value)),
        (Ok(_), Some(expected)) => return Err(format!("expected {expected}, got success")),
        (Err(error), _) => error,
    };
    let got = kind(&error).map_or_else(|| format!("other({error})"), str::to_owned);
    let Some(expected) = &step.error else {
        return Err(format!("expected success, got {got}: {error}"));
    };
    if &got != expected {
        return Err(format!("expected {expected}, got {got}: {error}"));
    }
    if let Some(field) = &step.field {
        if error.field() != Some(field.as_str()) {
            return Err(format!(
                "expected field {field}, got {:?} ({error})",
                error.field()
            ));
        }
    }
    Ok(None)
}
