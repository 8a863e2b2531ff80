//! `run`'s command: started in a process group of its own, so that a
//! signal reaches everything it started (a shell wrapper is not the only
//! thing signalled), and stopped group-wide when the lock is lost.

use crate::error::CtlError;
use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use std::ffi::OsString;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::time::Duration;
use tokio::time::Instant;

/// How often a group that outlives its leader is checked while stopping.
const GROUP_POLL: Duration = Duration::from_millis(10);

/// The running command.
pub(crate) struct Command {
    child: tokio::process::Child,
    /// Its process group: the child's pid, as it leads a new group.
    group: Pid,
    /// Its name, for messages.
    pub program: String,
}

impl Command {
    /// Starts `argv` in a new process group with `env` added to ours.
    pub(crate) fn spawn(argv: &[OsString], env: &[(&str, String)]) -> Result<Command, CtlError> {
        let Some((program, args)) = argv.split_first() else {
            return Err(CtlError::Usage("run: no command given".into()));
        };
        let name = program.to_string_lossy().into_owned();
        let mut command = tokio::process::Command::new(program);
        command.args(args).process_group(0);
        for (key, value) in env {
            command.env(key, value);
        }
        let child = command.spawn().map_err(|source| CtlError::Spawn {
            program: name.clone(),
            source,
        })?;
        let pid = child
            .id()
            .ok_or_else(|| CtlError::Local(format!("{name}: no pid")))?;
        let group = i32::try_from(pid)
            .map(Pid::from_raw)
            .map_err(|_| CtlError::Local(format!("{name}: pid {pid} out of range")))?;
        Ok(Command {
            child,
            group,
            program: name,
        })
    }

    /// The process group's id.
    pub(crate) fn group(&self) -> i32 {
        self.group.as_raw()
    }

    /// Sends `signal` to the whole group; a group already gone is fine.
    pub(crate) fn signal(&self, signal: Signal) {
        match killpg(self.group, signal) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(error) => eprintln!(
                "redlockctl: cannot send {signal} to process group {}: {error}",
                self.group
            ),
        }
    }

    /// Waits for the command (the group leader) to exit (cancel-safe).
    pub(crate) async fn wait(&mut self) -> Result<ExitStatus, CtlError> {
        self.child
            .wait()
            .await
            .map_err(|e| CtlError::Local(format!("waiting for {}: {e}", self.program)))
    }

    /// Stops the whole group: SIGTERM now, SIGKILL at `kill_at` to whatever
    /// of it still runs then. Returns the leader's exit status.
    pub(crate) async fn stop(&mut self, kill_at: Instant) -> Result<ExitStatus, CtlError> {
        self.signal(Signal::SIGTERM);
        let status = match tokio::time::timeout_at(kill_at, self.wait()).await {
            Ok(status) => status?,
            Err(_) => {
                eprintln!(
                    "redlockctl: {} still runs; sending SIGKILL to process group {}",
                    self.program, self.group
                );
                self.signal(Signal::SIGKILL);
                self.wait().await?
            }
        };
        // Others in the group (background jobs of a shell) got SIGTERM too:
        // they have until `kill_at` as well.
        while self.group_alive() && Instant::now() < kill_at {
            tokio::time::sleep(GROUP_POLL).await;
        }
        if self.group_alive() {
            self.signal(Signal::SIGKILL);
        }
        Ok(status)
    }

    /// [`Command::stop`] after the lock or leadership was lost, catching
    /// `signals` meanwhile (so that they cannot kill redlockctl mid-stop:
    /// the group was told to stop already), then saying how it ended and
    /// that redlockctl exits `Exit::Lost`.
    pub(crate) async fn stop_lost(
        &mut self,
        kill_at: Instant,
        signals: &mut crate::signals::Signals,
    ) -> Result<ExitStatus, CtlError> {
        let status = {
            let stopping = self.stop(kill_at);
            tokio::pin!(stopping);
            loop {
                tokio::select! {
                    status = &mut stopping => break status?,
                    _ = signals.recv() => {}
                }
            }
        };
        eprintln!(
            "redlockctl: {} ended ({}); exiting {}",
            self.program,
            describe(status),
            crate::exit::Exit::Lost.code()
        );
        Ok(status)
    }

    fn group_alive(&self) -> bool {
        !matches!(killpg(self.group, None), Err(Errno::ESRCH))
    }
}

/// The exit status a shell would report: the code, or 128+N for signal N.
pub(crate) fn shell_status(status: ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(u8::MAX),
        (None, Some(signal)) => u8::try_from(128 + (signal & 0x7f)).unwrap_or(u8::MAX),
        (None, None) => u8::MAX,
    }
}

/// How the command ended, in words.
pub(crate) fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => match Signal::try_from(signal) {
            Ok(name) => format!("killed by {name}"),
            Err(_) => format!("killed by signal {signal}"),
        },
        (None, None) => "ended".to_owned(),
    }
}
