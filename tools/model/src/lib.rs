//! An exhaustive model check, with [`stateright`], of what redlockd's
//! per-master Lua scripts do and of the quorum rule the engine decides by,
//! for every kind of lock on one resource: plain (mutex), shared (read),
//! semaphore permits (limits 2 and 3) and a multi-resource lock's effect on
//! the resource. It checks, in every reachable state:
//!
//! - **exclusion**: no two clients that believe they hold (within their
//!   validity) hold conflicting grants ([`scripts::Kind::conflicts`]);
//! - **semaphore limit**: no more permit holders than a holder's limit;
//! - **fence order**: every grant's fence is strictly above the fence of
//!   every earlier conflicting grant of another token;
//!
//! and, as `sometimes` properties, that the interesting states are reached
//! (a plain grant after a permit's, a key put back by re-creation, a grant
//! after a quarantine, a one-round grant, a request-id retry that resumed
//! its lock), so the checks are not vacuous.
//!
//! # What is modelled
//!
//! - **Masters** ([`world::MASTERS`] = 3, quorum 2), each a [`store::Store`]
//!   of the keys `crates/redlockd/src/redlock/keys.rs` lays out. Each script
//!   is one function of [`scripts`] run atomically on one store, written to
//!   be read side by side with its Lua (ACQUIRE, COMMIT_FENCE, EXTEND,
//!   RECREATE, RELEASE in `valkey/scripts/mod.rs`; ACQUIRE_PERMIT; the shared
//!   scripts of `valkey/scripts/rw.rs`; ACQUIRE_ALL for one resource).
//! - **Clients** (2 or 3), each a caller and the daemon replica serving it
//!   ([`model`]): an attempt sends the acquire round to every master, counts
//!   answers as they come (an answer from a master in quarantine counts as
//!   failed, `round.rs`), decides by the quorum rule (a majority of yes; a
//!   round may time out at any moment), takes the one-round fence where
//!   every counted master took the proposal (`fence::one_round`), else
//!   picks `fence::next_fence` and sends the commit to every master; a
//!   failed attempt releases everywhere. A holder extends (only while its
//!   validity lasts, as a Hold session does), re-creates its key where an
//!   Extend (or a late answer to it) says it is missing (`recreate.rs`),
//!   and releases. A request-id client keeps one token for all attempts;
//!   when its grant's answer is lost it resumes by Extend (`wait.rs`,
//!   `resume`): held, it is answered the fence the masters report;
//!   refused, it attempts again under the same token.
//! - **Messages**: per client and master a FIFO of commands (a master
//!   connection sends in submission order). A master runs the head of a
//!   queue at any time, so commands of a decided round run late
//!   (stragglers) in every possible order with everything else.
//! - **Faults**, each with a budget ([`world::Budget`]): one master
//!   restarted empty; an acquire lost before it ran; a reply lost after
//!   its script ran (the effect lands, the answer never comes); a grant
//!   whose answer the caller never received.
//! - **The fixes being built in main**, on by default, and each defect
//!   behind a switch ([`scripts::Counterfactuals`]): D2
//!   (`recreate_without_limit`: RECREATE of a permit writes `lim`, and an
//!   Extend of a permit finding `lim` missing writes it) and D3
//!   (`per_kind_fences`: a permit reads and raises the resource's `max`).
//!   A third switch, `recreate_across_kinds`, is the scripts as they are in
//!   main: RECREATE looks only at its own key. The model found that this
//!   breaks exclusion (D4, `tests/tests/check.rs`); its default is the fix it
//!   suggests (RECREATE refuses where the kind's acquire would answer a
//!   conflict), which is not in main yet.
//!
//! # Abstractions
//!
//! - **Time.** There is no clock, only the order in which rounds start
//!   (rounds are numbered across clients, [`world::State::epoch`]). Every
//!   key carries, as ghost state, the round its expiry counts from: its
//!   `SET .. PX ttl` or `PEXPIRE` ran after that round was sent, so it
//!   lives at least until that round's start plus the ttl. A key may expire
//!   at any moment ([`model::Action::Expire`]); when it does, time has
//!   passed that round's start plus the ttl, and so every round that
//!   started no later: every belief resting on such a round ends (a
//!   validity is `ttl - elapsed - drift` from the round's start, so it ends
//!   before any of its keys expires), and such a round still out comes out
//!   expired (no grant). Nothing else ends a belief early: fewer believers
//!   would only hide violations.
//! - **Late commands.** A command sent when its round started runs within
//!   a ttl of that start or never: once a key of a round as recent has
//!   expired, it is dropped from its queue ([`world::World::late_commands`]
//!   lifts this; re-creations and releases, sent later, are not dropped).
//! - **Releases** of a token that is never used again (any token but a
//!   request id's) are not sent as commands: deleting its key at some
//!   later moment is what an expiry does, and expiries may happen at any
//!   moment. A request id's releases are sent (its token comes back).
//! - **Restart and quarantine.** A restart wipes the master's keys (lock
//!   keys, fence hashes, `lim`) and drops the commands in flight to it; its
//!   answers count as failed until its quarantine ends. The quarantine is
//!   modelled as the masters' rule: it may end once every key the restart
//!   lost would have expired, so its end has the effects of those keys'
//!   expiries. The horizon keys that implement the rule are not modelled.
//! - **Fences and the clock.** Fences are small counters. The masters'
//!   clock (the fence's floor in `next_fence`, and the lower bound of a
//!   proposal) stays at 0, except that a quarantine's end moves it above
//!   every fence granted so far: the quarantine lasts at least a ttl past
//!   the last commit on a surviving master, and the argument of
//!   `fence.rs` needs the ttl to exceed the proposal window. So fence order
//!   rests on the counters everywhere but across a restart, as in
//!   `fence.rs`. A proposal is one above every fence picked so far.
//! - **Left out**: lock-delay (`nb`), hold-at-least (`lu`), waiter and
//!   writer-waiting markers (`wm`, `ww`): they only refuse grants or make
//!   keys live longer. Fence hashes do not expire (`fence_ttl` outlives
//!   every lock). Masters' clocks do not drift or jump. Request ids are
//!   modelled for plain and shared grants only, as the daemon refuses them
//!   for the others.
//!
//! # Bounds
//!
//! Each test of `tests/tests/check.rs` is one bounded world (its clients, their
//! attempts and extensions, its fault budget), checked exhaustively by
//! depth-first search with the masters' symmetry (states that differ by
//! the masters' order, or by the numbering of rounds, are one). Its doc
//! comment says what it covers; the largest world (a permit extended twice
//! beside a plain caller, a restart and a lost acquire, about 13 million
//! states) is `#[ignore]`d for its time.
//!
//! # Running
//!
//! `cargo test -p redlockd-model --release -- --nocapture` prints each
//! world's state count and each counterexample's steps; add `--ignored`
//! for the largest world. The workspace's debug profile builds this crate
//! and the checker with optimisations, so `cargo test --workspace` (CI)
//! runs it in about the same time.

pub mod model;
pub mod scripts;
pub mod small;
pub mod store;
pub mod world;
