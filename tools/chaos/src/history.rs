//! What a run records, all on ONE monotonic clock: every grant with its
//! validity windows, every acquisition attempt, every fault, and the logs of
//! the two registers the critical sections update. The checkers read only
//! this; nothing here knows how it was produced.

use std::time::{Duration, Instant};
use tonic::Code;

/// A moment of the run: time since the run's [`Clock`] started.
pub(crate) type Time = Duration;

/// The run's one clock (`std::time::Instant`, i.e. CLOCK_MONOTONIC, the
/// clock the daemons measure validity on).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    /// When the run started.
    start: Instant,
}

impl Clock {
    /// A clock starting now.
    pub(crate) fn start() -> Clock {
        Clock {
            start: Instant::now(),
        }
    }

    /// The current moment.
    pub(crate) fn now(&self) -> Time {
        self.start.elapsed()
    }

    /// `at` as a tokio deadline, for `sleep_until`.
    pub(crate) fn deadline(&self, at: Time) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.start + at)
    }
}

/// Which workload a grant or attempt belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Workload {
    /// A few hot resources shared by many clients: exclusion is at stake.
    Contended,
    /// A fresh resource name per acquisition: measures availability.
    Uncontended,
}

/// An interval during which the daemon told its client the lock is held:
/// from the moment the answer was received (the client cannot act on the
/// lock before) until the reported validity runs out, counted from when the
/// request was SENT, as the contract asks of clients (`Lock.validity` in
/// lock.proto). The daemon's deadline is its operation's
/// start + ttl - drift, and the operation started no earlier than the send,
/// so `sent + validity` never outlasts it: a client starved between the
/// daemon's answer and its own reading of it gets a shorter (or empty)
/// window, never one past the real validity, so the checker cannot flag a
/// false overlap on a loaded machine. Counting from receipt would stretch
/// the window by the answer's whole delay. The window ends early when its
/// holder sends a Release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Window {
    /// The answer was received.
    pub start: Time,
    /// Sent + validity.
    pub end: Time,
}

impl Window {
    /// From a call sent at `sent`, answered at `received` with `validity`.
    pub(crate) fn of_call(sent: Time, received: Time, validity: Duration) -> Window {
        Window {
            start: received,
            end: sent + validity,
        }
    }

    /// Whether the window is empty.
    pub(crate) fn is_empty(&self) -> bool {
        self.end <= self.start
    }
}

/// How a Release ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReleaseRecord {
    /// The (first) Release request was sent: the holder gave the lock up.
    pub sent: Time,
    /// The (last) answer arrived.
    pub received: Time,
    /// `was_held`, or why there is none.
    pub outcome: Result<bool, Failure>,
    /// Calls made: a second one follows a failed first, whose deletes may
    /// have landed all the same (then `was_held = false` says nothing).
    pub calls: u8,
    /// How the first call failed, when a second followed.
    pub first_failure: Option<Failure>,
}

/// A call that did not succeed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The daemon (or the transport) answered with this status.
    Status(Code),
    /// No answer within the client's own timeout.
    TimedOut,
}

/// What kind of lock a grant is: which other grants of its resource it
/// excludes (`HISTORY.md`, "The properties"; [`Kind::conflicts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Kind {
    /// An exclusive lock of one resource (`mode` EXCLUSIVE, no `limit`).
    Plain,
    /// A read lock (`mode` SHARED).
    Shared,
    /// A semaphore permit of this limit (2 or more).
    Permit(u32),
    /// One resource of a lock on several (`resources`).
    Multi,
    /// An election's leadership (`crate::elections`): exclusive on its
    /// election's resource, as a plain lock is on its own.
    Leader,
}

impl Kind {
    /// Name in the history file.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::Shared => "shared",
            Kind::Permit(_) => "permit",
            Kind::Multi => "multi",
            Kind::Leader => "leader",
        }
    }

    /// Whether two grants of one resource with DIFFERENT tokens, of these
    /// kinds (and permit indexes), exclude each other.
    pub(crate) fn conflicts(self, permit: u32, other: Kind, other_permit: u32) -> bool {
        match (self, other) {
            (Kind::Plain | Kind::Multi | Kind::Leader, _)
            | (_, Kind::Plain | Kind::Multi | Kind::Leader) => true,
            (Kind::Shared, Kind::Shared) => false,
            (Kind::Shared, Kind::Permit(_)) | (Kind::Permit(_), Kind::Shared) => true,
            (Kind::Permit(a), Kind::Permit(b)) => a != b || permit == other_permit,
        }
    }
}

/// How a call reached the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Via {
    /// A unary Acquire.
    Unary,
    /// A Hold session's `acquire`.
    Hold,
    /// An election's `Campaign` session.
    Campaign,
}

/// How an Extend (or a session's extension event) ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ExtendOutcome {
    /// Extended, with this validity.
    Ok(Duration),
    /// The daemon said the lock is no longer held (`lost`,
    /// FAILED_PRECONDITION).
    Lost,
    /// Another status.
    Failed(Code),
    /// No answer in the client's own time.
    Unknown,
}

