//! The transitions: what each actor may do next, and what it changes. A
//! master runs the next command a client queued for it (the script, then
//! the answer counted by the client's round at once); a client starts,
//! decides and follows up its rounds by the quorum rule; time and faults
//! expire keys, lose messages and restart a master. The client's side
//! mirrors `crates/redlockd/src/redlock/attempt.rs` (acquire round, commit
//! round, release everywhere on failure), `mod.rs` (`extend_lease_one`,
//! `release_one`), `recreate.rs` and `wait.rs` (`resume`).

use crate::scripts::{self, AcquireReply, ExtendReply, Kind};
use crate::store::{Key, Stamp, Token};
use crate::world::{Master, Op, Phase, Quarantine, Reply, Request, State, World, MASTERS, QUORUM};
use stateright::{Model, Property};

/// One step of the world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Client `client` starts an acquisition attempt, with a one-round
    /// proposal or without.
    Start {
        /// The client.
        client: u8,
        /// With a proposal.
        propose: bool,
    },
    /// Master `master` runs the next command of client `client`; the
    /// answer reaches the client (unless `lose_reply`: the effect lands,
    /// the answer is lost).
    Run {
        /// The client.
        client: u8,
        /// The master.
        master: u8,
        /// The answer is lost.
        lose_reply: bool,
    },
    /// The newest command of client `client` to master `master`, an
    /// acquire, is lost: it never runs (the master was unreachable).
    Drop {
        /// The client.
        client: u8,
        /// The master.
        master: u8,
    },
    /// The client's round stops waiting: unanswered masters count as
    /// failed (`node_timeout`).
    Timeout {
        /// The client.
        client: u8,
    },
    /// A holder sends an Extend round.
    Extend {
        /// The client.
        client: u8,
    },
    /// A holder releases: cancels its pending re-creations, then
    /// compare-and-delete on every master.
    Release {
        /// The client.
        client: u8,
    },
    /// A fresh grant's answer never reaches its (request-id) caller.
    LoseAnswer {
        /// The client.
        client: u8,
    },
    /// The request-id caller retries: the retry resumes by Extend.
    Resume {
        /// The client.
        client: u8,
    },
    /// A key expires on master `master`.
    Expire {
        /// The master.
        master: u8,
        /// The key.
        key: Key,
    },
    /// Master `master` restarts empty and goes into quarantine.
    Restart {
        /// The master.
        master: u8,
    },
    /// Master `master`'s quarantine ends: every key it lost would have
    /// expired by now.
    EndQuarantine {
        /// The master.
        master: u8,
    },
}

/// The checker's model: a [`World`] and its transitions.
#[derive(Clone, Debug)]
pub struct Redlock(pub World);

impl Redlock {
    fn kind(&self, c: usize) -> Kind {
        self.0.clients[c].kind
    }

    /// Starts client `c`'s next round: its number is the world's next
    /// (rounds are numbered in the order they start, across clients: the
    /// order the crate doc's "Time" reasons with).
    fn next_round(s: &mut State, c: usize) -> u8 {
        s.epoch += 1;
        s.clients[c].round = s.epoch;
        s.epoch
    }

    /// Sends `op` to every master for round `round` of client `c`, and
    /// makes every master's answer awaited.
    fn send_all(s: &mut State, c: usize, op: Op, awaited: bool) {
        let request = Request {
            op,
            round: s.clients[c].round,
            attempt: s.clients[c].attempt,
        };
        for m in &mut s.masters {
            m.queues[c].push(request);
            if awaited {
                m.replies[c] = Reply::Waiting;
            }
        }
    }

    /// The answers of client `c`'s current round, as its tally counts
    /// them: (yes, no, still awaited).
    fn tally(s: &State, c: usize) -> (usize, usize, usize) {
        let mut t = (0, 0, 0);
        for m in &s.masters {
            let r = m.replies[c];
            t.0 += usize::from(r.yes());
            t.1 += usize::from(r.no());
            t.2 += usize::from(r == Reply::Waiting);
        }
        t
    }

