//! Readiness probing over RESP: a master counts as up only once it answers a
//! real `PING`, and only if the answer comes from the process we spawned.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::process::Child;
use std::thread;
use std::time::{Duration, Instant};

/// How long one spawned server may take to answer `PING`.
pub(crate) const READY_DEADLINE: Duration = Duration::from_secs(10);
/// Pause between two readiness probes.
const POLL_INTERVAL: Duration = Duration::from_millis(10);
/// Connect timeout of one probe (loopback: either instant or refused).
const CONNECT_TIMEOUT: Duration = Duration::from_millis(100);
/// Read/write timeout of one probe.
const IO_TIMEOUT: Duration = Duration::from_millis(500);
/// How many bytes of a probe's reply line are read at most.
const MAX_REPLY_LINE: u64 = 4096;

/// Result of waiting for one spawned server.
#[derive(Debug)]
pub(crate) enum Readiness {
    /// It answered `PING` and is the process we spawned.
    Ready,
    /// It exited, or someone else answers on its port: worth a respawn.
    Failed(String),
    /// It is alive but never answered: respawning would not help.
    TimedOut,
}

/// Polls `port` with `PING` every [`POLL_INTERVAL`] until it answers `+PONG`,
/// the child exits, or [`READY_DEADLINE`] passes. On `+PONG` it also checks via
/// `INFO server` that the answer came from *our* child, not from another
/// process that grabbed the port first.
pub(crate) fn wait_ready(child: &mut Child, port: u16) -> Readiness {
    let deadline = Instant::now() + READY_DEADLINE;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Readiness::Failed(format!("exited early ({status})")),
            Ok(None) => {}
            Err(err) => return Readiness::Failed(format!("could not check the process: {err}")),
        }
        if let Ok(true) = ping(port) {
            match server_pid(port) {
                Ok(Some(pid)) if pid != child.id() => {
                    return Readiness::Failed(format!(
                        "port {port} is answered by another process (pid {pid}), not ours (pid {})",
                        child.id()
                    ));
                }
                // Ours, or a server that does not report its pid.
                Ok(_) => return Readiness::Ready,
                // Went away between PING and INFO: keep polling.
                Err(_) => {}
            }
        }
        if Instant::now() >= deadline {
            return Readiness::TimedOut;
        }
        thread::sleep(POLL_INTERVAL);
    }
}

/// Opens a probe connection to `127.0.0.1:port` with short timeouts.
pub(crate) fn connect(port: u16) -> io::Result<TcpStream> {
    let addr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, port));
    let stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)?;
    stream.set_read_timeout(Some(IO_TIMEOUT))?;
    stream.set_write_timeout(Some(IO_TIMEOUT))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Reads one RESP line (up to [`MAX_REPLY_LINE`] bytes), CRLF included.
pub(crate) fn read_line(reader: &mut impl BufRead) -> io::Result<String> {
    let mut line = String::new();
    reader.by_ref().take(MAX_REPLY_LINE).read_line(&mut line)?;
    Ok(line)
}

/// Sends a real RESP `PING`; true iff the reply is `+PONG`.
pub(crate) fn ping(port: u16) -> io::Result<bool> {
    let mut stream = connect(port)?;
    stream.write_all(b"*1\r\n$4\r\nPING\r\n")?;
    let mut reader = BufReader::new(stream);
    Ok(read_line(&mut reader)? == "+PONG\r\n")
}

/// `process_id` from `INFO server`, if the server reports one.
fn server_pid(port: u16) -> io::Result<Option<u32>> {
    let mut stream = connect(port)?;
    stream.write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")?;
    let mut reader = BufReader::new(stream);
    let header = read_line(&mut reader)?;
    let Some(len) = header
        .strip_prefix('$')
        .and_then(|rest| rest.trim_end().parse::<u64>().ok())
    else {
        return Ok(None); // an error reply or nil
    };
    let mut body = Vec::new();
    reader.take(len).read_to_end(&mut body)?;
    Ok(String::from_utf8_lossy(&body)
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|pid| pid.trim().parse().ok()))
}
