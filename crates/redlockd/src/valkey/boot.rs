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
//! refused. The daemon writes it ([`write()`], a plain `SET`) on the
//! connection on which it read that process's `run_id` from `INFO`. A write
//! that lands on another process anyway (a restart in between) is inert: it
//! names a `run_id` that process does not have. Nothing is written with the
//! quarantine off: trust then proves nothing.
//!
//! A daemon that quarantines a master for its identity (first seen young,
//! or a new `run_id`) first reads the certificate ([`read`], a `GET`) on
//! the connection on which it read the master's `run_id`, checked before
//! and after (`super::connection`): the reply came from that process. If
//! the certificate names that process, and that is the process the
//! quarantine is for, the quarantine ends at once. Otherwise the horizons
//! are read as before. Plain commands, not scripts: they are not counted
//! as lock commands and need no scripting on the master.
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
//! - **A certificate read across a restart.** The key is read on the
//!   connection whose `INFO` gave the `run_id`, and the reply counts only if
//!   no other connection was opened meanwhile (`super::connection`); it is
//!   compared with the `run_id` the quarantine was started for, and a
//!   restart in between starts a newer quarantine, which the stale reading
//!   cannot settle.
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

use super::state::NodeState;
use fred::clients::WithOptions;
use fred::prelude::{Client, ClientLike, Value};
use fred::types::{ClusterHash, CustomCommand};

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

/// Sends `command key [arg]` on the verified connection of the process
/// whose `run_id` the daemon knows, and returns the reply with that
/// `run_id`: the connection current before the command was sent must still
/// be current, with `INFO` read on it, once it answered
/// (`super::connection`), so the reply came from that very process. Plain
/// commands, not scripts: they are not lock commands.
async fn on_known_process(
    state: &NodeState,
    command: &WithOptions<Client>,
    name: &'static str,
    args: Vec<Value>,
) -> Result<(String, Value), ()> {
    let connection = state.connection();
    let run_id = state.run_id();
    if !state.verified_on_connection(connection) || run_id.is_empty() {
        return Err(());
    }
    let cmd = CustomCommand::new_static(name, ClusterHash::FirstKey, false);
    let reply: Value = command.custom(cmd, args).await.map_err(|_| ())?;
    match state.verified_on_connection(connection) && state.run_id() == run_id {
        true => Ok((run_id, reply)),
        false => Err(()),
    }
}

/// The master's certificate, with the `run_id` of the process that
/// answered (bounded by `node_timeout` like every command).
pub(crate) async fn read(
    state: &NodeState,
    command: &WithOptions<Client>,
    key: &str,
) -> Result<Reading, ()> {
    let (run_id, reply) = on_known_process(state, command, "GET", vec![key.into()]).await?;
    Ok(Reading {
        run_id,
        certificate: reply.as_string().unwrap_or_default(),
    })
}

/// Writes the certificate for process `run_id`, if that is the process the
/// connection reaches. Had it landed on another process it would be inert
/// anyway: it names `run_id`, which no other process has.
pub(crate) async fn write(
    state: &NodeState,
    command: &WithOptions<Client>,
    key: &str,
    run_id: &str,
) -> Result<bool, ()> {
    if state.run_id() != run_id {
        return Ok(false);
    }
    on_known_process(state, command, "SET", vec![key.into(), run_id.into()])
        .await
        .map(|(answered, _)| answered == run_id)
}

/// Deletes the certificate of process `run_id` (after its clock jumped),
/// if that is the process the connection reaches; `Ok` also when another
/// process answers now (its certificate, if any, does not name `run_id`).
pub(crate) async fn revoke(
    state: &NodeState,
    command: &WithOptions<Client>,
    key: &str,
    run_id: &str,
) -> Result<(), ()> {
    if state.run_id() != run_id {
        return Ok(());
    }
    on_known_process(state, command, "DEL", vec![key.into()])
        .await
        .map(|_| ())
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
