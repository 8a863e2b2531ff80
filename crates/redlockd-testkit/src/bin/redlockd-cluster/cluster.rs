//! The processes one launcher runs, and what its commands do to them:
//! masters from the kit's `masters` (`LocalMasters`), daemons from the
//! workspace's binary by the kit's `process::DaemonCommand`, each waited
//! for until its health says SERVING (`client::serving`).

use crate::options::DaemonOptions;
use redlockd_testkit::client::{self, LOCK_SERVICE};
use redlockd_testkit::masters::{find_server, Flavor, LocalMasters};
use redlockd_testkit::pki::Pki;
use redlockd_testkit::process::{free_addr, DaemonCommand, DaemonProcess};
use redlockd_testkit::proxy::{Mode, Proxy};
use redlockd_testkit::BoxError;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::time::{sleep, timeout, Instant};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity};

/// Longest a daemon may take to say SERVING: generous, for CI's two
/// shared cores under several suites at once.
const START_LIMIT: Duration = Duration::from_secs(60);
/// Longest one health question may go unanswered.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);
/// Pause between two readiness probes.
const POLL: Duration = Duration::from_millis(20);
/// Spawns of one daemon whose port another process took between being
/// picked here and bound there.
const START_ATTEMPTS: u32 = 3;
/// Longest `wait-daemon` waits for the daemon to exit.
const WAIT_LIMIT: Duration = Duration::from_secs(30);
/// Longest a master command's exchange takes.
const MASTER_LIMIT: Duration = Duration::from_secs(5);
/// Longest a killed daemon may take to be reaped at the end.
const REAP_LIMIT: Duration = Duration::from_secs(10);
/// Lines of a daemon's log in an error.
const TAIL_LINES: usize = 20;

/// Masters, the daemons over them, proxies in front of daemons, and the
/// directory of the daemons' logs and files. Dropped, it kills every
/// process and removes the directory (proxies and daemons first: fields
/// drop in order).
pub(crate) struct Cluster {
    proxies: Vec<Proxy>,
    daemons: Vec<DaemonProcess>,
    masters: LocalMasters,
    dir: Scratch,
    redlockd: PathBuf,
}

impl Cluster {
    /// Starts `masters` masters and the first daemon; the start-up line.
    pub(crate) async fn start(
        masters: usize,
        first: DaemonOptions,
    ) -> Result<(Cluster, Value), BoxError> {
        let redlockd = match std::env::var_os("REDLOCKD_BIN") {
            Some(path) if !path.is_empty() => PathBuf::from(path),
            _ => redlockd_testkit::bin::path("redlockd")?,
        };
        let valkey = find_server(Flavor::Valkey)?;
        let dir = Scratch::create()?;
        let masters = tokio::task::block_in_place(|| LocalMasters::start(&valkey, masters))?;
        let mut cluster = Cluster {
            proxies: Vec::new(),
            daemons: Vec::new(),
            masters,
            dir,
            redlockd,
        };
        let daemon = cluster.start_daemon(first).await?;
        let ports: Vec<Value> = (0..cluster.masters.len())
            .map(|i| json!({ "port": cluster.masters.port(i) }))
            .collect();
        let line = json!({ "dir": cluster.dir.0, "masters": ports, "daemon": daemon });
        Ok((cluster, line))
    }

