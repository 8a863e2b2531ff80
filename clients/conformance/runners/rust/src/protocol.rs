//! The runner's side of the line protocol `harness.py` speaks: `PASS <id>`
//! or `FAIL <id> <why>` once per scenario on stdout, and `FAULT <name>`,
//! after which the harness injects the fault and answers `ok` (or
//! `error <why>`) on stdin. Every line is flushed as written: the harness
//! acts on each as it comes.

use std::io::Write;
use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};

/// The harness's answers, one line each.
pub(crate) struct Harness {
    answers: Lines<BufReader<Stdin>>,
}

impl Harness {
    /// Reads the answers from stdin.
    pub(crate) fn new() -> Harness {
        Harness {
            answers: BufReader::new(tokio::io::stdin()).lines(),
        }
    }

    /// Asks the harness for the fault `name` and waits for its answer.
    pub(crate) async fn fault(&mut self, name: &str) -> Result<(), String> {
        say(&format!("FAULT {name}")).map_err(|e| format!("stdout: {e}"))?;
        let answer = self
            .answers
            .next_line()
            .await
            .map_err(|e| format!("stdin: {e}"))?
            .ok_or_else(|| format!("no answer from the harness for fault {name}"))?;
        // `ok`, or `ok <name>` as the harness's docstring spells it.
        let answer = answer.trim();
        if answer == "ok" || answer.starts_with("ok ") {
            Ok(())
        } else {
            Err(format!("the harness could not inject {name}: {answer}"))
        }
    }
}

/// Reports one scenario's result, on one line whatever the reason says.
pub(crate) fn report(id: &str, result: &Result<(), String>) -> std::io::Result<()> {
    match result {
        Ok(()) => say(&format!("PASS {id}")),
        Err(why) => say(&format!("FAIL {id} {}", why.replace(['\r', '\n'], " "))),
    }
}

/// Writes one line to stdout, flushed.
fn say(line: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}")?;
    out.flush()
}
