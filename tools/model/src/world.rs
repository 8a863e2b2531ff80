//! The model's world: its configuration ([`World`]) and its state
//! ([`State`]): three masters, each with its keys, its queues of requests
//! from each client and its latest answer to each client's current round;
//! the clients' programs; the fault budgets and the ghost variables the
//! properties read.

use crate::scripts::{AcquireReply, Counterfactuals, ExtendReply, Kind};
use crate::small::Small;
use crate::store::{Stamp, Store};

/// Masters in the model.
pub const MASTERS: usize = 3;

/// The most clients a world has.
pub const MAX_CLIENTS: usize = 3;

/// The most commands queued from one client to one master.
const QUEUE: usize = 4;

/// A majority of [`MASTERS`] (`Quorum::majority(3)`).
pub const QUORUM: usize = MASTERS / 2 + 1;

/// One client: what it asks for and how much of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClientSpec {
    /// The kind of grant it asks for.
    pub kind: Kind,
    /// Acquisition attempts it may make (each failed one releases its
    /// token everywhere before the next).
    pub attempts: u8,
    /// Extend rounds it may send while holding (a resume counts as one).
    pub extends: u8,
    /// It acquires with a request id: one token for all its attempts, and
    /// a retry after a lost answer resumes by Extend (`Redlock::resume`).
    /// The daemon refuses request ids for semaphores and multi-resource
    /// locks, so only plain and shared clients have one.
    pub request_id: bool,
    /// It may send an Extend after its validity ran out (a caller of the
    /// unary Extend; a Hold session never does).
    pub extend_after_lapse: bool,
}

impl ClientSpec {
    /// One attempt, one extension, no request id.
    pub fn new(kind: Kind) -> ClientSpec {
        ClientSpec {
            kind,
            attempts: 1,
            extends: 1,
            request_id: false,
            extend_after_lapse: false,
        }
    }

    /// With `attempts` attempts.
    pub fn attempts(self, attempts: u8) -> ClientSpec {
        ClientSpec { attempts, ..self }
    }

    /// With `extends` extend rounds.
    pub fn extends(self, extends: u8) -> ClientSpec {
        ClientSpec { extends, ..self }
    }

    /// Extending also after its validity ran out.
    pub fn extend_after_lapse(self) -> ClientSpec {
        ClientSpec {
            extend_after_lapse: true,
            ..self
        }
    }

    /// With a request id.
    pub fn request_id(self) -> ClientSpec {
        ClientSpec {
            request_id: true,
            ..self
        }
    }
}

/// A bounded world to check exhaustively.
#[derive(Clone, Debug)]
pub struct World {
    /// A name for the test output.
    pub name: &'static str,
    /// The clients, in index order.
    pub clients: Vec<ClientSpec>,
    /// Faults the world may inject, each at most this often.
    pub faults: Budget,
    /// A command may run later than a ttl after its round started (else
    /// it runs within that time or never: crate doc, "Late commands").
    pub late_commands: bool,
    /// Plain attempts may carry a one-round fence proposal.
    pub proposals: bool,
    /// Record the reachability flags of [`Ghost`] (but the fence
    /// inversion, always recorded). Each splits the states after its
    /// event in two, so the exhaustive runs leave them off and separate
    /// runs, stopped at the first sighting, look for them.
    pub witnesses: bool,
    /// The defects' switches (all off: the fixed scripts).
    pub cf: Counterfactuals,
}

/// How many faults of each kind are left.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Budget {
    /// Masters restarted empty (one at a time: another restart waits for
    /// the quarantine to end).
    pub restarts: u8,
    /// Requests lost before they ran (a connection that dropped: the
    /// master never saw the command).
    pub lost_requests: u8,
    /// Replies lost after their script ran (the effect landed, the answer
    /// never came: the round counts the master as failed, or, if already
    /// decided, never hears of it).
    pub lost_replies: u8,
    /// Grants whose answer the caller never received (a request-id client
    /// then resumes by Extend).
    pub lost_answers: u8,
}

/// A command in a master's queue for one client: per client and master, a
/// FIFO, as a master connection sends commands in submission order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Request {
    /// What to run.
    pub op: Op,
    /// The client's round it belongs to (its answer counts only there).
    pub round: u8,
    /// The token's attempt number (see [`crate::store::Token`]).
    pub attempt: u8,
}