    /// Carries out one command line's words; its answer's fields.
    pub(crate) async fn command(&mut self, words: &[String]) -> Result<Value, BoxError> {
        let Some((verb, args)) = words.split_first() else {
            return Err("an empty command".into());
        };
        match (verb.as_str(), args) {
            ("daemon", options) => {
                let options = crate::options::daemon(options)?;
                Ok(json!({ "daemon": self.start_daemon(options).await? }))
            }
            ("master", [index, command @ ..]) if !command.is_empty() => {
                let port = self.masters.port(self.master(index)?);
                Ok(json!({ "reply": master_command(port, command).await? }))
            }
            ("stop-master", [index]) => {
                let index = self.master(index)?;
                tokio::task::block_in_place(|| self.masters.stop(index))?;
                Ok(json!({}))
            }
            ("signal", [index, name]) => {
                let upper = name.to_uppercase();
                let name = match upper.starts_with("SIG") {
                    true => upper,
                    false => format!("SIG{upper}"),
                };
                let signal = nix::sys::signal::Signal::from_str(&name)
                    .map_err(|_| format!("no signal {name}"))?;
                self.daemon(index)?.signal(signal)?;
                Ok(json!({}))
            }
            ("slow-answers", [index, millis]) => {
                let delay = millis
                    .parse()
                    .map(Duration::from_millis)
                    .map_err(|_| format!("slow-answers: {millis} is not milliseconds"))?;
                let proxy = Proxy::start(self.daemon(index)?.addr).await?;
                proxy.set(Mode::SlowAnswers(delay));
                let addr = proxy.addr().to_string();
                self.proxies.push(proxy);
                Ok(json!({ "addr": addr }))
            }
            ("wait-daemon", [index]) => {
                let child = self.daemon(index)?.child();
                match timeout(WAIT_LIMIT, child.wait()).await {
                    Ok(status) => Ok(json!({ "exit": status?.to_string() })),
                    Err(_) => Err(format!("daemon {index} still runs after {WAIT_LIMIT:?}").into()),
                }
            }
            _ => Err(format!(
                "unknown command {words:?}: daemon [OPTIONS], master I COMMAND..., \
                 stop-master I, signal D NAME, slow-answers D MS, wait-daemon D"
            )
            .into()),
        }
    }

    /// Kills every daemon (a frozen one too: SIGKILL needs no SIGCONT) and
    /// reaps it, then drops the masters and the directory.
    pub(crate) async fn shutdown(mut self) {
        for daemon in &mut self.daemons {
            let _ = timeout(REAP_LIMIT, daemon.child().kill()).await;
        }
    }

    /// Starts one more daemon over the masters and waits until it serves;
    /// what the answer says of it.
    async fn start_daemon(&mut self, options: DaemonOptions) -> Result<Value, BoxError> {
        let index = self.daemons.len();
        let name = format!("daemon-{index}");
        let log = self.dir.0.join(format!("{name}.log"));
        // A daemon that failed to start left its log under the same name.
        let _ = std::fs::remove_file(&log);
        let mut command = DaemonCommand::new(self.redlockd.clone(), &self.masters.urls())
            // A stop drains open sessions for shutdown_grace (20 s by default).
            .set("server.shutdown_grace", "1s")
            .log_to(&log);
        let mut answer = json!({ "index": index, "log": log });
        let mut probe_ca = options.probe_ca.clone();
        if options.tls {
            let files = Pki::new().write(&self.dir.0, &name);
            command = command
                .set("server.tls.cert", files.cert.display())
                .set("server.tls.key", files.key.display());
            answer["ca"] = json!(files.ca);
            probe_ca = Some(files.ca);
        }
        if let Some(text) = &options.toml {
            let file = self.dir.0.join(format!("{name}.toml"));
            std::fs::write(&file, text)?;
            command = command.arg("--config").arg(file.display().to_string());
        }
        for (key, value) in &options.settings {
            command = command.set(key, value);
        }
        let tls = match &probe_ca {
            Some(ca) => Some(probe_tls(ca, options.probe_identity.as_ref())?),
            None => None,
        };
        for attempt in 1..=START_ATTEMPTS {
            let mut command = command.clone();
            let http = match options.http {
                true => Some(free_addr()?),
                false => None,
            };
            if let Some(http) = http {
                command = command.set("http.listen", http);
            }
            let mut process = command.spawn()?;
            let endpoint = match &tls {
                Some(tls) => client::tls_endpoint(process.addr, tls.clone())?,
                None => client::endpoint(process.addr)?,
            };
            match ready(&mut process, endpoint, http).await {
                Ok(()) => {
                    answer["addr"] = json!(process.addr.to_string());
                    answer["pid"] = json!(process.pid);
                    if let Some(http) = http {
                        answer["http"] = json!(http.to_string());
                    }
                    self.daemons.push(process);
                    return Ok(answer);
                }
                Err(why) => {
                    let _ = timeout(REAP_LIMIT, process.child().kill()).await;
                    let tail = tail(&log);
                    // The port was free when picked, and taken when bound.
                    if attempt < START_ATTEMPTS && tail.contains("in use") {
                        continue;
                    }
                    return Err(format!(
                        "daemon {index} ({}): {why}\n--- last lines of {} ---\n{tail}",
                        self.redlockd.display(),
                        log.display()
                    )
                    .into());
                }
            }
        }
        Err(format!("daemon {index}: no free port in {START_ATTEMPTS} attempts").into())
    }

