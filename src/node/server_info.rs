//! What a master is (Valkey or Redis, which version), read from `INFO server`
//! at every (re)connection, so the release path can use the cheapest command
//! the server supports.

/// The server software and version a master reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerInfo {
    /// "valkey" or "redis".
    pub software: String,
    /// (major, minor, patch).
    pub version: (u32, u32, u32),
    /// `run_id`: changes whenever the server process restarts.
    pub run_id: String,
    /// Seconds since the server process started.
    pub uptime_seconds: u64,
}

impl ServerInfo {
    /// Parses the text of `INFO server`. Valkey reports `valkey_version` (and
    /// a `redis_version` kept at 7.2.4 for compatibility), so it is checked first.
    pub fn parse(info: &str) -> Option<ServerInfo> {
        let field = |name: &str| {
            info.lines()
                .filter_map(|line| line.trim().split_once(':'))
                .find(|(key, _)| *key == name)
                .map(|(_, value)| value.trim())
        };
        let (software, version) = match field("valkey_version") {
            Some(v) => ("valkey", v),
            None => ("redis", field("redis_version")?),
        };
        let mut parts = version.split('.').map(|p| p.parse::<u32>().ok());
        let mut next = || parts.next().flatten().unwrap_or(0);
        Some(ServerInfo {
            software: software.to_owned(),
            version: (next(), next(), next()),
            run_id: field("run_id").unwrap_or_default().to_owned(),
            uptime_seconds: field("uptime_in_seconds")
                .and_then(|s| s.parse().ok())
                .unwrap_or(0),
        })
    }

    /// Valkey 9 has `DELIFEQ key value`: compare-and-delete without a script.
    pub fn has_delifeq(&self) -> bool {
        self.software == "valkey" && self.version.0 >= 9
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Valkey 9 is recognised by `valkey_version`, not its compatibility field.
    #[test]
    fn valkey_nine() {
        let info = "# Server\r\nredis_version:7.2.4\r\nserver_name:valkey\r\nvalkey_version:9.1.2\r\nrun_id:abc\r\nuptime_in_seconds:42\r\n";
        let parsed = ServerInfo::parse(info).expect("parses");
        assert_eq!(parsed.software, "valkey");
        assert_eq!(parsed.version, (9, 1, 2));
        assert_eq!(parsed.run_id, "abc");
        assert_eq!(parsed.uptime_seconds, 42);
        assert!(parsed.has_delifeq());
    }

    /// Redis 7 and Valkey 8 fall back to the Lua compare-and-delete.
    #[test]
    fn older_servers_use_lua() {
        let redis = ServerInfo::parse("redis_version:7.0.15\r\n").expect("parses");
        assert_eq!(redis.software, "redis");
        assert!(!redis.has_delifeq());
        let valkey8 =
            ServerInfo::parse("redis_version:7.2.4\r\nvalkey_version:8.1.0\r\n").expect("parses");
        assert!(!valkey8.has_delifeq());
        assert_eq!(ServerInfo::parse("nothing here"), None);
    }
}
