//! What a master is, read from `INFO server`, `INFO replication` and
//! `INFO memory` at every (re)connection: which software and version (so the
//! release path can use the cheapest command), how long it has been up and
//! which process it is (restart quarantine), and whether it is set up in a
//! way that can lose locks (a replica, an evicting memory policy, too old).

/// The server software and version a master reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ServerInfo {
    /// "valkey" or "redis".
    pub software: String,
    /// (major, minor, patch).
    pub version: (u32, u32, u32),
    /// `run_id`: changes whenever the server process restarts.
    pub run_id: String,
    /// Seconds since the server process started.
    pub uptime_seconds: u64,
    /// `role` from INFO replication: "master" or "slave".
    pub role: String,
    /// `maxmemory` in bytes (0: no limit).
    pub maxmemory: u64,
    /// `maxmemory_policy`.
    pub maxmemory_policy: String,
}

/// The oldest server the scripts are written for (multi-field HSET, PTTL
/// and `SET .. NX PX` semantics as relied on).
pub(crate) const MIN_VERSION: (u32, u32, u32) = (6, 0, 0);

impl ServerInfo {
    /// Parses the text of `INFO` (server, and replication and memory when
    /// present). Valkey reports `valkey_version` (and a `redis_version` kept
    /// at 7.2.4 for compatibility), so it is checked first.
    pub(crate) fn parse(info: &str) -> Option<ServerInfo> {
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
            role: field("role").unwrap_or("master").to_owned(),
            maxmemory: field("maxmemory").and_then(|s| s.parse().ok()).unwrap_or(0),
            maxmemory_policy: field("maxmemory_policy").unwrap_or("noeviction").to_owned(),
        })
    }

    /// Why this master must not count toward a quorum at all, with what to
    /// change: a replica (it can lose acknowledged writes at failover and is
    /// not independent), or a server too old for the scripts.
    pub(crate) fn refusal(&self) -> Option<String> {
        if self.role != "master" {
            return Some(format!(
                "is a replica (role:{}): Redlock needs independent masters; \
                 point redlock.nodes at masters without replication or failover",
                self.role
            ));
        }
        if self.version < MIN_VERSION {
            return Some(format!(
                "runs {} {}.{}.{}, older than {}.{}.{}: upgrade it",
                self.software,
                self.version.0,
                self.version.1,
                self.version.2,
                MIN_VERSION.0,
                MIN_VERSION.1,
                MIN_VERSION.2
            ));
        }
        None
    }

    /// Setups that work but can lose locks, with what to change.
    pub(crate) fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if self.maxmemory > 0 && self.maxmemory_policy != "noeviction" {
            warnings.push(format!(
                "has maxmemory {} with maxmemory-policy {}: lock keys can be evicted \
                 under memory pressure; set maxmemory-policy noeviction",
                self.maxmemory, self.maxmemory_policy
            ));
        }
        warnings
    }

    /// Valkey 9 has `DELIFEQ key value`: compare-and-delete without a script.
    pub(crate) fn has_delifeq(&self) -> bool {
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

    /// Replicas and old servers are refused; evicting policies warned about.
    #[test]
    fn unsafe_setups() {
        let ok = ServerInfo::parse("redis_version:7.0.15\r\nrole:master\r\nmaxmemory:0\r\nmaxmemory_policy:allkeys-lru\r\n")
            .expect("parses");
        assert_eq!(ok.refusal(), None);
        assert!(ok.warnings().is_empty(), "no maxmemory: nothing is evicted");
        let replica = ServerInfo::parse("redis_version:7.0.15\r\nrole:slave\r\n").expect("parses");
        assert!(replica.refusal().expect("refused").contains("replica"));
        let old = ServerInfo::parse("redis_version:5.0.7\r\n").expect("parses");
        assert!(old.refusal().expect("refused").contains("older"));
        let evicting = ServerInfo::parse(
            "redis_version:7.0.15\r\nmaxmemory:1000000\r\nmaxmemory_policy:volatile-lru\r\n",
        )
        .expect("parses");
        assert!(evicting.warnings()[0].contains("noeviction"));
    }
}