/// The script a request runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// The kind's acquire script, with a one-round proposal (0: none).
    Acquire {
        /// The proposed fence.
        proposal: u8,
    },
    /// COMMIT_FENCE / COMMIT_SHARED.
    Commit {
        /// The fence to commit.
        fence: u8,
    },
    /// EXTEND / EXTEND_SHARED.
    Extend,
    /// RECREATE / RECREATE_SHARED, for the extension of round `gen`.
    Recreate {
        /// The extension's round (the re-created key's expiry counts from
        /// after its start).
        gen: u8,
    },
    /// RELEASE / RELEASE_SHARED.
    #[default]
    Release,
}

/// A master's answer to a client's current round, as the round counts it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reply {
    /// No round of this client is waiting on this master.
    #[default]
    Idle,
    /// Sent, no answer yet.
    Waiting,
    /// An acquire's answer.
    Acquire(AcquireReply),
    /// A commit's answer.
    Commit(bool),
    /// An extend's answer.
    Extend(ExtendReply),
    /// Counted as failed: lost, or from a master in quarantine.
    Failed,
}

impl Reply {
    /// Whether the round counts it as a yes.
    pub fn yes(self) -> bool {
        matches!(
            self,
            Reply::Acquire(AcquireReply::Granted { .. })
                | Reply::Commit(true)
                | Reply::Extend(ExtendReply::Extended { .. })
        )
    }

    /// Whether the round counts it as a no (a refusal, not a failure).
    pub fn no(self) -> bool {
        matches!(
            self,
            Reply::Acquire(AcquireReply::Refused | AcquireReply::Conflict)
                | Reply::Commit(false)
                | Reply::Extend(ExtendReply::NotHeld | ExtendReply::Missing)
        )
    }
}

/// A restarted master's quarantine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Quarantine {
    /// The keys the restart lost: the quarantine ends only once each of
    /// them would have expired.
    pub lost: Small<Stamp, 8>,
}

/// One master: its keys and what is in flight between it and each client.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Master {
    /// Its keys.
    pub store: Store,
    /// Restarted and not voting yet.
    pub quarantine: Option<Quarantine>,
    /// Per client: its commands not yet run here, oldest first.
    pub queues: [Small<Request, QUEUE>; MAX_CLIENTS],
    /// Per client: this master's answer to the client's current round.
    pub replies: [Reply; MAX_CLIENTS],
}

/// Where a client's program is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// May start an attempt.
    Idle,
    /// Its acquire round (started as round `gen`) is out.
    Acquiring {
        /// The round; the attempt's validity counts from its start.
        gen: u8,
        /// The one-round proposal (0: none).
        proposal: u8,
        /// A key of this attempt expired: its validity is gone.
        lapsed: bool,
    },
    /// Its commit round is out.
    Committing {
        /// The acquire round the validity counts from.
        gen: u8,
        /// The fence being committed.
        fence: u8,
        /// A key of this attempt expired: its validity is gone.
        lapsed: bool,
    },
    /// Granted (believes it holds while `Client::belief` is set).
    Holding {
        /// Granted just now and not yet answered (a lost answer can
        /// only happen here).
        fresh: bool,
    },
    /// An Extend round (started as round `gen`) is out.
    Extending {
        /// The round; the new validity counts from its start.
        gen: u8,
        /// A key it extended expired: its validity is gone.
        lapsed: bool,
        /// A request-id retry resuming its lock (else a holder's Extend).
        resume: bool,
    },
    /// Granted, but the answer was lost: the caller does not know.
    Unaware,
    /// Finished.
    Done,
}

/// One client (a caller and the daemon replica serving it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Client {
    /// The current token's attempt number.
    pub attempt: u8,
    /// Attempts made.
    pub attempts: u8,
    /// Extend rounds made.
    pub extends: u8,
    /// Its current (or latest) round's number (see [`State::epoch`]).
    pub round: u8,
    /// Where its program is.
    pub phase: Phase,
    /// It believes it holds, on the validity of round `belief`.
    pub belief: Option<u8>,
    /// Its grant's fence.
    pub fence: u8,
    /// Ghost: the largest fence it was ever granted (0: none).
    pub best: u8,
    /// The latest extension that reached a quorum (its stragglers that
    /// find the key missing are re-created too).
    pub extended: Option<u8>,
}