    /// Runs the next command of client `c` on master `mi`.
    fn run(&self, s: &mut State, c: usize, mi: usize, lose_reply: bool) {
        let cf = self.0.cf;
        let kind = self.kind(c);
        let clock = s.clock;
        let request = s.masters[mi].queues[c].remove(0);
        let token = Token {
            client: c as u8,
            attempt: request.attempt,
        };
        let stamp = |gen| Stamp { token, gen };
        let store = &mut s.masters[mi].store;
        let reply = match request.op {
            Op::Acquire { proposal } => Reply::Acquire(match kind {
                Kind::Plain => scripts::acquire(store, stamp(request.round), proposal, clock),
                Kind::Multi => scripts::acquire_all(store, stamp(request.round), clock),
                Kind::Shared => scripts::acquire_shared(store, stamp(request.round), clock),
                Kind::Permit { limit, index } => {
                    scripts::acquire_permit(store, stamp(request.round), (limit, index), clock, cf)
                }
            }),
            Op::Commit { fence } => {
                Reply::Commit(scripts::commit_fence(store, token, kind, fence, cf))
            }
            Op::Extend => Reply::Extend(scripts::extend(store, stamp(request.round), kind, cf)),
            Op::Recreate { gen } => {
                let put_back = scripts::recreate(store, stamp(gen), kind, cf);
                s.ghost.recreated |= put_back && self.0.witnesses;
                return;
            }
            Op::Release => {
                scripts::release(store, token, kind);
                return;
            }
        };
        if lose_reply {
            return;
        }
        let master = &mut s.masters[mi];
        let client = &s.clients[c];
        let current = request.round == client.round && master.replies[c] == Reply::Waiting;
        if !current {
            // A straggler: the round was decided without it. An Extend's
            // late "missing" still has its key put back
            // (`recreate_lost_keys`' stragglers; trust is not asked there).
            if reply == Reply::Extend(ExtendReply::Missing)
                && client.extended == Some(request.round)
            {
                Self::due(s, c, mi, request.round);
            }
            return;
        }
        if master.quarantine.is_some() {
            // `round.rs`: an untrusted master's answer counts as failed.
            master.replies[c] = Reply::Failed;
        } else {
            master.replies[c] = reply;
        }
        let (yes, _, waiting) = Self::tally(s, c);
        if yes >= QUORUM || waiting == 0 {
            self.decide(s, c);
        }
    }

    /// Master `mi` answered client `c`'s extension of round `gen` that
    /// the key is missing: a re-creation is sent there
    /// (`Recreations::start`: it waits up to `node_timeout` for late
    /// answers, long before the holder's next Extend). A release cancels
    /// it (`Recreations::cancel`): none is sent for a client that has
    /// released or lost the lock.
    fn due(s: &mut State, c: usize, mi: usize, gen: u8) {
        let client = &s.clients[c];
        if matches!(
            client.phase,
            Phase::Holding { .. } | Phase::Extending { .. }
        ) {
            let request = Request {
                op: Op::Recreate { gen },
                round: client.round,
                attempt: client.attempt,
            };
            s.masters[mi].queues[c].push(request);
        }
    }