/// One Extend of a grant (unary, or a session's `extended`/`lost`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExtendRecord {
    /// Sent (for a session event: the earliest its round can have started).
    pub sent: Time,
    /// Answered.
    pub received: Time,
    /// How it ended.
    pub outcome: ExtendOutcome,
}

/// An Acquire (or a Hold's `acquire`) that was not granted: for the
/// history file and the figures.
#[derive(Debug, Clone)]
pub(crate) struct FailedCall {
    /// Unique in the run (shared with the grant ids).
    pub id: u64,
    /// The client task.
    pub client: u32,
    /// The replica it went to.
    pub replica: usize,
    /// Unary or Hold.
    pub via: Via,
    /// What it asked for.
    pub kind: Kind,
    /// Every resource asked, in order (one unless `Multi`).
    pub resources: Vec<String>,
    /// Its request id, if any.
    pub request_id: Option<String>,
    /// Sent.
    pub sent: Time,
    /// Answered or given up on.
    pub received: Time,
    /// The status, or no answer.
    pub failure: Failure,
    /// The status message (never a token: the daemon does not put one
    /// there).
    pub message: String,
}

impl FailedCall {
    /// Whether the outcome is unknown to the client (it may have been
    /// granted): no answer in its time, or a transport error (UNKNOWN,
    /// CANCELLED).
    pub(crate) fn unknown(&self) -> bool {
        matches!(
            self.failure,
            Failure::TimedOut | Failure::Status(Code::Unknown | Code::Cancelled)
        )
    }
}

/// One lock granted to a client.
#[derive(Debug, Clone)]
pub(crate) struct Grant {
    /// Unique in the run.
    pub id: u64,
    /// The id of its Acquire call: the grant's own id, except for the
    /// members of a lock on several resources, which share the first
    /// member's.
    pub call: u64,
    /// The resource locked.
    pub resource: String,
    /// Its kind.
    pub kind: Kind,
    /// Unary or Hold.
    pub via: Via,
    /// Its token (equal tokens are one lock: a retry with a request id).
    /// Never logged: only the history file carries it.
    pub token: String,
    /// Which permit, for `Kind::Permit`.
    pub permit: u32,
    /// The request id of the call, if any.
    pub request_id: Option<String>,
    /// Every Extend of it (the successful ones also in `windows`).
    pub extends: Vec<ExtendRecord>,
    /// Contended or uncontended.
    pub workload: Workload,
    /// The client task that held it.
    pub client: u32,
    /// The daemon replica that granted it.
    pub replica: usize,
    /// Its fencing token.
    pub fence: u64,
    /// The Acquire was sent.
    pub sent: Time,
    /// The grant was received.
    pub received: Time,
    /// The first window (Acquire), then one per successful Extend.
    pub windows: Vec<Window>,
    /// End of the continuous guarantee from `received` on (windows chained
    /// without a gap): the client writes only before it.
    pub valid_until: Time,
    /// A Kleppmann pause: the client slept past its validity inside the
    /// critical section (excluded from the critical-section overlap check,
    /// not from the window check).
    pub paused: bool,
    /// The critical section ended (before the Release was sent).
    pub cs_end: Time,
    /// The Release, if one was sent.
    pub release: Option<ReleaseRecord>,
    /// The `hold_at_least` it asked for (zero: none): a Release before
    /// the acquisition + this shortens the lock to end then instead of
    /// deleting it.
    pub hold_at_least: Duration,
    /// The earliest the lock can have been acquired: the send of the first
    /// call of its request id (a retry may take over what an earlier call
    /// acquired, and the masters count the hold from that acquisition),
    /// else `sent`.
    pub hold_from: Time,
    /// Asked with a `lock_delay` and never released, left to expire as a
    /// holder that vanished would be: the ttl and the delay it asked for
    /// (`crate::lock_delay` judges it).
    pub left_to_expire: Option<(Duration, Duration)>,
}

impl Grant {
    /// Records an Extend of it; a successful one adds its window (and
    /// lengthens the guarantee when it chains on).
    pub(crate) fn extended(&mut self, sent: Time, received: Time, outcome: ExtendOutcome) {
        self.extends.push(ExtendRecord {
            sent,
            received,
            outcome,
        });
        if let ExtendOutcome::Ok(validity) = outcome {
            let window = Window::of_call(sent, received, validity);
            if window.start < self.valid_until {
                self.valid_until = self.valid_until.max(window.end);
            }
            self.windows.push(window);
        }
    }

    /// Whether the critical section ran past the guarantee without being a
    /// deliberate pause (a starved client): excluded like a pause.
    pub(crate) fn overran(&self) -> bool {
        !self.paused && !self.stale_on_arrival() && self.cs_end > self.valid_until
    }

    /// Whether its validity, counted from the send, had run out by the time
    /// the answer arrived (a long wait, a starved client): the client knows
    /// it holds no guarantee, so it does not enter a critical section and
    /// releases at once, as a client following the contract does. Its
    /// window is empty; no critical section of it is checked.
    pub(crate) fn stale_on_arrival(&self) -> bool {
        self.valid_until <= self.received
    }
}

