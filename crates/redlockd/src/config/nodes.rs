//! Master URLs: reading the `nodes` list from TOML or the environment, and
//! the minimal parse that validation and the start-up warnings rely on.

use std::fmt;
use std::net::IpAddr;

/// What validation needs to know about one master URL.
pub(super) struct NodeAddr {
    /// Lower-cased host, without IPv6 brackets.
    pub(super) host: String,
    /// Explicit port, or 6379.
    pub(super) port: u16,
    pub(super) tls: bool,
    pub(super) has_password: bool,
}

impl NodeAddr {
    pub(super) fn is_loopback(&self) -> bool {
        self.host == "localhost" || self.host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }
}

/// Port Valkey/Redis listens on when the URL gives none.
const DEFAULT_PORT: u16 = 6379;

/// Minimal parse of `redis[s]://[user[:password]@]host[:port][/db][?query]`:
/// enough to check the scheme and host and to spot the same master listed
/// twice (whatever the db number or credentials). Errors never contain the
/// URL itself.
pub(super) fn parse_node(url: &str) -> Result<NodeAddr, String> {
    let (scheme, rest) = url
        .split_once("://")
        .ok_or_else(|| "it must start with redis:// or rediss://".to_owned())?;
    let tls = if scheme.eq_ignore_ascii_case("redis") {
        false
    } else if scheme.eq_ignore_ascii_case("rediss") {
        true
    } else {
        return Err("it must start with redis:// or rediss://".to_owned());
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let (userinfo, hostport) = match authority.rfind('@') {
        Some(at) => (Some(&authority[..at]), &authority[at + 1..]),
        None => (None, authority),
    };
    let has_password =
        userinfo.is_some_and(|u| u.split_once(':').is_some_and(|(_, p)| !p.is_empty()));
    let (host, port) = if let Some(bracketed) = hostport.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or_else(|| "unclosed '[' in the host".to_owned())?;
        match after {
            "" => (host, None),
            _ => match after.strip_prefix(':') {
                Some(port) => (host, Some(port)),
                None => return Err("unexpected text after the IPv6 address".to_owned()),
            },
        }
    } else {
        match hostport.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (hostport, None),
        }
    };
    if host.is_empty() {
        return Err("it has no host".to_owned());
    }
    if host.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("the host contains whitespace or control characters".to_owned());
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => match p.parse::<u16>() {
            Ok(port) if port != 0 => port,
            _ => return Err("the port must be a number in 1..=65535".to_owned()),
        },
    };
    Ok(NodeAddr {
        host: host.to_ascii_lowercase(),
        port,
        tls,
        has_password,
    })
}

/// `nodes` accepts a list (TOML) or one string holding a comma-separated
/// list (the environment, where every value is a string). Blank items are
/// dropped, so a trailing comma is harmless and an empty string is an empty
/// list (which validation then refuses).
pub(super) fn deserialize_nodes<'de, D>(deserializer: D) -> Result<Vec<String>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    struct Nodes;

    impl<'de> serde::de::Visitor<'de> for Nodes {
        type Value = Vec<String>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of redis:// URLs, or one string of comma-separated URLs")
        }

        fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
            Ok(v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect())
        }

        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut seq: A,
        ) -> Result<Self::Value, A::Error> {
            let mut out = Vec::with_capacity(seq.size_hint().unwrap_or(0));
            while let Some(url) = seq.next_element::<String>()? {
                out.push(url);
            }
            Ok(out)
        }
    }

    deserializer.deserialize_any(Nodes)
}