    /// Client `c`'s current round is decided on the answers it has.
    fn decide(&self, s: &mut State, c: usize) {
        let (yes, no, _) = Self::tally(s, c);
        let reached = yes >= QUORUM;
        let replies: [Reply; MASTERS] = std::array::from_fn(|m| s.masters[m].replies[c]);
        for m in &mut s.masters {
            m.replies[c] = Reply::Idle;
        }
        match s.clients[c].phase {
            Phase::Acquiring {
                gen,
                proposal,
                lapsed,
            } => {
                if !reached || lapsed {
                    return self.clean_up(s, c);
                }
                let reads = replies.iter().filter_map(|r| match r {
                    Reply::Acquire(AcquireReply::Granted { max, took, now }) => {
                        Some((*max, *took, *now))
                    }
                    _ => None,
                });
                // `fence::one_round`: every counted master took it.
                if proposal > 0 && reads.clone().all(|(max, took, _)| took && max < proposal) {
                    s.ghost.one_round = self.0.witnesses;
                    return self.grant(s, c, gen, proposal, false);
                }
                // `fence::next_fence`: above every counter as the acquire
                // left it, no lower than any master's clock.
                let fence = reads.fold(1, |f: u8, (max, took, now)| {
                    let counter = if took { max.max(proposal) } else { max };
                    f.max(counter + 1).max(now)
                });
                s.high = s.high.max(fence);
                Self::next_round(s, c);
                s.clients[c].phase = Phase::Committing { gen, fence, lapsed };
                Self::send_all(s, c, Op::Commit { fence }, true);
                // A master that refused the acquire does not have the
                // token's key (its SET never ran, and nothing else writes
                // the key before the commit): COMMIT_FENCE's `GET` answers
                // 0 there whenever it runs, so the answer is counted now.
                for (m, r) in replies.iter().enumerate() {
                    if matches!(
                        r,
                        Reply::Acquire(AcquireReply::Refused | AcquireReply::Conflict)
                    ) {
                        s.masters[m].queues[c].pop();
                        s.masters[m].replies[c] = Reply::Commit(false);
                    }
                }
            }
            Phase::Committing { gen, fence, lapsed } => match reached && !lapsed {
                true => self.grant(s, c, gen, fence, false),
                false => self.clean_up(s, c),
            },
            Phase::Extending {
                gen,
                lapsed,
                resume,
            } => {
                if reached && !lapsed {
                    let client = &mut s.clients[c];
                    client.belief = Some(gen);
                    client.extended = Some(client.round);
                    for (m, r) in replies.iter().enumerate() {
                        if *r == Reply::Extend(ExtendReply::Missing) {
                            Self::due(s, c, m, gen);
                        }
                    }
                    if !resume {
                        s.clients[c].phase = Phase::Holding { fresh: false };
                        return;
                    }
                    // `Redlock::extend`: the largest fence reported, else
                    // FenceUnknown (the retry fails; the lock stays).
                    let fence = replies
                        .iter()
                        .filter_map(|r| match r {
                            Reply::Extend(ExtendReply::Extended { fence }) => Some(*fence),
                            _ => None,
                        })
                        .max()
                        .unwrap_or(0);
                    if fence == 0 {
                        let client = &mut s.clients[c];
                        client.belief = None;
                        client.phase = Phase::Done;
                        return;
                    }
                    s.ghost.resumed = self.0.witnesses;
                    return self.grant(s, c, gen, fence, true);
                }
                let refused = no >= QUORUM && !reached;
                let client = &mut s.clients[c];
                client.phase = match (resume, refused) {
                    // NotHeld: the holder learns it lost the lock.
                    (false, true) => {
                        client.belief = None;
                        Phase::Done
                    }
                    // Too few answers (or the validity ran out): it still
                    // holds on its earlier validity, if any is left.
                    (false, false) => Phase::Holding { fresh: false },
                    // NotHeld: the retry's attempts start (same token).
                    (true, true) if client.attempts < self.0.clients[c].attempts => Phase::Idle,
                    (true, true) => Phase::Done,
                    (true, false) => Phase::Unaware,
                };
            }
            _ => unreachable!("decided a round of a client without one"),
        }
    }

    /// A failed attempt: released on every master, then the next attempt
    /// (if any) or the end.
    fn clean_up(&self, s: &mut State, c: usize) {
        self.release_everywhere(s, c);
        let client = &mut s.clients[c];
        client.belief = None;
        client.phase = match client.attempts < self.0.clients[c].attempts {
            true => Phase::Idle,
            false => Phase::Done,
        };
    }

    /// Compare-and-delete of client `c`'s token on every master. Only a
    /// request-id client sends it as commands: its token comes back in its
    /// next attempt, so where its release runs, before or after that
    /// attempt's commands, matters. Any other token is never used again
    /// once released, and deleting its key at some later instant is exactly
    /// what an expiry of that key does, which the model allows at any time
    /// ([`Action::Expire`]): its releases are left to expiries (crate doc).
    fn release_everywhere(&self, s: &mut State, c: usize) {
        if self.0.clients[c].request_id {
            Self::send_all(s, c, Op::Release, false);
        }
    }

