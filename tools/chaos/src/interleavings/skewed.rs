//! A master whose wall clock is offset: the same server
//! binary run under libfaketime (`LD_PRELOAD`, Debian package
//! `libfaketime`, installed by scripts/setup.sh), with `FAKETIME="+Ns"`
//! and `FAKETIME_DONT_FAKE_MONOTONIC=1`: `TIME` and the key expiry clock
//! (both `CLOCK_REALTIME`) run N seconds ahead, its monotonic clock is
//! untouched, so it is an offset, not a rate error. Valkey and Redis link
//! libc dynamically, so the preload takes; [`Skewed::start`] checks that it
//! did by reading `TIME`, and fails the run if not (a master that is not
//! offset would make the scenario pass for nothing).

use crate::cluster::BoxError;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Where Debian puts libfaketime; `CHAOS_LIBFAKETIME` overrides.
const LIBFAKETIME: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
/// Longest a started server may take to answer.
const READY: Duration = Duration::from_secs(10);

/// One master under libfaketime, on a fixed port.
pub(crate) struct Skewed {
    binary: PathBuf,
    port: u16,
    dir: PathBuf,
    offset: Duration,
    child: Option<Child>,
}

impl Skewed {
    /// Starts `binary` on a free port with its clock `offset` ahead.
    pub(crate) fn start(binary: &Path, offset: Duration, dir: PathBuf) -> Result<Skewed, BoxError> {
        let port = redlockd_testkit::process::free_addr()?.port();
        let mut this = Skewed {
            binary: binary.to_path_buf(),
            port,
            dir,
            offset,
            child: None,
        };
        this.spawn()?;
        Ok(this)
    }

    /// Its port.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// SIGKILL, then start again empty on the same port, still offset.
    pub(crate) fn restart(&mut self) -> Result<(), BoxError> {
        self.kill();
        self.spawn()
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn spawn(&mut self) -> Result<(), BoxError> {
        let lib = std::env::var("CHAOS_LIBFAKETIME").unwrap_or_else(|_| LIBFAKETIME.to_owned());
        if !Path::new(&lib).exists() {
            return Err(format!(
                "{lib} not found: install the Debian package libfaketime (scripts/setup.sh)"
            )
            .into());
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("skewed-master.log"))?;
        let child = Command::new(&self.binary)
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .env("LD_PRELOAD", &lib)
            .env("FAKETIME", format!("+{}s", self.offset.as_secs()))
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1")
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        self.child = Some(child);
        let until = Instant::now() + READY;
        loop {
            match server_time(self.port) {
                Ok(theirs) => {
                    let ours = SystemTime::now().duration_since(UNIX_EPOCH)?;
                    let ahead = theirs.saturating_sub(ours);
                    if ahead + Duration::from_secs(1) < self.offset {
                        self.kill();
                        return Err(format!(
                            "libfaketime had no effect: TIME is {ahead:?} ahead, not {:?}",
                            self.offset
                        )
                        .into());
                    }
                    return Ok(());
                }
                Err(error) if Instant::now() >= until => {
                    self.kill();
                    return Err(format!("the skewed master did not answer: {error}").into());
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}

impl Drop for Skewed {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The server's `TIME`, as a duration since the epoch.
fn server_time(port: u16) -> Result<Duration, BoxError> {
    let mut stream = TcpStream::connect(("127.0.0.1", port))?;
    stream.set_read_timeout(Some(Duration::from_secs(1)))?;
    stream.write_all(b"*1\r\n$4\r\nTIME\r\n")?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    if !line.starts_with("*2") {
        return Err(format!("unexpected TIME reply {line:?}").into());
    }
    let mut parts = [0u64; 2];
    for part in &mut parts {
        line.clear();
        reader.read_line(&mut line)?; // $len
        line.clear();
        reader.read_line(&mut line)?;
        *part = line.trim_end().parse()?;
    }
    Ok(Duration::from_secs(parts[0]) + Duration::from_micros(parts[1]))
}
