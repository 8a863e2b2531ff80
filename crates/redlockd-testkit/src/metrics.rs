//! Reading a daemon's Prometheus endpoint from a test: one blocking
//! `GET /metrics` and sums of samples, so that each test binary does not
//! carry its own copy of the request and the parsing.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// How long a scrape may take before it counts as unanswered.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(5);

/// The exposition text of `GET /metrics` on `addr`, or why there is none
/// (not listening, no answer in time, not 200).
pub fn scrape(addr: SocketAddr) -> Result<String, String> {
    let mut stream = TcpStream::connect_timeout(&addr, SCRAPE_TIMEOUT)
        .map_err(|e| format!("metrics endpoint {addr}: {e}"))?;
    let _ = stream.set_read_timeout(Some(SCRAPE_TIMEOUT));
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: redlockd\r\nConnection: close\r\n\r\n")
        .map_err(|e| format!("metrics request: {e}"))?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| format!("metrics response: {e}"))?;
    if !response.starts_with("HTTP/1.1 200") {
        return Err(format!("metrics endpoint answered: {response}"));
    }
    Ok(response
        .split_once("\r\n\r\n")
        .map(|(_, body)| body.to_owned())
        .unwrap_or_default())
}

/// The sum of the samples of `name` (exactly that metric, any labels)
/// whose label set contains `label` (e.g. `reason="tls_handshake"`, or ""
/// for all).
pub fn sum(text: &str, name: &str, label: &str) -> f64 {
    text.lines()
        .filter(|line| !line.starts_with('#'))
        .filter(|line| {
            line.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter(|line| line.contains(label))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// [`sum`] of a fresh scrape of `addr`; panics if the endpoint does not
/// answer (a test's metrics endpoint must).
pub fn counter(addr: SocketAddr, name: &str, label: &str) -> f64 {
    match scrape(addr) {
        Ok(text) => sum(&text, name, label),
        Err(e) => panic!("{e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::sum;

    /// Samples of exactly the named metric are summed, filtered by label.
    #[test]
    fn sums_samples() {
        let text = "# HELP x_total help\nx_total{reason=\"a\"} 2\nx_total{reason=\"b\"} 3\n\
                    x_total_other 100\nx 7\n";
        assert_eq!(sum(text, "x_total", "reason=\"a\""), 2.0);
        assert_eq!(sum(text, "x_total", ""), 5.0);
        assert_eq!(sum(text, "x", ""), 7.0);
    }
}
