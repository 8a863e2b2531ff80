//! Reading a master's `INFO commandstats` reply: how many times each
//! command ran and the microseconds it took. A command a script ran counts
//! under its own name too (and its time inside the script's).

/// One `cmdstat_<name>:calls=..,usec=..,..` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandStat<'a> {
    /// The command's name, lowercase (`config|resetstat` for a
    /// subcommand).
    pub name: &'a str,
    /// How many times it ran since the counters were last reset.
    pub calls: u64,
    /// The microseconds those runs took, together.
    pub usec: u64,
}

/// Every command's line of an `INFO commandstats` reply; other lines are
/// skipped.
pub fn parse(info: &str) -> impl Iterator<Item = CommandStat<'_>> {
    info.lines().filter_map(|line| {
        let (name, fields) = line.trim().strip_prefix("cmdstat_")?.split_once(':')?;
        let field = |key: &str| -> Option<u64> {
            fields
                .split(',')
                .find_map(|f| f.strip_prefix(key)?.strip_prefix('='))?
                .parse()
                .ok()
        };
        Some(CommandStat {
            name,
            calls: field("calls")?,
            usec: field("usec")?,
        })
    })
}

/// The calls of the commands named in `names`, together.
pub fn calls(info: &str, names: &[&str]) -> u64 {
    parse(info)
        .filter(|stat| names.contains(&stat.name))
        .map(|stat| stat.calls)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "# Commandstats\r\n\
        cmdstat_evalsha:calls=18248,usec=1833365,usec_per_call=100.47,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_hmget:calls=291968,usec=159558,usec_per_call=0.55\r\n\
        cmdstat_eval:calls=2,usec=3000,usec_per_call=1500.00\r\n\
        cmdstat_config|resetstat:calls=1,usec=30,usec_per_call=30.00\r\n";

    #[test]
    fn reads_each_commands_line() {
        let stats: Vec<_> = parse(INFO).collect();
        assert_eq!(stats.len(), 4);
        assert_eq!(
            stats[0],
            CommandStat {
                name: "evalsha",
                calls: 18248,
                usec: 1_833_365
            }
        );
        assert_eq!(stats[3].name, "config|resetstat");
    }

    #[test]
    fn counts_the_named_commands_only() {
        assert_eq!(calls(INFO, &["evalsha", "eval"]), 18250);
        assert_eq!(calls(INFO, &["publish"]), 0);
    }

    #[test]
    fn usec_per_call_is_not_usec() {
        let line = "cmdstat_get:calls=3,usec_per_call=1.00,usec=7";
        assert_eq!(parse(line).next().map(|s| s.usec), Some(7));
        assert_eq!(parse("cmdstat_get:calls=1").count(), 0);
    }
}
