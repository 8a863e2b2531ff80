//! A master's own account of where a script call's time goes: `INFO
//! commandstats` counts the time inside each `EVALSHA` (the Lua and every
//! command the script runs) and, separately, each command a script ran, so
//! the difference is the Lua around the commands: argument and reply
//! conversion, the script's own code, each `redis.call`'s dispatch.
//! [`crate::script_cost`] resets the counters before a run and reads them
//! after it. The reply is read by `redlockd_testkit::commandstats`.

use redlockd_testkit::commandstats::{self, CommandStat};

/// Commands that are the bench's own housekeeping, not the workload's.
const HOUSEKEEPING: [&str; 3] = ["info", "flushall", "ping"];

/// The time a master spent over a run, in microseconds, taken apart.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct ScriptTime {
    /// Inside script calls (`EVALSHA`, `EVAL`), the commands they ran
    /// included.
    pub in_scripts: u64,
    /// In the commands the scripts ran.
    pub scripts_commands: u64,
}

impl ScriptTime {
    /// Reads an `INFO commandstats` reply; `top_level` names the commands
    /// the bench sent itself (rslock's `SET`), which no script ran.
    pub(crate) fn of(info: &str, top_level: &[&str]) -> ScriptTime {
        let mut time = ScriptTime::default();
        for CommandStat { name, usec, .. } in commandstats::parse(info) {
            if name == "evalsha" || name == "eval" {
                time.in_scripts += usec;
            } else if !name.contains('|')
                && !HOUSEKEEPING.contains(&name)
                && !top_level.contains(&name)
            {
                time.scripts_commands += usec;
            }
        }
        time
    }

    /// The Lua around the commands: the script calls' time less the
    /// commands'.
    pub(crate) fn lua(&self) -> u64 {
        self.in_scripts.saturating_sub(self.scripts_commands)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INFO: &str = "# Commandstats\r\n\
        cmdstat_time:calls=9124,usec=1149,usec_per_call=0.13,rejected_calls=0,failed_calls=0\r\n\
        cmdstat_evalsha:calls=18248,usec=1833365,usec_per_call=100.47\r\n\
        cmdstat_hmget:calls=291968,usec=159558,usec_per_call=0.55\r\n\
        cmdstat_set:calls=148954,usec=84649,usec_per_call=0.57\r\n\
        cmdstat_config|resetstat:calls=1,usec=30,usec_per_call=30.00\r\n\
        cmdstat_flushall:calls=1,usec=900,usec_per_call=900.00\r\n";

    #[test]
    fn scripts_and_their_commands_apart() {
        let time = ScriptTime::of(INFO, &[]);
        assert_eq!(time.in_scripts, 1_833_365);
        assert_eq!(time.scripts_commands, 1149 + 159_558 + 84_649);
        assert_eq!(time.lua(), 1_833_365 - 1149 - 159_558 - 84_649);
    }

    #[test]
    fn commands_sent_alone_are_not_the_scripts() {
        let time = ScriptTime::of(INFO, &["set"]);
        assert_eq!(time.scripts_commands, 1149 + 159_558);
    }

    #[test]
    fn nothing_read_is_nothing_spent() {
        assert_eq!(
            ScriptTime::of("# Commandstats\r\n", &[]),
            ScriptTime::default()
        );
    }
}
