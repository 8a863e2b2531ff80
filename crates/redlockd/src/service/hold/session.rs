//! One `Hold` session's task: acquire, tell the client, keep the lock
//! extended until the client, an operator or the daemon ends it, then
//! release it (or leave it to expire) and say how it ended.

use super::registry::{SessionRegistry, Slot};
use super::{
    draining, heard_lately, next_end, ClientEnd, Leftovers, Outgoing, Wire, DRAIN_OVER,
    RELEASED_BY_OPERATOR, SETTLE,
};
use crate::conn::gate::ClientSocket;
use crate::metrics;
use crate::redlock::{validity, HoldEnd, Holder, Lock, LockError, Redlock, UNHEARD};
use crate::service::drain::{Drain, Phase};
use crate::service::quota::QuotaSlot;
use crate::service::rate::CallSlot;
use crate::service::request::AcquireArgs;
use std::sync::Arc;
use tokio::sync::mpsc;
use tonic::{Status, Streaming};

pub(super) struct Session<W: Wire> {
    pub(super) engine: Arc<Redlock>,
    pub(super) registry: SessionRegistry,
    pub(super) args: AcquireArgs,
    pub(super) incoming: Streaming<W::Request>,
    /// The connection the stream came on (`None` where the server does not
    /// say, as in-process tests: the client then counts as heard).
    pub(super) socket: Option<ClientSocket>,
    /// A client heard from within this before its stream broke ended it
    /// itself (half of `server.keepalive_timeout`; `Duration::MAX` under
    /// the counterfactual `release-silent-sessions`).
    pub(super) heard_within: std::time::Duration,
    /// The session's lock is extended only while its client was heard from
    /// within this (`Redlock::hold_while_heard`).
    pub(super) silent_at_most: std::time::Duration,
    pub(super) events: mpsc::Sender<Outgoing<W>>,
    pub(super) drain: Drain,
    pub(super) extend_at: f64,
    pub(super) _slot: Slot,
    /// The session's place under its identity's quota.
    pub(super) _quota: QuotaSlot,
    /// Its place among its identity's waiters until it has its lock.
    pub(super) waiting: Option<QuotaSlot>,
    /// The session counts as a call on its connection while it lives.
    pub(super) _call: CallSlot,
}

/// Counts a session in `redlock_sessions_active` while it lives.
struct ActiveSession;

impl ActiveSession {
    fn start() -> ActiveSession {
        metrics::session_delta(1.0);
        ActiveSession
    }
}

impl Drop for ActiveSession {
    fn drop(&mut self) {
        metrics::session_delta(-1.0);
    }
}

/// Counts a Campaign's leadership in the election metrics while it lasts.
struct Leading;

impl Leading {
    fn start(term: u64) -> Leading {
        metrics::leadership_began(term);
        Leading
    }
}

impl Drop for Leading {
    fn drop(&mut self) {
        metrics::leadership_ended();
    }
}