    /// Client `c` is granted (or, `resumed`, answered its lock back) with
    /// `fence` on the validity of round `gen`: checks fence order against
    /// every earlier conflicting grant of another token.
    fn grant(&self, s: &mut State, c: usize, gen: u8, fence: u8, resumed: bool) {
        let kind = self.kind(c);
        let restarted = self.0.faults.restarts > s.budget.restarts;
        if restarted && s.masters.iter().all(|m| m.quarantine.is_none()) {
            s.ghost.rejoined = self.0.witnesses;
        }
        for (d, other) in s.clients.iter().enumerate().take(self.0.clients.len()) {
            let same_token = d == c && (resumed || self.0.clients[c].request_id);
            if !same_token && other.best > 0 && kind.conflicts(self.kind(d)) && fence <= other.best
            {
                s.ghost.fence_inversion = true;
            }
            if kind == Kind::Plain && matches!(self.kind(d), Kind::Permit { .. }) && other.best > 0
            {
                s.ghost.plain_after_permit = self.0.witnesses;
            }
        }
        let client = &mut s.clients[c];
        client.best = client.best.max(fence);
        client.fence = fence;
        client.belief = Some(gen);
        client.phase = Phase::Holding { fresh: !resumed };
    }

    /// A key of `stamp` is gone by expiry (or would have, for a key a
    /// restart lost): time has passed the start of round `stamp.gen` plus
    /// the ttl. So has it the start of every round started before it, of
    /// any client, plus the ttl: every belief on such a round has ended,
    /// and such a round still out can no longer come out valid.
    fn expired(&self, s: &mut State, stamp: Stamp) {
        s.now = s.now.max(stamp.gen);
        if !self.0.late_commands {
            // A command sent when its round started runs within the ttl
            // or never (crate doc, "Late commands"): those of rounds
            // started by now's bound can no longer run.
            let now = s.now;
            for m in &mut s.masters {
                for q in &mut m.queues {
                    q.retain(|r| {
                        r.round > now
                            || !matches!(r.op, Op::Acquire { .. } | Op::Commit { .. } | Op::Extend)
                    });
                }
            }
        }
        for client in s.clients.iter_mut().take(self.0.clients.len()) {
            if client.belief.is_some_and(|b| b <= stamp.gen) {
                client.belief = None;
            }
            match &mut client.phase {
                Phase::Acquiring { gen, lapsed, .. }
                | Phase::Committing { gen, lapsed, .. }
                | Phase::Extending { gen, lapsed, .. }
                    if *gen <= stamp.gen =>
                {
                    *lapsed = true;
                }
                _ => {}
            }
        }
    }

    fn believers(s: &State) -> impl Iterator<Item = usize> + '_ {
        s.clients
            .iter()
            .enumerate()
            .filter(|(_, c)| c.belief.is_some())
            .map(|(i, _)| i)
    }
}

impl Model for Redlock {
    type State = State;
    type Action = Action;

    fn init_states(&self) -> Vec<State> {
        vec![State::initial(&self.0)]
    }

    fn actions(&self, s: &State, out: &mut Vec<Action>) {
        let trusted = s.masters.iter().all(|m| m.quarantine.is_none());
        for (ci, client) in s.clients.iter().enumerate().take(self.0.clients.len()) {
            let spec = &self.0.clients[ci];
            let c = ci as u8;
            match client.phase {
                Phase::Idle if client.attempts < spec.attempts => {
                    out.push(Action::Start {
                        client: c,
                        propose: false,
                    });
                    // No proposal while a master is untrusted (`attempt.rs`).
                    if self.0.proposals && spec.kind == Kind::Plain && trusted {
                        out.push(Action::Start {
                            client: c,
                            propose: true,
                        });
                    }
                }
                Phase::Acquiring { .. } | Phase::Committing { .. } | Phase::Extending { .. }
                    if Self::tally(s, ci).2 > 0 =>
                {
                    out.push(Action::Timeout { client: c });
                }
                Phase::Holding { fresh } => {
                    // A Hold session extends only while its validity lasts
                    // (`Redlock::hold`: past its deadline the lock is lost);
                    // a caller of the unary Extend may be late.
                    let in_time = client.belief.is_some() || spec.extend_after_lapse;
                    if client.extends < spec.extends && in_time {
                        out.push(Action::Extend { client: c });
                    }
                    out.push(Action::Release { client: c });
                    if fresh && spec.request_id && s.budget.lost_answers > 0 {
                        out.push(Action::LoseAnswer { client: c });
                    }
                }
                Phase::Unaware if client.extends < spec.extends => {
                    out.push(Action::Resume { client: c });
                }
                _ => {}
            }
            for (mi, m) in s.masters.iter().enumerate() {
                let master = mi as u8;
                if let Some(last) = m.queues[ci].last() {
                    out.push(Action::Run {
                        client: c,
                        master,
                        lose_reply: false,
                    });
                    if s.budget.lost_replies > 0 {
                        out.push(Action::Run {
                            client: c,
                            master,
                            lose_reply: true,
                        });
                    }
                    // A lost request is an acquire that never reached the
                    // master; lost while it is the newest command there,
                    // which is as good as lost when sent (the commands
                    // behind it may run at any later time anyway).
                    if s.budget.lost_requests > 0 && matches!(last.op, Op::Acquire { .. }) {
                        out.push(Action::Drop { client: c, master });
                    }
                }
            }
        }
        for (mi, m) in s.masters.iter().enumerate() {
            let master = mi as u8;
            for (key, _) in m.store.keys() {
                out.push(Action::Expire { master, key });
            }
            if m.quarantine.is_some() {
                out.push(Action::EndQuarantine { master });
            } else if s.budget.restarts > 0 && trusted {
                out.push(Action::Restart { master });
            }
        }
    }