/// One acquisition attempt of the uncontended workload, granted or not.
#[derive(Debug, Clone)]
pub(crate) struct Attempt {
    /// The replica it was sent to.
    pub replica: usize,
    /// Sent.
    pub sent: Time,
    /// Answered (or given up on).
    pub received: Time,
    /// `Ok` when granted.
    pub outcome: Result<(), Failure>,
    /// The status message of a failure (the daemon says what it counted).
    pub message: Option<String>,
}

/// The kinds of fault the schedule injects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum FaultKind {
    /// SIGKILL a master, restart it empty on the same port.
    MasterRestart,
    /// SIGSTOP a master, SIGCONT it later.
    MasterPause,
    /// Delay every byte through the master's proxy beyond node_timeout.
    MasterSlow,
    /// The proxy forwards nothing, then resets the connections.
    MasterUnreachable,
    /// SIGKILL a daemon replica, start it again.
    ReplicaKill,
    /// SIGTERM a daemon replica (a draining stop while sessions hold
    /// locks), wait for it to exit, start it again.
    ReplicaDrain,
}

impl FaultKind {
    /// Every kind, in report order.
    pub(crate) const ALL: [FaultKind; 6] = [
        FaultKind::MasterRestart,
        FaultKind::MasterPause,
        FaultKind::MasterSlow,
        FaultKind::MasterUnreachable,
        FaultKind::ReplicaKill,
        FaultKind::ReplicaDrain,
    ];

    /// Name in the report.
    pub(crate) fn name(self) -> &'static str {
        match self {
            FaultKind::MasterRestart => "master_restart_empty",
            FaultKind::MasterPause => "master_sigstop",
            FaultKind::MasterSlow => "master_slow",
            FaultKind::MasterUnreachable => "master_unreachable",
            FaultKind::ReplicaKill => "replica_kill",
            FaultKind::ReplicaDrain => "replica_sigterm_drain",
        }
    }

    /// Whether it targets a master (else a daemon replica).
    pub(crate) fn on_master(self) -> bool {
        !matches!(self, FaultKind::ReplicaKill | FaultKind::ReplicaDrain)
    }
}

/// One injected fault, as it happened.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fault {
    /// What was done.
    pub kind: FaultKind,
    /// Master or replica index.
    pub target: usize,
    /// Injected.
    pub start: Time,
    /// Undone (the master or replica is back).
    pub end: Time,
    /// Until when the target counts as faulted: `end` plus the time to be
    /// fully used again (reconnection; after a restart, the quarantine).
    pub counts_until: Time,
    /// Part of the phase with three masters faulted.
    pub three_phase: bool,
}

/// One operation on the fenced register.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FencedOp {
    /// The grant whose holder made it.
    pub grant: u64,
    /// Check-in (first operation of a holder) or write.
    pub write: bool,
    /// The fence presented.
    pub fence: u64,
    /// When the register applied or refused it.
    pub at: Time,
    /// Applied.
    pub accepted: bool,
    /// The holder was still within its validity at that moment.
    pub within_validity: bool,
    /// For a write: the value it read at check-in (the write stores +1).
    pub read: u64,
}

/// One acknowledged write to the plain (unfenced) register.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PlainWrite {
    /// The grant whose holder made it.
    pub grant: u64,
    /// The value read at the start of the critical section (it wrote +1).
    pub read: u64,
}

/// What one contended resource's two registers saw.
#[derive(Debug, Clone, Default)]
pub(crate) struct RegisterLog {
    /// The resource.
    pub resource: String,
    /// Final value of the plain register.
    pub plain_final: u64,
    /// Its acknowledged writes.
    pub plain_writes: Vec<PlainWrite>,
    /// Final value of the fenced register.
    pub fenced_final: u64,
    /// Every fenced operation, in the order the register applied them.
    pub fenced_ops: Vec<FencedOp>,
}

/// The phases of the run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Phases {
    /// Faults start here.
    pub faults_from: Time,
    /// The phase with three masters faulted, if any.
    pub three: Option<(Time, Time)>,
    /// The rolling restart of a majority, one master after another, if any
    /// (`--mix`).
    pub rolling: Option<(Time, Time)>,
    /// The run ends.
    pub end: Time,
}

/// Everything recorded.
#[derive(Debug, Clone, Default)]
pub(crate) struct History {
    /// Every grant received.
    pub grants: Vec<Grant>,
    /// Every uncontended acquisition attempt.
    pub attempts: Vec<Attempt>,
    /// Contended Acquire calls that failed, by outcome.
    pub contended_failures: Vec<Failure>,
    /// Every Acquire that was not granted (the contended and mixed
    /// workloads', with what they asked).
    pub failed: Vec<FailedCall>,
    /// Every fault injected.
    pub faults: Vec<Fault>,
    /// One per contended resource.
    pub registers: Vec<RegisterLog>,
    /// The planned phases.
    pub phases: Phases,
    /// Sessions told `draining` by their replica (a SIGTERM fault).
    pub sessions_drained: usize,
}