impl<W: Wire> Session<W> {
    pub(super) async fn run(mut self: Box<Self>) {
        let _active = ActiveSession::start();
        // Boxed, as are the engine calls and sends below: a session's task
        // is as large as its largest state for as long as it lives, and the
        // acquisition (rounds, retries) is far larger than holding.
        let Some(mut lock) = Box::pin(self.acquire()).await else {
            return;
        };
        // No longer waiting.
        self.waiting = None;
        // A leadership: counted, and its election's observers, on every
        // replica, re-read the leader at once (a leadership notice).
        let _leading = W::WAITS_UNTIL_GRANTED.then(|| {
            self.engine.announce_leadership(&lock.resource);
            Leading::start(lock.fence)
        });
        tracing::debug!(rpc = W::RPC, resource = %lock.resource, "session acquired");
        if Box::pin(self.send(W::acquired(lock.clone(), &self.args)))
            .await
            .is_err()
        {
            let _ = Box::pin(self.engine.release_held_now(&lock)).await;
            return;
        }
        let mut client_end = None;
        let mut forced = false;
        let registered = self.registry.register(&lock.token);
        let events = self.events.clone();
        let args = &self.args;
        let (socket, heard_within) = (&self.socket, self.heard_within);
        let client_heard = move || heard_lately(socket.as_ref(), heard_within);
        let delayed = !self.args.lock_delay.is_zero();
        let until = {
            let incoming = &mut self.incoming;
            let drain = &self.drain;
            let client_end = &mut client_end;
            let forced = &mut forced;
            let ending = &registered.ending;
            let events = &events;
            let client_heard = &client_heard;
            async move {
                let mut told = false;
                loop {
                    tokio::select! {
                        () = ending.notified() => {
                            *forced = true;
                            return;
                        }
                        end = next_end::<W>(incoming) => {
                            *client_end = Some(match end {
                                ClientEnd::Ended if delayed => {
                                    // Half-closed, or gone? A client gone has
                                    // its events stream dropped too.
                                    match tokio::time::timeout(SETTLE, events.closed()).await {
                                        Ok(()) => ClientEnd::Gone,
                                        Err(_) => ClientEnd::Done,
                                    }
                                }
                                // The stream's end (a half-close, or a reset
                                // read as one) came from a client heard a
                                // moment ago: its own act. A silent client's
                                // stream ends when the daemon closes its
                                // connection: it may still act on its lock.
                                ClientEnd::Ended if client_heard() => ClientEnd::Done,
                                ClientEnd::Ended => ClientEnd::Gone,
                                end => end,
                            });
                            return;
                        }
                        // The client dropped its end of the events, or
                        // its connection broke: it vanished, whichever of
                        // the two the daemon hears of first (the stream of
                        // its messages errs at about the same time).
                        () = events.closed() => {
                            *client_end = Some(ClientEnd::Gone);
                            return;
                        }
                        () = drain.stopping() => return,
                        () = drain.started(), if !told => {
                            told = true;
                            if let Phase::Draining { until } = drain.phase() {
                                let _ = events.try_send(draining::<W>(until));
                            }
                        }
                    }
                }
            }
        };
        // Boxed with `until` inside it: passed by value, an inline `until`
        // would be laid out twice in this task (the compiler does not
        // overlap a moved-from local with the future it moved into), and
        // the task lives as long as the session (10,000 sessions
        // opened at once under 100 MB).
        let silent_at_most = self.silent_at_most;
        let end = Box::pin(self.engine.hold_while_heard(
            &mut lock,
            self.args.ttl,
            self.extend_at,
            Box::pin(until),
            |lock| {
                let _ = events.try_send(Box::new(Ok(W::extended(lock.clone(), args))));
            },
            || heard_lately(socket.as_ref(), silent_at_most),
        ))
        .await;
        drop(registered);
        match end {
            HoldEnd::Stopped if forced => {
                // Released already, by the operator's ForceRelease.
                metrics::lock_lost();
                tracing::warn!(rpc = W::RPC, resource = %lock.resource, "session ended: released by an operator");
                let _ = Box::pin(self.send(W::lost(RELEASED_BY_OPERATOR.into()))).await;
            }
            HoldEnd::Stopped
                if matches!(client_end, Some(ClientEnd::Gone)) && !self.gone_for_good() =>
            {
                // Its connection ended without the client closing its
                // socket (the daemon closed it for an unanswered keepalive:
                // a frozen or cut-off client, which may still act on the
                // validity it was told), or the lock has a lock_delay (a
                // vanished holder's delay is what it is for). No longer
                // extended: it expires with the validity last told.
                tracing::debug!(rpc = W::RPC, resource = %lock.resource, "client vanished; lock left to expire");
                Box::pin(self.let_expire(&lock, Leftovers::Keep)).await;
            }
            HoldEnd::Stopped if client_end.is_none() => {
                // The drain's grace ran out (or a second signal came) with
                // the session open. Its client was told a validity by the
                // last `extended` (and by any Validate), and may not have
                // read `draining` (a paused process): deleting the keys now
                // would let the next holder in inside that validity. So the
                // lock is no longer extended and expires with its ttl, as
                // after a SIGKILL; the client is told it is gone.
                tracing::info!(rpc = W::RPC, resource = %lock.resource, "drain over: session's lock left to expire");
                let _ = Box::pin(self.send(W::lost(DRAIN_OVER.into()))).await;
            }
            HoldEnd::Stopped => Box::pin(self.release(&lock, client_end)).await,
            HoldEnd::Lost(reason) => {
                metrics::lock_lost();
                tracing::warn!(rpc = W::RPC, resource = %lock.resource, %reason, "session lost its lock");
                let _ = Box::pin(self.send(W::lost(reason))).await;
                // Whatever is left of it on the masters goes too, but not
                // before the keys of the last grant or extension expire on
                // their own (its deadline plus the drift allowance): `lost`
                // may reach the client late, and until then the last
                // validity it was given stands (an extension that failed
                // with a little validity left is declared lost early, to
                // warn in time). What goes then is any later extension's
                // key on a minority; the grant's lock_delay stays, as
                // after any lock that ran out: its holder never let go.
                Box::pin(self.let_expire(&lock, Leftovers::Delete)).await;
            }
            HoldEnd::Unheard => {
                // Extensions were held back while the client was silent,
                // and the validity it was last told ran out: it may still
                // act on its lock until then (a client library may even
                // keep it with Extend calls of its own while its session
                // is cut off), so nothing is deleted: it expires by itself.
                metrics::lock_lost();
                tracing::warn!(rpc = W::RPC, resource = %lock.resource, reason = UNHEARD, "session lost its lock");
                let _ = Box::pin(self.send(W::lost(UNHEARD.into()))).await;
                Box::pin(self.let_expire(&lock, Leftovers::Keep)).await;
            }
        }
        // A leadership over (released, or left to expire): observers on
        // every replica re-read now, not only those a release notice
        // reaches (the masters announce a release only to waiters).
        if W::WAITS_UNTIL_GRANTED {
            self.engine.announce_leadership(&lock.resource);
        }
    }