    fn next_state(&self, last: &State, action: Action) -> Option<State> {
        let mut s = *last;
        match action {
            Action::Start { client, propose } => {
                let c = usize::from(client);
                let proposal = match propose {
                    true => (s.high + 1).max(s.clock),
                    false => 0,
                };
                s.high = s.high.max(proposal);
                let request_id = self.0.clients[c].request_id;
                let cl = &mut s.clients[c];
                if !request_id {
                    cl.attempt = cl.attempts;
                }
                cl.attempts += 1;
                let gen = Self::next_round(&mut s, c);
                let cl = &mut s.clients[c];
                cl.phase = Phase::Acquiring {
                    gen,
                    proposal,
                    lapsed: false,
                };
                Self::send_all(&mut s, c, Op::Acquire { proposal }, true);
            }
            Action::Run {
                client,
                master,
                lose_reply,
            } => {
                if lose_reply {
                    s.budget.lost_replies -= 1;
                }
                self.run(&mut s, usize::from(client), usize::from(master), lose_reply);
            }
            Action::Drop { client, master } => {
                s.budget.lost_requests -= 1;
                s.masters[usize::from(master)].queues[usize::from(client)].pop();
            }
            Action::Timeout { client } => {
                let c = usize::from(client);
                for m in &mut s.masters {
                    if m.replies[c] == Reply::Waiting {
                        m.replies[c] = Reply::Failed;
                    }
                }
                self.decide(&mut s, c);
            }
            Action::Extend { client } | Action::Resume { client } => {
                let c = usize::from(client);
                let cl = &mut s.clients[c];
                cl.extends += 1;
                let gen = Self::next_round(&mut s, c);
                s.clients[c].phase = Phase::Extending {
                    gen,
                    lapsed: false,
                    resume: matches!(action, Action::Resume { .. }),
                };
                Self::send_all(&mut s, c, Op::Extend, true);
            }
            Action::Release { client } => {
                let c = usize::from(client);
                // `Recreations::cancel` first (none is due any more), then
                // release everywhere.
                self.release_everywhere(&mut s, c);
                let cl = &mut s.clients[c];
                cl.belief = None;
                cl.phase = Phase::Done;
            }
            Action::LoseAnswer { client } => {
                s.budget.lost_answers -= 1;
                let cl = &mut s.clients[usize::from(client)];
                cl.belief = None;
                cl.phase = Phase::Unaware;
            }
            Action::Expire { master, key } => {
                let stamp = s.masters[usize::from(master)].store.expire(key)?;
                self.expired(&mut s, stamp);
            }
            Action::Restart { master } => {
                s.budget.restarts -= 1;
                let m: &mut Master = &mut s.masters[usize::from(master)];
                let lost = m.store.stamps();
                m.store = Default::default();
                m.quarantine = Some(Quarantine { lost });
                // The connection dropped: commands not yet run are lost.
                for q in &mut m.queues {
                    q.clear();
                }
            }
            Action::EndQuarantine { master } => {
                let q = s.masters[usize::from(master)].quarantine.take()?;
                for &stamp in q.lost.as_slice() {
                    self.expired(&mut s, stamp);
                }
                // The clock has passed every fence granted so far (crate
                // doc, "Time").
                let granted = s.clients.iter().map(|c| c.best).max().unwrap_or(0);
                s.clock = s.clock.max(granted + 1);
            }
        }
        Some(s)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("exclusion", |m: &Redlock, s: &State| {
                let b: Vec<usize> = Self::believers(s).collect();
                b.iter()
                    .enumerate()
                    .all(|(i, &x)| b[i + 1..].iter().all(|&y| !m.kind(x).conflicts(m.kind(y))))
            }),
            Property::always("semaphore limit", |m: &Redlock, s: &State| {
                let permits: Vec<u8> = Self::believers(s)
                    .filter_map(|c| match m.kind(c) {
                        Kind::Permit { limit, .. } => Some(limit),
                        _ => None,
                    })
                    .collect();
                permits
                    .iter()
                    .all(|&limit| permits.len() <= usize::from(limit))
            }),
            Property::always("fence order", |_, s: &State| !s.ghost.fence_inversion),
            Property::sometimes("plain grant after a permit's", |_, s: &State| {
                s.ghost.plain_after_permit
            }),
            Property::sometimes("re-creation put a lost key back", |_, s: &State| {
                s.ghost.recreated
            }),
            Property::sometimes("grant after a quarantine ended", |_, s: &State| {
                s.ghost.rejoined
            }),
            Property::sometimes("one-round grant", |_, s: &State| s.ghost.one_round),
            Property::sometimes("request-id retry resumed its lock", |_, s: &State| {
                s.ghost.resumed
            }),
            Property::sometimes("two holders at once", |_, s: &State| {
                Self::believers(s).count() >= 2
            }),
        ]
    }
}