/// What the properties read besides the clients' beliefs: sticky flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ghost {
    /// A grant's fence was not above an earlier conflicting grant's.
    pub fence_inversion: bool,
    /// A plain grant came after a permit's grant.
    pub plain_after_permit: bool,
    /// A re-creation put a lost key back.
    pub recreated: bool,
    /// A grant came after a restarted master's quarantine ended.
    pub rejoined: bool,
    /// A plain grant took one round (its proposal).
    pub one_round: bool,
    /// A request-id retry got its lock back by Extend.
    pub resumed: bool,
}

/// The whole state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct State {
    /// The masters.
    pub masters: [Master; MASTERS],
    /// The clients.
    pub clients: [Client; MAX_CLIENTS],
    /// The number of the latest round started, by any client.
    pub epoch: u8,
    /// Time has passed the start of round `now` plus the ttl (the latest
    /// round with a key known to have expired).
    pub now: u8,
    /// The masters' clock, in fence units (only a quarantine's end moves it).
    pub clock: u8,
    /// The largest fence proposed or picked so far (the proposer proposes
    /// above it: about the clock plus a lead, above every earlier proposal).
    pub high: u8,
    /// Faults left.
    pub budget: Budget,
    /// Sticky flags.
    pub ghost: Ghost,
}

impl State {
    /// The first state of `world`: empty masters, idle clients.
    pub fn initial(world: &World) -> State {
        assert!(
            world.clients.len() <= MAX_CLIENTS,
            "at most {MAX_CLIENTS} clients"
        );
        let master = Master {
            store: Store::default(),
            quarantine: None,
            queues: Default::default(),
            replies: Default::default(),
        };
        let client = Client {
            attempt: 0,
            attempts: 0,
            extends: 0,
            round: 0,
            phase: Phase::Idle,
            belief: None,
            fence: 0,
            best: 0,
            extended: None,
        };
        State {
            masters: [master; MASTERS],
            clients: [client; MAX_CLIENTS],
            epoch: 0,
            now: 0,
            clock: 0,
            high: 0,
            budget: world.faults,
            ghost: Ghost::default(),
        }
    }

    /// The same state with the masters in a canonical order: masters are
    /// interchangeable (the quorum rule counts them, never names them), so
    /// states that differ only by their order behave alike. Used as the
    /// checker's symmetry reduction.
    pub fn representative(&self) -> State {
        let mut s = *self;
        s.masters.sort_unstable();
        s.renumber();
        s
    }

    /// Renumbers the rounds 1, 2, 3, .. in their order, keeping 0 (none):
    /// only their order matters (which started first, which keys outlive
    /// which beliefs), and new rounds are numbered above all of them.
    fn renumber(&mut self) {
        let mut seen = [false; 256];
        self.visit_rounds(|r| seen[usize::from(*r)] = true);
        let mut rank = [0u8; 256];
        let mut next = 0u8;
        for (r, &present) in seen.iter().enumerate().skip(1) {
            if present {
                next += 1;
                rank[r] = next;
            }
        }
        self.visit_rounds(|r| *r = rank[usize::from(*r)]);
    }

    /// Calls `f` on every round number in the state.
    fn visit_rounds(&mut self, mut f: impl FnMut(&mut u8)) {
        f(&mut self.epoch);
        f(&mut self.now);
        for m in &mut self.masters {
            let st = &mut m.store;
            if let Some(crate::store::LockVal::Token(t)) = &mut st.lock {
                f(&mut t.gen);
            }
            for p in st.permits.iter_mut().flatten() {
                f(&mut p.gen);
            }
            for r in st.readers.as_mut_slice() {
                f(&mut r.gen);
            }
            if let Some(q) = &mut m.quarantine {
                for l in q.lost.as_mut_slice() {
                    f(&mut l.gen);
                }
            }
            for q in &mut m.queues {
                for r in q.as_mut_slice() {
                    f(&mut r.round);
                    if let Op::Recreate { gen } = &mut r.op {
                        f(gen);
                    }
                }
            }
        }
        for c in &mut self.clients {
            f(&mut c.round);
            if let Some(b) = &mut c.belief {
                f(b);
            }
            if let Some(e) = &mut c.extended {
                f(e);
            }
            match &mut c.phase {
                Phase::Acquiring { gen, .. }
                | Phase::Committing { gen, .. }
                | Phase::Extending { gen, .. } => f(gen),
                _ => {}
            }
        }
    }
}