    /// Acquires, giving up if the client goes away or the daemon stops
    /// first (the detached acquisition then releases whatever it gets).
    async fn acquire(&mut self) -> Option<Lock> {
        let args = &self.args;
        let holder = Holder::session(&args.owner, self.engine.replica())
            .with_terms(args.lock_delay, args.hold_at_least)
            .with_limit(args.limit)
            .with_shared(args.shared);
        let engine = &self.engine;
        let acquisition = async move {
            loop {
                let attempt = match args.resources.is_empty() {
                    true => engine.acquire_detached_as(
                        args.resource.clone(),
                        args.request_id.as_ref(),
                        args.ttl,
                        args.wait,
                        holder.clone(),
                    ),
                    false => engine.acquire_detached_multi(
                        args.resources.clone(),
                        args.ttl,
                        args.wait,
                        holder.clone(),
                    ),
                };
                match attempt.await {
                    // A candidate stands until elected: its wait ran out
                    // with the leadership still held, it waits again.
                    Err(LockError::Contended(_) | LockError::StillHeld)
                        if W::WAITS_UNTIL_GRANTED => {}
                    outcome => return outcome,
                }
            }
        };
        let outcome = tokio::select! {
            result = acquisition => result.map_err(Status::from),
            () = self.events.closed() => return None,
            _ = next_end::<W>(&mut self.incoming) => return None,
            () = self.drain.started() => Err(Status::from(crate::service::drain::Draining)),
        };
        match outcome {
            Ok(lock) => Some(lock),
            Err(status) => {
                let _ = self.events.send(Box::new(Err(status))).await;
                None
            }
        }
    }

    /// Whether a client whose stream broke ended it itself, so that its
    /// lock may go at once: it was heard from lately ([`heard_lately`])
    /// and the lock has no lock_delay.
    fn gone_for_good(&self) -> bool {
        self.args.lock_delay.is_zero() && heard_lately(self.socket.as_ref(), self.heard_within)
    }

    /// Leaves `lock` to expire: waits until the validity last told has run
    /// out (its deadline plus the drift allowance, when its keys expire on
    /// the masters), then, with [`Leftovers::Delete`], deletes what is
    /// left of it, keeping its lock_delay (`Redlock::release_lapsed`).
    async fn let_expire(&self, lock: &Lock, leftovers: Leftovers) {
        let drift = validity::drift(self.args.ttl, self.engine.settings().drift_factor);
        Box::pin(tokio::time::sleep_until(lock.deadline.mono + drift)).await;
        if leftovers == Leftovers::Delete {
            let _ = Box::pin(self.engine.release_lapsed(lock)).await;
        }
    }

    /// Releases at once, then tells the client if its stream still exists.
    async fn release(&self, lock: &Lock, client_end: Option<ClientEnd>) {
        let was_held = self.engine.release_held(lock).await;
        tracing::debug!(rpc = W::RPC, resource = %lock.resource, ?was_held, "session released");
        match client_end {
            Some(ClientEnd::Invalid(why)) => {
                let _ = self.events.send(Box::new(Err(Status::from(why)))).await;
            }
            // Too few masters answered to tell: say so (UNAVAILABLE, as a
            // unary Release would), never a `was_held = false` that claims
            // the lock had been lost.
            _ => match was_held {
                Ok(was_held) => {
                    let _ = self.send(W::released(was_held)).await;
                }
                Err(error) => {
                    let _ = self.events.send(Box::new(Err(Status::from(error)))).await;
                }
            },
        }
    }

    async fn send(&self, event: W::Event) -> Result<(), ()> {
        self.events.send(Box::new(Ok(event))).await.map_err(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::Session;
    use crate::service::hold::{Campaign, Hold};
    use std::future::Future;

    /// The size of the future `call` returns, without calling it.
    fn future_size<A, F: Future>(_call: impl FnOnce(A) -> F) -> usize {
        std::mem::size_of::<F>()
    }

    /// A session's task lives as long as its lock, so 10,000 sessions are
    /// 10,000 of these (opened at once, under 100 MB). It was
    /// 1,816 bytes when `run` took the session by value: an `async fn`
    /// keeps its argument beside the local it moves into, and `Session`
    /// alone is over 500 bytes.
    #[test]
    fn a_sessions_task_stays_small() {
        for (kind, size) in [
            ("Hold", future_size(Session::<Hold>::run)),
            ("Campaign", future_size(Session::<Campaign>::run)),
        ] {
            println!("a {kind} session's task future: {size} bytes");
            assert!(
                size <= 512,
                "a {kind} session's task future is {size} bytes"
            );
        }
    }
}