impl Redlock {
    /// A line for a counterexample's step: `action` taken in `s`.
    pub fn describe(&self, s: &State, action: &Action) -> String {
        let who = |c: u8| format!("c{c} ({:?})", self.kind(usize::from(c)));
        match *action {
            Action::Run {
                client,
                master,
                lose_reply,
            } => {
                let q = &s.masters[usize::from(master)].queues[usize::from(client)];
                let op = q.first().map_or("?".to_owned(), |r| {
                    format!("{:?} (round {})", r.op, r.round)
                });
                let lost = if lose_reply { ", answer lost" } else { "" };
                format!("m{master} runs {} of {}{lost}", op, who(client))
            }
            Action::Drop { client, master } => {
                format!("{}'s acquire to m{master} is lost", who(client))
            }
            Action::Start { client, propose } => {
                format!(
                    "{} starts an attempt{}",
                    who(client),
                    if propose { " (with a proposal)" } else { "" }
                )
            }
            Action::Timeout { client } => format!("{}'s round times out", who(client)),
            Action::Extend { client } => format!("{} sends an Extend", who(client)),
            Action::Release { client } => format!("{} releases", who(client)),
            Action::LoseAnswer { client } => format!("{}'s grant answer is lost", who(client)),
            Action::Resume { client } => format!("{} retries: resumes by Extend", who(client)),
            Action::Expire { master, key } => format!("m{master}: key {key:?} expires"),
            Action::Restart { master } => format!("m{master} restarts empty (quarantine)"),
            Action::EndQuarantine { master } => format!("m{master}'s quarantine ends"),
        }
    }

    /// Who believes they hold, with what fence, and each master's keys.
    pub fn summary(&self, s: &State) -> String {
        let mut out = String::new();
        for c in Self::believers(s) {
            let cl = &s.clients[c];
            out += &format!("c{c} ({:?}) holds with fence {}; ", self.kind(c), cl.fence);
        }
        for (i, m) in s.masters.iter().enumerate() {
            let st = &m.store;
            out += &format!(
                "m{i}: lock {:?} permits {:?} lim {:?} max {}; ",
                st.lock.map(|l| match l {
                    crate::store::LockVal::Token(t) => format!("c{}", t.token.client),
                    crate::store::LockVal::Shared => "shared".to_owned(),
                }),
                st.permits.map(|p| p.map(|p| p.token.client)),
                st.fence.lim,
                st.fence.max
            );
        }
        out
    }
}