    /// Master `index`, checked.
    fn master(&self, index: &str) -> Result<usize, BoxError> {
        match index.parse::<usize>() {
            Ok(i) if i < self.masters.len() => Ok(i),
            _ => Err(format!("no master {index}: there are {}", self.masters.len()).into()),
        }
    }

    /// Daemon `index`, checked.
    fn daemon(&mut self, index: &str) -> Result<&mut DaemonProcess, BoxError> {
        let count = self.daemons.len();
        index
            .parse::<usize>()
            .ok()
            .and_then(|i| self.daemons.get_mut(i))
            .ok_or_else(|| format!("no daemon {index}: there are {count}").into())
    }
}

/// Polls until the daemon's health says SERVING (and the gateway, if any,
/// accepts connections), or it exits, or [`START_LIMIT`] passes.
async fn ready(
    process: &mut DaemonProcess,
    endpoint: Endpoint,
    http: Option<SocketAddr>,
) -> Result<(), String> {
    let channel = endpoint.connect_lazy();
    let give_up = Instant::now() + START_LIMIT;
    loop {
        match process.child().try_wait() {
            Ok(Some(status)) => return Err(format!("exited ({status}) before serving")),
            Ok(None) => {}
            Err(e) => return Err(format!("cannot tell whether it runs: {e}")),
        }
        let asked = client::serving(channel.clone(), LOCK_SERVICE);
        if timeout(PROBE_TIMEOUT, asked).await.unwrap_or(false) {
            match http {
                None => return Ok(()),
                Some(http) if TcpStream::connect(http).await.is_ok() => return Ok(()),
                Some(_) => {}
            }
        }
        if Instant::now() >= give_up {
            return Err(format!("not SERVING within {START_LIMIT:?}"));
        }
        sleep(POLL).await;
    }
}

/// The probe's TLS: trusting `ca`, with `identity` (cert, key) if given.
fn probe_tls(
    ca: &Path,
    identity: Option<&(PathBuf, PathBuf)>,
) -> Result<ClientTlsConfig, BoxError> {
    let read = |path: &Path| {
        std::fs::read(path).map_err(|e| format!("--probe-* file {}: {e}", path.display()))
    };
    let tls = ClientTlsConfig::new().ca_certificate(Certificate::from_pem(read(ca)?));
    Ok(match identity {
        Some((cert, key)) => tls.identity(Identity::from_pem(read(cert)?, read(key)?)),
        None => tls,
    })
}

/// Sends `args` to the master on `port` (RESP, on a connection of its
/// own); the first line of the reply (`+OK`, `-ERR ...`, `$5`).
async fn master_command(port: u16, args: &[String]) -> Result<String, BoxError> {
    let mut request = format!("*{}\r\n", args.len());
    for arg in args {
        request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    let exchange = async {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
        stream.write_all(request.as_bytes()).await?;
        let mut line = String::new();
        BufReader::new(stream)
            .take(4096)
            .read_line(&mut line)
            .await?;
        Ok::<_, std::io::Error>(line.trim_end().to_owned())
    };
    match timeout(MASTER_LIMIT, exchange).await {
        Ok(Ok(line)) if !line.is_empty() => Ok(line),
        Ok(Ok(_)) => Err(format!("master on port {port} closed without a reply").into()),
        Ok(Err(e)) => Err(format!("master on port {port}: {e}").into()),
        Err(_) => Err(format!("master on port {port}: no reply within {MASTER_LIMIT:?}").into()),
    }
}

/// The last [`TAIL_LINES`] lines of `log`.
fn tail(log: &Path) -> String {
    match std::fs::read_to_string(log) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n")
        }
        Err(e) => format!("(no log: {e})"),
    }
}

/// The launcher's own directory (daemons' logs, TOML files, certificates),
/// removed when dropped. The masters keep theirs (`LocalMasters`).
struct Scratch(PathBuf);

impl Scratch {
    /// A fresh directory under the system's temporary directory.
    fn create() -> std::io::Result<Scratch> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let path =
            std::env::temp_dir().join(format!("redlockd-cluster-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&path)?;
        Ok(Scratch(path))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
