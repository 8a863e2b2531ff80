//! The peers W1 and W2 hold redlockd against in the same run:
//! go-redsync v4 (Redlock over the same five masters, go-redis v9) and
//! etcd 3.7's own client and `concurrency.Mutex` (over a one-member etcd),
//! both run by `redlockd-peers` (`tools/peers`, Go; scripts/bench-peers.sh
//! builds it next to this binary, `--peers-bin` names another).
//!
//! A peer's workers run in a `redlockd-peers` process of their own: its CPU
//! is the client column. The etcd member is another process
//! (`redlockd-peers etcd-server`), started per mode and workload, fresh;
//! its CPU is the masters' column, since it is what stores the locks.
//!
//! With `--parent` the peers process prints `measuring` when its window
//! opens and `done` when it closes, then waits for its stdin to close: the
//! bench reads every process's CPU at the two markers, closes stdin, and
//! reads the samples the process prints then (one per line, ending with
//! its own JSON line), so that nothing done after the window counts and
//! the percentiles and hand-offs come out of the bench's own code.

use crate::proc::{CpuMeter, CpuReading};
use crate::{Args, BoxError};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// How long a peers process may take to connect and warm up before its
/// window (W2: 16 clients and sessions), and to print its samples after.
const SLACK: Duration = Duration::from_secs(120);

/// The peers `redlockd-peers` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Peer {
    /// go-redsync over the masters.
    Redsync,
    /// etcd's `concurrency.Mutex` over an etcd member this bench starts.
    Etcd,
}

impl Peer {
    /// The name `redlockd-peers --peer` takes, and the mode's name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Peer::Redsync => "redsync",
            Peer::Etcd => "etcd",
        }
    }
}

/// The `redlockd-peers` binary: `--peers-bin`, else next to this one.
fn binary(args: &Args) -> Result<PathBuf, BoxError> {
    let path = match &args.peers_bin {
        Some(path) => path.clone(),
        None => std::env::current_exe()?
            .parent()
            .ok_or("this executable has no directory")?
            .join("redlockd-peers"),
    };
    match path.is_file() {
        true => Ok(path),
        false => Err(format!(
            "{} not found: go build -C tools/peers -o {} . (scripts/bench-peers.sh does), \
             or name it with --peers-bin",
            path.display(),
            path.display()
        )
        .into()),
    }
}

/// What a peer mode runs against: the masters, or an etcd member of its own.
pub(crate) struct PeerTarget {
    peer: Peer,
    binary: PathBuf,
    /// redsync: the masters' URLs.
    nodes: Vec<String>,
    /// etcd: the member this target started.
    etcd: Option<EtcdServer>,
}

impl PeerTarget {
    /// Finds the binary and, for etcd, starts a member.
    pub(crate) async fn open(
        peer: Peer,
        args: &Args,
        nodes: &[String],
    ) -> Result<PeerTarget, BoxError> {
        let binary = binary(args)?;
        let etcd = match peer {
            Peer::Redsync if nodes.is_empty() => return Err("needs --dev or --nodes".into()),
            Peer::Redsync => None,
            Peer::Etcd => Some(EtcdServer::start(&binary).await?),
        };
        Ok(PeerTarget {
            peer,
            binary,
            nodes: nodes.to_vec(),
            etcd,
        })
    }

    /// The processes a run's CPU is split into: the masters (redsync) or
    /// the etcd member in the masters' column; the client is each run's
    /// own process.
    pub(crate) fn meter(&self, master_pids: &[u32]) -> CpuMeter {
        let masters = match &self.etcd {
            Some(etcd) => vec![etcd.pid],
            None => master_pids.to_vec(),
        };
        CpuMeter {
            masters,
            daemon: None,
            client: None,
        }
    }

    /// Runs `redlockd-peers WORKLOAD` with `extra` arguments: the samples
    /// it printed after its window, and the CPU over that window.
    pub(crate) async fn run(
        &self,
        workload: &str,
        extra: &[String],
        duration: Duration,
        meter: &CpuMeter,
    ) -> Result<PeerRun, BoxError> {
        let mut command = Command::new(&self.binary);
        command
            .arg(workload)
            .args(["--peer", self.peer.name(), "--parent"])
            .arg(format!("--duration={}ms", duration.as_millis()))
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        match &self.etcd {
            Some(etcd) => command.arg(format!("--etcd={}", etcd.endpoint)),
            None => command.arg(format!("--nodes={}", self.nodes.join(","))),
        };
        let mut child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.binary.display()))?;
        let meter = CpuMeter {
            client: Some(child.id().ok_or("redlockd-peers exited at once")?),
            ..meter.clone()
        };
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        expect(&mut child, &mut lines, "measuring", SLACK).await?;
        let start = meter.start();
        expect(&mut child, &mut lines, "done", duration + SLACK).await?;
        let end = meter.start();
        drop(child.stdin.take());
        let mut samples = Vec::new();
        let read_all = async {
            while let Some(line) = lines.next_line().await? {
                samples.push(line);
            }
            Ok::<_, std::io::Error>(())
        };
        tokio::time::timeout(SLACK, read_all)
            .await
            .map_err(|_| "redlockd-peers printed no end to its samples")??;
        let status = child.wait().await?;
        if !status.success() {
            return Err(
                format!("redlockd-peers {workload}: {status} (its stderr is above)").into(),
            );
        }
        if let Some(figures) = samples.last() {
            tracing::debug!(peer = self.peer.name(), "redlockd-peers: {figures}");
        }
        Ok(PeerRun {
            samples,
            start,
            end,
        })
    }

    /// Stops the etcd member, if any.
    pub(crate) async fn close(self) {
        if let Some(etcd) = self.etcd {
            etcd.stop().await;
        }
    }
}

