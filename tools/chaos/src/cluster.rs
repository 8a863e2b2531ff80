//! The masters the daemons use, each behind its own [`Proxy`], and the
//! fault primitives on them: restart empty, SIGSTOP/SIGCONT, slow,
//! unreachable. [`LocalMasters`] is blocking (std), so its calls run on
//! tokio's blocking pool.

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use redlockd_testkit::masters::LocalMasters;
use redlockd_testkit::proxy::{Mode, Proxy};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Longest wait for a master's answer to `INFO server`.
const INFO_TIMEOUT: Duration = Duration::from_secs(2);

/// Boxed error for set-up and fault actions.
pub(crate) use redlockd_testkit::BoxError;

/// Five masters and their proxies.
pub(crate) struct Cluster {
    /// The master processes (blocking API, hence the mutex).
    masters: Arc<Mutex<LocalMasters>>,
    /// The masters' own ports (fixed across restarts).
    ports: Vec<u16>,
    /// One proxy per master, index-aligned.
    proxies: Vec<Proxy>,
}

impl Cluster {
    /// A proxy in front of each of `masters`.
    pub(crate) async fn start(masters: LocalMasters) -> Result<Cluster, BoxError> {
        let ports: Vec<u16> = (0..masters.len()).map(|i| masters.port(i)).collect();
        let mut proxies = Vec::with_capacity(ports.len());
        for port in &ports {
            proxies.push(Proxy::start(SocketAddr::from(([127, 0, 0, 1], *port))).await?);
        }
        Ok(Cluster {
            masters: Arc::new(Mutex::new(masters)),
            ports,
            proxies,
        })
    }

    /// How many masters.
    pub(crate) fn len(&self) -> usize {
        self.ports.len()
    }

    /// The masters' own ports (fixed across restarts).
    pub(crate) fn ports(&self) -> Vec<u16> {
        self.ports.clone()
    }

    /// `redis://` URLs of the proxies: what the daemons are configured with.
    pub(crate) fn proxy_urls(&self) -> Vec<String> {
        self.proxies
            .iter()
            .map(|p| format!("redis://{}", p.addr()))
            .collect()
    }

    /// Runs `f` on the masters on the blocking pool.
    async fn with_masters<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut LocalMasters) -> Result<T, redlockd_testkit::masters::MastersError>
            + Send
            + 'static,
    ) -> Result<T, BoxError> {
        let masters = Arc::clone(&self.masters);
        let done = tokio::task::spawn_blocking(move || {
            let mut masters = masters.lock().unwrap_or_else(PoisonError::into_inner);
            f(&mut masters)
        })
        .await?;
        Ok(done?)
    }

    /// SIGKILLs master `i`: its keys are gone.
    pub(crate) async fn kill(&self, i: usize) -> Result<(), BoxError> {
        self.with_masters(move |m| m.stop(i)).await
    }

    /// Starts master `i` again, empty, on its port.
    pub(crate) async fn restart(&self, i: usize) -> Result<(), BoxError> {
        self.with_masters(move |m| m.restart(i)).await
    }

    /// SIGSTOPs master `i`; returns its pid, for [`Cluster::resume`] (a
    /// stopped master cannot be asked for it).
    pub(crate) async fn pause(&self, i: usize) -> Result<Pid, BoxError> {
        let pid = server_pid(self.ports[i]).await?;
        let pid = Pid::from_raw(i32::try_from(pid).map_err(|_| format!("pid {pid} out of range"))?);
        kill(pid, Signal::SIGSTOP)?;
        Ok(pid)
    }

    /// SIGCONTs a master paused by [`Cluster::pause`].
    pub(crate) fn resume(&self, pid: Pid) -> Result<(), BoxError> {
        Ok(kill(pid, Signal::SIGCONT)?)
    }

    /// Sets the proxy of master `i`.
    pub(crate) fn set_mode(&self, i: usize, mode: Mode) {
        if let Some(proxy) = self.proxies.get(i) {
            proxy.set(mode);
        }
    }

    /// The masters, for the blocking drop at the very end.
    pub(crate) fn into_masters(self) -> Arc<Mutex<LocalMasters>> {
        self.masters
    }
}

/// The `process_id` a master reports in `INFO server` (RESP, directly on
/// its port: never through the proxy, whose mode may be a fault).
async fn server_pid(port: u16) -> Result<u32, BoxError> {
    let ask = async {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await?;
        stream
            .write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
            .await?;
        let mut reader = BufReader::new(stream);
        let mut header = String::new();
        reader.read_line(&mut header).await?;
        let len: u64 = header
            .strip_prefix('$')
            .and_then(|rest| rest.trim_end().parse().ok())
            .ok_or_else(|| format!("unexpected INFO reply {header:?}"))?;
        let mut body = Vec::new();
        reader.take(len).read_to_end(&mut body).await?;
        String::from_utf8_lossy(&body)
            .lines()
            .find_map(|l| l.strip_prefix("process_id:"))
            .and_then(|pid| pid.trim().parse().ok())
            .ok_or_else(|| BoxError::from("no process_id in INFO server"))
    };
    tokio::time::timeout(INFO_TIMEOUT, ask)
        .await
        .map_err(|_| format!("master on port {port} did not answer INFO"))?
}
