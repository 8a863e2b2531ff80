//! `redlockctl run a b c -- cmd`: one lock on several resources at once
//! (`AcquireRequest.resources`), all or none.
//!
//! Parsing: clap takes the first word as RESOURCE and the rest as the
//! command; it consumes a `--` right after RESOURCE, and keeps one that
//! comes later. So when the command (as clap left it) holds every `--` of
//! the command line, its first `--` ends the list of resources:
//! `run a b c -- cmd` locks a, b and c. When clap consumed one (`run a --
//! cmd x -- y`), it is one resource, as before, whatever the command
//! holds; `run a cmd` too. The one reading that changed: `run a cmd x --
//! y` (a command with a `--` of its own, after a single resource without
//! the separator) now names resources a, cmd, x; write `run a -- cmd x --
//! y` for that.

use crate::args::RunArgs;
use crate::error::CtlError;
use crate::print::shell_word;
use redlockd_client::Lock;

/// The resources of `args` when it names several before a `--` (empty:
/// the plain `args.resource` alone), and `args` with its command only.
/// `separators`: how many `--` the command line holds after `run`.
pub(crate) fn split(
    mut args: RunArgs,
    separators: usize,
) -> Result<(Vec<String>, RunArgs), CtlError> {
    let kept = args.command.iter().filter(|word| *word == "--").count();
    let Some(at) = args.command.iter().position(|word| word == "--") else {
        return Ok((Vec::new(), args));
    };
    if kept < separators {
        // clap consumed the `--` right after RESOURCE.
        return Ok((Vec::new(), args));
    }
    let command = args.command.split_off(at + 1);
    args.command.pop();
    let mut resources = vec![args.resource.clone()];
    for word in std::mem::replace(&mut args.command, command) {
        let name = word
            .into_string()
            .map_err(|word| CtlError::Usage(format!("resource {word:?} is not UTF-8")))?;
        resources.push(name);
    }
    if args.command.is_empty() {
        return Err(CtlError::Usage("no command after `--`".to_owned()));
    }
    Ok((resources, args))
}

/// How many `--` this process's command line holds after the `run` word.
pub(crate) fn separators_after_run() -> usize {
    std::env::args_os()
        .skip_while(|word| word != "run")
        .filter(|word| word == "--")
        .count()
}

/// The resources, as shell words, for messages.
pub(crate) fn words(resources: &[String]) -> String {
    resources
        .iter()
        .map(|r| shell_word(r))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The command's environment for a lock on several resources:
/// `REDLOCK_RESOURCES` and `REDLOCK_FENCES`, one line per resource in the
/// order given (`REDLOCK_RESOURCE` and `REDLOCK_FENCE` are the first's).
/// Nothing for a lock on one resource.
pub(crate) fn env(lock: &Lock) -> Vec<(&'static str, String)> {
    if lock.resources().is_empty() {
        return Vec::new();
    }
    let names: Vec<&str> = lock
        .resources()
        .iter()
        .map(|r| r.resource.as_str())
        .collect();
    let fences: Vec<String> = lock
        .resources()
        .iter()
        .map(|r| r.fence.to_string())
        .collect();
    vec![
        ("REDLOCK_RESOURCES", names.join("\n")),
        ("REDLOCK_FENCES", fences.join("\n")),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        run: RunArgs,
    }

    fn parse(words: &[&str]) -> Result<(Vec<String>, Vec<String>, String), CtlError> {
        let cli = Cli::try_parse_from(std::iter::once("run").chain(words.iter().copied()))
            .map_err(|e| CtlError::Usage(e.to_string()))?;
        let separators = words.iter().filter(|w| **w == "--").count();
        let (resources, args) = split(cli.run, separators)?;
        let command = args
            .command
            .iter()
            .map(|w| w.to_string_lossy().into_owned())
            .collect();
        Ok((resources, command, args.resource))
    }

    /// Several resources before `--`; one resource as before.
    #[test]
    fn resources_before_the_separator() {
        let (resources, command, _) = parse(&["a", "b", "c", "--", "echo", "hi"]).expect("ok");
        assert_eq!(resources, ["a", "b", "c"]);
        assert_eq!(command, ["echo", "hi"]);
        let (resources, command, first) = parse(&["a", "--", "cmd", "x", "--", "y"]).expect("ok");
        assert!(resources.is_empty());
        assert_eq!(first, "a");
        assert_eq!(command, ["cmd", "x", "--", "y"]);
        let (resources, command, _) = parse(&["a", "b", "--", "cmd", "--", "y"]).expect("ok");
        assert_eq!(resources, ["a", "b"]);
        assert_eq!(command, ["cmd", "--", "y"]);
        let (resources, command, _) = parse(&["a", "cmd"]).expect("ok");
        assert!(resources.is_empty());
        assert_eq!(command, ["cmd"]);
        assert!(parse(&["a", "b", "--"]).is_err());
    }
}
