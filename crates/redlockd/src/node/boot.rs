//! The boot certificate: how a daemon that meets a young master learns
//! that another daemon has already waited out that master's restart, so it
//! trusts the master at once instead of sitting it out for the horizons
//! (`super::horizon`) that the cluster's live locks keep up.
//!
//! # The problem it solves
//!
//! A daemon that first sees a master younger than `max_ttl` cannot tell a
//! master that was started a while ago and has served locks since (a
//! replica joining a running cluster, a daemon restarted, every engine the
//! bench builds) from one that restarted a moment ago and lost its keys.
//! Under the horizon rule alone it sits such a master out until the longest
//! horizon among the others has run out: as long as the longest lock held
//! anywhere. With two other masters down it cannot even settle (too few
//! answers) and keeps the blanket `max_ttl` bound.
//!
//! # The certificate
//!
//! `<key_prefix>boot`, on each master, holds the `run_id` of a server
//! process that some daemon has *fully trusted*: it saw that process, its
//! quarantine (blanket or horizon) ended or was never needed (the process
//! was older than `max_ttl` plus drift when first seen), and it is not
//! refused. The daemon writes it ([`write`]) with one script that reads
//! `run_id` from `INFO` and sets the key only if it names the process the
//! daemon trusted, so a write racing with a restart lands nowhere wrong.
//! Nothing is written with the quarantine off: trust then proves nothing.
//!
//! A daemon that quarantines a master for its identity (first seen young,
//! or a new `run_id`) first reads the certificate and the master's `run_id`
//! in one script ([`read`]); if the certificate names the process that
//! answers, and that is the process the quarantine is for, the quarantine
//! ends at once. Otherwise the horizons are read as before.
//!
//! # Why it is safe
//!
//! The hazard of a master C is a lock it lost *at its start* (a restart
//! without data, or another server behind its address) that is still
//! believed in. A process never loses keys while it runs (see the
//! assumptions below). The daemon D that certified process P of C trusted P
//! only once every lock P could have lost at its start had expired (that is
//! what D's quarantine decided: from the horizons of the others, which
//! every daemon's grants raise, or the blanket bound, or P's uptime). That
//! conclusion is about P, not about D: it holds for every daemon. So a
//! newcomer that finds P's own `run_id` in P's certificate is in the
//! position of D, which trusts P.
//!
//! What cannot pass as a certificate:
//!
//! - **A restart from an AOF or RDB that holds the key.** The restarted
//!   server has a new `run_id`; the certificate names the old one: no
//!   match, the horizons decide. The same holds after a restart without
//!   data (the key is gone).
//! - **A promoted replica with a copied key** (Sentinel, a virtual IP, DNS).
//!   The replica's `run_id` is its own, not the old primary's: no match.
//! - **A certificate read across a restart.** The `run_id` and the key are
//!   read in one atomic script on the process that answers, and compared
//!   with the `run_id` the quarantine was started for; a restart in between
//!   starts a newer quarantine, which the stale reading cannot settle.
//! - **A process whose clock jumped.** Its keys may have expired early while
//!   it kept its `run_id`. A daemon that sees the jump quarantines it (never
//!   ended by a certificate) and takes the certificate back (compare and
//!   delete, [`revoke`]) before writing it again once the quarantine is
//!   over.
//!
//! The assumptions, beyond those of the horizon rule: a `run_id` names one
//! server process and is never reused (Redis and Valkey draw 160 random
//! bits at each start); nothing deletes keys of a running process except
//! expiry (no `FLUSHALL`, no eviction: `maxmemory-policy noeviction` is
//! checked at connection); every daemon sharing the masters uses the same
//! `max_ttl` and key prefix. Residual risk: a clock jump seen by no daemon
//! yet when a newcomer reads the certificate. That newcomer trusts the
//! master as it would trust an old master first seen (same exposure as the
//! daemon without certificates, for masters older than `max_ttl`).

use fred::clients::WithOptions;
use fred::prelude::{Client, ClientLike, Value};
use fred::types::{ClusterHash, CustomCommand};

/// Reads the master's `run_id` and its certificate, atomically.
const READ: &str = r"
local rid = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')
local boot = redis.call('GET', KEYS[1])
if not boot then boot = '' end
return {rid or '', boot}
";

/// Writes the certificate for `ARGV[1]` if that is the answering process.
const WRITE: &str = r"
local rid = string.match(redis.call('INFO', 'server'), 'run_id:(%w+)')
if rid ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], rid)
return 1
";

/// Deletes the certificate if it names `ARGV[1]`.
const REVOKE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
";

/// What one [`read`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Reading {
    /// The answering process's `run_id`.
    pub(crate) run_id: String,
    /// The `run_id` the certificate names (empty: none).
    pub(crate) certificate: String,
}

impl Reading {
    /// Whether the certificate vouches for process `expected`: it names
    /// the process that answered, and that is the one expected.
    pub(crate) fn vouches_for(&self, expected: &str) -> bool {
        !expected.is_empty() && self.run_id == expected && self.certificate == expected
    }
}

async fn eval(
    command: &WithOptions<Client>,
    script: &'static str,
    key: &str,
    arg: Option<&str>,
) -> Result<Value, ()> {
    let cmd = CustomCommand::new_static("EVAL", ClusterHash::FirstKey, false);
    let mut args: Vec<Value> = vec![script.into(), 1.into(), key.into()];
    args.extend(arg.map(Value::from));
    command
        .custom::<Value, Value>(cmd, args)
        .await
        .map_err(|_| ())
}

/// The master's `run_id` and certificate, read together (bounded by
/// `node_timeout` like every command).
pub(crate) async fn read(command: &WithOptions<Client>, key: &str) -> Result<Reading, ()> {
    let Value::Array(fields) = eval(command, READ, key, None).await? else {
        return Err(());
    };
    let text = |v: &Value| v.as_string().unwrap_or_default();
    match fields.as_slice() {
        [run_id, certificate] => Ok(Reading {
            run_id: text(run_id),
            certificate: text(certificate),
        }),
        _ => Err(()),
    }
}

/// Writes the certificate for process `run_id`; whether it was written
/// (false: another process answered).
pub(crate) async fn write(
    command: &WithOptions<Client>,
    key: &str,
    run_id: &str,
) -> Result<bool, ()> {
    let written = eval(command, WRITE, key, Some(run_id)).await?;
    Ok(written.as_i64() == Some(1))
}

/// Deletes the certificate if it names `run_id`.
pub(crate) async fn revoke(
    command: &WithOptions<Client>,
    key: &str,
    run_id: &str,
) -> Result<(), ()> {
    eval(command, REVOKE, key, Some(run_id)).await.map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::Reading;

    /// Only a certificate naming the answering process, which is the one
    /// expected, vouches: not one copied from another process (a replica,
    /// an AOF), nor one read from a process other than the expected one.
    #[test]
    fn certificate_must_name_the_answering_and_expected_process() {
        let reading = |run_id: &str, certificate: &str| Reading {
            run_id: run_id.into(),
            certificate: certificate.into(),
        };
        assert!(reading("a", "a").vouches_for("a"));
        assert!(!reading("b", "a").vouches_for("b"), "restored from a's AOF");
        assert!(!reading("b", "a").vouches_for("a"), "restarted since");
        assert!(
            !reading("a", "a").vouches_for("b"),
            "another process expected"
        );
        assert!(!reading("a", "").vouches_for("a"), "no certificate");
        assert!(!reading("", "").vouches_for(""), "nothing known");
    }
}
