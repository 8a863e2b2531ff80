//! The launcher's words: its command line, a daemon's options (on the
//! command line for the first daemon, after `daemon` for each other one)
//! and the command lines it reads on stdin.

use std::path::PathBuf;

/// How many masters unless `--masters` says otherwise: Redlock's usual five.
const DEFAULT_MASTERS: usize = 5;

/// What the command line asks for.
#[derive(Debug)]
pub(crate) struct Launch {
    /// `--masters N`.
    pub(crate) masters: usize,
    /// The first daemon.
    pub(crate) daemon: DaemonOptions,
}

/// How to start one daemon, beyond what every daemon gets (the masters,
/// a free port, metrics off, `server.shutdown_grace` 1 s).
#[derive(Debug, Default)]
pub(crate) struct DaemonOptions {
    /// `--set KEY=VALUE`: configuration keys as in the configuration file
    /// (`redlock.node_timeout=250ms`), applied last, so they win.
    pub(crate) settings: Vec<(String, String)>,
    /// `--toml TEXT`: a configuration file, for what `REDLOCKD__*`
    /// variables cannot say (`[[auth.clients]]`).
    pub(crate) toml: Option<String>,
    /// `--http`: the HTTP gateway too, on a free port.
    pub(crate) http: bool,
    /// `--tls`: serve TLS with a certificate of a fresh private CA (the
    /// kit's `pki`), whose CA file the answer names.
    pub(crate) tls: bool,
    /// `--probe-ca FILE`: the readiness probe speaks TLS trusting this CA
    /// (for a daemon given its own `server.tls.*` settings).
    pub(crate) probe_ca: Option<PathBuf>,
    /// `--probe-cert FILE --probe-key FILE`: the probe's client
    /// certificate, for a daemon that asks for one (mutual TLS).
    pub(crate) probe_identity: Option<(PathBuf, PathBuf)>,
}

/// The command line (without the program's name).
pub(crate) fn launch(args: &[String]) -> Result<Launch, String> {
    let mut masters = DEFAULT_MASTERS;
    let mut rest = Vec::new();
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if arg == "--masters" {
            masters = value(arg, args.next())?
                .parse()
                .ok()
                .filter(|n| *n > 0)
                .ok_or("--masters wants a number above zero")?;
        } else {
            rest.push(arg.clone());
        }
    }
    Ok(Launch {
        masters,
        daemon: daemon(&rest)?,
    })
}

/// A daemon's options: the first daemon's on the command line, each other
/// one's after `daemon` on stdin.
pub(crate) fn daemon(args: &[String]) -> Result<DaemonOptions, String> {
    let mut options = DaemonOptions::default();
    let (mut cert, mut key) = (None, None);
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--set" => {
                let pair = value(arg, args.next())?;
                let (key, value) = pair
                    .split_once('=')
                    .ok_or_else(|| format!("--set {pair}: want KEY=VALUE"))?;
                options.settings.push((key.to_owned(), value.to_owned()));
            }
            "--toml" => options.toml = Some(value(arg, args.next())?.to_owned()),
            "--http" => options.http = true,
            "--tls" => options.tls = true,
            "--probe-ca" => options.probe_ca = Some(value(arg, args.next())?.into()),
            "--probe-cert" => cert = Some(PathBuf::from(value(arg, args.next())?)),
            "--probe-key" => key = Some(PathBuf::from(value(arg, args.next())?)),
            other => return Err(format!("unknown option {other}")),
        }
    }
    options.probe_identity = match (cert, key) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        _ => return Err("--probe-cert and --probe-key go together".into()),
    };
    if options.probe_identity.is_some() && options.probe_ca.is_none() {
        return Err("--probe-cert needs --probe-ca".into());
    }
    if options.tls && options.probe_ca.is_some() {
        return Err("--tls makes its own CA: no --probe-ca with it".into());
    }
    Ok(options)
}

/// The value after `flag`.
fn value<'a>(flag: &str, next: Option<&'a String>) -> Result<&'a str, String> {
    next.map(String::as_str)
        .ok_or_else(|| format!("{flag} wants a value"))
}

/// One command line from stdin: a JSON array of strings (what programs
/// send: any argument may hold spaces or newlines, as a TOML text does),
/// or words separated by spaces (for a person at a terminal).
pub(crate) fn words(line: &str) -> Result<Vec<String>, String> {
    let line = line.trim();
    if line.starts_with('[') {
        serde_json::from_str(line).map_err(|e| format!("not a JSON array of strings: {e}"))
    } else {
        Ok(line.split_whitespace().map(str::to_owned).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(words: &[&str]) -> Vec<String> {
        words.iter().map(|w| (*w).to_owned()).collect()
    }

    /// The command line splits into the masters' count and the first
    /// daemon's options; a setting keeps everything after its first `=`.
    #[test]
    fn a_command_line_parses() {
        let launch = launch(&strings(&[
            "--set",
            "a.b=c=d",
            "--masters",
            "3",
            "--http",
            "--toml",
            "[x]\ny = 1",
        ]))
        .expect("valid");
        assert_eq!(launch.masters, 3);
        assert_eq!(launch.daemon.settings, [("a.b".into(), "c=d".into())]);
        assert_eq!(launch.daemon.toml.as_deref(), Some("[x]\ny = 1"));
        assert!(launch.daemon.http && !launch.daemon.tls);
    }

    /// What cannot work is refused with the reason, before anything starts.
    #[test]
    fn contradictions_are_refused() {
        for bad in [
            &["--masters", "0"][..],
            &["--set", "novalue"],
            &["--probe-cert", "c.pem", "--probe-key", "k.pem"],
            &["--probe-ca", "ca.pem", "--probe-cert", "c.pem"],
            &["--tls", "--probe-ca", "ca.pem"],
            &["--toml"],
            &["--what"],
        ] {
            assert!(launch(&strings(bad)).is_err(), "{bad:?}");
        }
    }

    /// A command line is a JSON array, or words for a person.
    #[test]
    fn command_lines_are_json_or_words() {
        assert_eq!(
            words(r#"["daemon", "--toml", "a = \"b c\"\n"]"#).expect("json"),
            strings(&["daemon", "--toml", "a = \"b c\"\n"])
        );
        assert_eq!(
            words(" master 0  PING \n").expect("words"),
            strings(&["master", "0", "PING"])
        );
        assert!(words(r#"["master", 0]"#).is_err());
    }
}