/// What one peers run printed, and the CPU readings around its window.
pub(crate) struct PeerRun {
    /// Every line after `done`: the samples, the JSON line last.
    pub samples: Vec<String>,
    pub start: CpuReading,
    pub end: CpuReading,
}

/// Reads lines until `marker`, within `limit`; anything else before it,
/// or the end of the output, is an error.
async fn expect(
    child: &mut Child,
    lines: &mut Lines<BufReader<ChildStdout>>,
    marker: &str,
    limit: Duration,
) -> Result<(), BoxError> {
    let line = tokio::time::timeout(limit, lines.next_line())
        .await
        .map_err(|_| format!("redlockd-peers printed no {marker:?} within {limit:?}"))??;
    match line {
        Some(line) if line == marker => Ok(()),
        Some(line) => Err(format!("redlockd-peers: expected {marker:?}, got {line:?}").into()),
        None => {
            let status = child.wait().await?;
            Err(
                format!("redlockd-peers ended before {marker:?}: {status} (its stderr is above)")
                    .into(),
            )
        }
    }
}

/// One etcd member (`redlockd-peers etcd-server`) on loopback ports, at
/// etcd's defaults (fsync on every commit), with its data and log in a
/// directory of its own under the temp dir, removed when it stops.
pub(crate) struct EtcdServer {
    child: Child,
    pid: u32,
    /// The client address, `HOST:PORT`.
    endpoint: String,
    dir: PathBuf,
}

impl EtcdServer {
    async fn start(binary: &Path) -> Result<EtcdServer, BoxError> {
        let dir = tempdir()?;
        let log = dir.join("etcd.log");
        // Both ports held at once, so that they differ.
        let (client, peer) = {
            let client = std::net::TcpListener::bind("127.0.0.1:0")?;
            let peer = std::net::TcpListener::bind("127.0.0.1:0")?;
            (client.local_addr()?, peer.local_addr()?)
        };
        let mut child = Command::new(binary)
            .arg("etcd-server")
            .arg("--data-dir")
            .arg(dir.join("data"))
            .args(["--client", &client.to_string(), "--peer", &peer.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log)?)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", binary.display()))?;
        let pid = child.id().ok_or("the etcd server exited at once")?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let mut lines = BufReader::new(stdout).lines();
        let ready = tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await;
        match ready {
            Ok(Ok(Some(line))) if line.starts_with("ready ") => {
                tracing::info!(endpoint = %client, pid, "etcd member started");
                Ok(EtcdServer {
                    child,
                    pid,
                    endpoint: client.to_string(),
                    dir,
                })
            }
            _ => {
                let _ = child.kill().await;
                Err(format!(
                    "the etcd server did not start: its log is {}",
                    log.display()
                )
                .into())
            }
        }
    }

    /// SIGTERM, 15 s, then SIGKILL; removes its directory.
    async fn stop(mut self) {
        let signalled = i32::try_from(self.pid)
            .map_err(BoxError::from)
            .and_then(|pid| {
                let pid = nix::unistd::Pid::from_raw(pid);
                Ok(nix::sys::signal::kill(
                    pid,
                    nix::sys::signal::Signal::SIGTERM,
                )?)
            });
        if let Err(error) = signalled {
            tracing::warn!("etcd server: {error}");
        }
        match tokio::time::timeout(Duration::from_secs(15), self.child.wait()).await {
            Ok(Ok(status)) if status.success() => {}
            Ok(Ok(status)) => tracing::warn!("etcd server ended: {status}"),
            Ok(Err(error)) => tracing::warn!("etcd server: {error}"),
            Err(_) => {
                tracing::warn!("etcd server did not stop within 15 s; killed");
                let _ = self.child.kill().await;
            }
        }
        if let Err(error) = std::fs::remove_dir_all(&self.dir) {
            tracing::warn!("cannot remove {}: {error}", self.dir.display());
        }
    }
}

/// A new directory under the temp dir for one etcd member.
fn tempdir() -> Result<PathBuf, BoxError> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("redlockd-bench-etcd-{}-{n}", std::process::id()));
    std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(dir)
}
