//! A blocking RESP2 connection to one master, as far as the script workload
//! ([`crate::script_cost`]) needs one: commands written as they are, many at
//! once, and their replies read and checked in order. No client library:
//! what the master spends is the figure, and what the client does around it
//! stays visible.

use crate::BoxError;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A RESP array of bulk strings.
pub(crate) fn command<S: AsRef<[u8]>>(parts: &[S]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", parts.len()).into_bytes();
    for part in parts {
        let part = part.as_ref();
        out.extend(format!("${}\r\n", part.len()).as_bytes());
        out.extend(part);
        out.extend(b"\r\n");
    }
    out
}

/// A reply as far as this bench reads them.
#[derive(Debug, PartialEq)]
pub(crate) enum Reply {
    Status(String),
    Integer(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<Reply>),
}

/// One blocking RESP2 connection.
pub(crate) struct Resp {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Resp {
    pub(crate) fn connect(port: u16) -> Result<Resp, BoxError> {
        let writer = TcpStream::connect(("127.0.0.1", port))?;
        writer.set_nodelay(true)?;
        writer.set_read_timeout(Some(Duration::from_secs(10)))?;
        let reader = BufReader::new(writer.try_clone()?);
        Ok(Resp { writer, reader })
    }

    pub(crate) fn send(&mut self, bytes: &[u8]) -> Result<(), BoxError> {
        Ok(self.writer.write_all(bytes)?)
    }

    pub(crate) fn read(&mut self) -> Result<Reply, BoxError> {
        let mut line = String::new();
        self.reader.read_line(&mut line)?;
        let line = line.trim_end_matches("\r\n");
        let (kind, rest) = line.split_at_checked(1).ok_or("connection closed")?;
        match kind {
            "+" => Ok(Reply::Status(rest.to_owned())),
            "-" => Err(format!("master error: {rest}").into()),
            ":" => Ok(Reply::Integer(rest.parse()?)),
            "$" => {
                let Ok(len) = usize::try_from(rest.parse::<i64>()?) else {
                    return Ok(Reply::Bulk(None));
                };
                let mut data = vec![0; len + 2];
                self.reader.read_exact(&mut data)?;
                data.truncate(len);
                Ok(Reply::Bulk(Some(data)))
            }
            "*" => {
                let n = rest.parse::<i64>()?.max(0);
                (0..n)
                    .map(|_| self.read())
                    .collect::<Result<_, _>>()
                    .map(Reply::Array)
            }
            _ => Err(format!("unexpected reply: {line}").into()),
        }
    }

    pub(crate) fn expect_ok(&mut self, bytes: &[u8]) -> Result<(), BoxError> {
        self.send(bytes)?;
        self.expect_ok_reply()
    }

    pub(crate) fn expect_ok_reply(&mut self) -> Result<(), BoxError> {
        match self.read()? {
            Reply::Status(s) if s == "OK" => Ok(()),
            other => Err(format!("expected OK, got {other:?}").into()),
        }
    }

    pub(crate) fn expect_integer(&mut self, want: i64) -> Result<(), BoxError> {
        match self.read()? {
            Reply::Integer(n) if n == want => Ok(()),
            other => Err(format!("expected {want}, got {other:?}").into()),
        }
    }

    pub(crate) fn bulk(&mut self, bytes: &[u8]) -> Result<String, BoxError> {
        self.send(bytes)?;
        match self.read()? {
            Reply::Bulk(Some(data)) => Ok(String::from_utf8(data)?),
            other => Err(format!("expected a string, got {other:?}").into()),
        }
    }

    /// A batch of `n` acquires, each granted with its proposal taken as the
    /// fence: `{1, old max, now, 1}`.
    pub(crate) fn expect_grants(&mut self, n: usize) -> Result<(), BoxError> {
        match self.read()? {
            Reply::Array(items) if items.len() == n => {
                for item in items {
                    let granted = matches!(&item, Reply::Array(f) if f.len() == 4
                        && f[0] == Reply::Integer(1) && f[3] == Reply::Integer(1));
                    if !granted {
                        return Err(format!("not a grant with its fence: {item:?}").into());
                    }
                }
                Ok(())
            }
            other => Err(format!("expected {n} acquire replies, got {other:?}").into()),
        }
    }

    /// A batch of `n` releases, each deleting its lock: `1`.
    pub(crate) fn expect_releases(&mut self, n: usize) -> Result<(), BoxError> {
        match self.read()? {
            Reply::Array(items) if items.len() == n => {
                match items.iter().find(|i| **i != Reply::Integer(1)) {
                    Some(item) => Err(format!("not a release: {item:?}").into()),
                    None => Ok(()),
                }
            }
            other => Err(format!("expected {n} release replies, got {other:?}").into()),
        }
    }
}
