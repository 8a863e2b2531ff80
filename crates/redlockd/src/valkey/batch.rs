//! Coalescing of commands to one master: every operation waiting for the
//! master when its batcher wakes up, and what the tasks ready then submit
//! before it runs again (one yield, no timer), goes out as one script call
//! ([`super::scripts::batch_script`]).
//!
//! Why: a library sends each caller's commands separately, so the master
//! parses, schedules and answers each one, and both sides pay a system call
//! and a wake-up per command. The daemon sees many callers at once; with 64
//! callers, one EVAL per master carries dozens of acquisitions, and the
//! per-command costs are paid once per batch. At one caller a batch holds
//! one operation and costs what a single script call costs.
//!
//! Ordering: operations are queued in the order they were submitted and
//! batches are handed to the connection in queue order, so an operation
//! submitted after another (a cleanup release after its SET) reaches the
//! master after it. Submission is synchronous ([`Batcher::submit`]).
//!
//! The script travels by hash (EVALSHA) once it was sent in full on the
//! current connection. A NOSCRIPT answer (the master lost its script cache)
//! fails that batch's operations rather than retrying them, since a retry
//! could reach the master after a later batch; the next batch carries the
//! text again.
//!
//! Flow: at most [`MAX_IN_FLIGHT`] batches per master are out at once, each
//! of at most [`MAX_BATCH`] operations. Operations submitted meanwhile wait
//! in the daemon's queue and go out together once a batch is answered. A
//! command's `node_timeout` (fred's per-command timeout) starts when its
//! batch is handed to fred, which writes it to the master at once: time
//! spent in this queue is the daemon's, and is never blamed on the master.
//! The engine's rounds allow for it (`Master::bounds_own_commands`).
//!
//! Dropping the future of a submitted operation does not withdraw it: it is
//! sent anyway and its reply dropped, which is what the engine wants of a
//! straggler.

mod encode;
mod timer;

use super::quarantine::Peers;
use super::scripts::{header, BatchScript, Op, ERROR_MARKER};
use super::state::NodeState;
use crate::metrics;
use crate::redlock::NodeError;
use encode::{encode, packable};
use fred::clients::WithOptions;
use fred::prelude::{Client, ClientLike, Value};
use fred::types::{ClusterHash, CustomCommand};
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use std::sync::Arc;
use std::time::{Duration, Instant};
use timer::{bounded, Watch};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant as TokioInstant;

/// Most operations in one script call: a batch runs atomically on the
/// master, so a bound keeps any one call short (about 2 µs per operation).
pub(crate) const MAX_BATCH: usize = 128;

/// Most batches out at one master at once. Four keep a local master busy
/// (a batch is written while the previous ones are executed and answered)
/// while a slow or hung master holds at most `4 × MAX_BATCH` operations on
/// the wire; the rest wait in the queue, where their `node_timeout` has not
/// started, and coalesce into full batches.
pub(crate) const MAX_IN_FLIGHT: usize = 4;

pub(crate) use encode::PACK_FROM;

/// One operation waiting for its batch.
struct Queued {
    /// See [`header`].
    header: i64,
    keys: Vec<Value>,
    /// Strings, bytes or integers only ([`packable`]).
    args: Vec<Value>,
    awaiting: Awaiting,
}

/// What is kept of an operation once sent: where its reply goes, and what
/// its metrics need.
struct Awaiting {
    op: Op,
    submitted: Instant,
    reply: oneshot::Sender<Result<Value, NodeError>>,
}

impl Awaiting {
    /// Records the operation's metrics and hands it its reply.
    fn answer(self, node: &metrics::NodeCommands, reply: Result<Value, NodeError>) {
        node.record(self.op as usize, self.op.label(), self.submitted.elapsed());
        if let Err(error) = &reply {
            metrics::node_error(node.node(), error.kind());
        }
        if matches!(self.op, Op::Acquire | Op::AcquireAll) {
            metrics::acquire_vote(match &reply {
                Ok(Value::Array(fields)) if fields.first() == Some(&Value::Integer(1)) => "granted",
                Ok(_) => "refused",
                Err(NodeError::Timeout) => "timeout",
                Err(_) => "error",
            });
        }
        let _ = self.reply.send(reply);
    }
}

/// The queue of one master's operations; its task sends them in batches.
pub(crate) struct Batcher {
    queue: mpsc::UnboundedSender<Queued>,
}

impl Batcher {
    /// Starts the batching task for one master's connection. It ends when
    /// the batcher is dropped. `command` must time its commands out after
    /// [`backstop`](super::pace::backstop): this task bounds them by `node_timeout` itself, with
    /// more time only while the daemon runs late or the master is busy (see
    /// `super::pace`).
    pub(crate) fn start(
        name: Arc<str>,
        command: WithOptions<Client>,
        node_timeout: Duration,
        state: Arc<NodeState>,
        script: Arc<BatchScript>,
        horizon_key: Value,
        peers: Arc<Peers>,
    ) -> Self {
        let (queue, queued) = mpsc::unbounded_channel();
        let link = Link {
            command,
            node_timeout,
            state,
            script,
            horizon_key,
            peers,
        };
        let node = Arc::new(metrics::NodeCommands::new(name, Op::ALL.len() + 1));
        tokio::spawn(run(node, queued, link));
        Batcher { queue }
    }

    /// Queues `op` and returns its reply, to come. The operation's place in
    /// the master's order is fixed when this returns.
    pub(crate) fn submit(
        &self,
        op: Op,
        keys: Vec<Value>,
        args: Vec<Value>,
    ) -> impl std::future::Future<Output = Result<Value, NodeError>> + Send + 'static {
        let (reply, answer) = oneshot::channel();
        let header = header(op, keys.len(), args.len())
            .ok_or_else(|| NodeError::Protocol(format!("{op:?} with {} keys", keys.len())))
            .and_then(|header| match args.iter().find(|arg| !packable(arg)) {
                Some(arg) => Err(NodeError::Protocol(format!(
                    "a {:?} as a script argument",
                    arg.kind()
                ))),
                None => Ok(header),
            });
        let header = match header {
            Ok(header) => header,
            Err(error) => return futures::future::Either::Left(std::future::ready(Err(error))),
        };
        let queued = self.queue.send(Queued {
            header,
            keys,
            args,
            awaiting: Awaiting {
                op,
                submitted: Instant::now(),
                reply,
            },
        });
        futures::future::Either::Right(async move {
            if queued.is_err() {
                return Err(NodeError::Unavailable("connection closed".into()));
            }
            answer
                .await
                .unwrap_or_else(|_| Err(NodeError::Unavailable("batch dropped".into())))
        })
    }
}

/// What the batching task sends with.
struct Link {
    command: WithOptions<Client>,
    node_timeout: Duration,
    state: Arc<NodeState>,
    script: Arc<BatchScript>,
    horizon_key: Value,
    peers: Arc<Peers>,
}

async fn run(
    name: Arc<metrics::NodeCommands>,
    mut queued: mpsc::UnboundedReceiver<Queued>,
    link: Link,
) {
    let Link {
        command,
        node_timeout,
        state,
        script,
        horizon_key,
        peers,
    } = link;
    let mut batch: Vec<Queued> = Vec::with_capacity(MAX_BATCH);
    // The batches written and not yet answered, polled by this task rather
    // than each on a task of its own: a spawn per batch (per master, per
    // round at one caller) cost a task allocation and a cross-thread wake-up
    // on every reply. What each one does on its answer is the
    // same: deliver the replies, then free its slot (leave this set).
    let mut in_flight: FuturesUnordered<BoxFuture<'static, ()>> = FuturesUnordered::new();
    loop {
        let first = tokio::select! {
            // Answers first: a slot they free lets the queue move.
            biased;
            Some(()) = in_flight.next(), if !in_flight.is_empty() => continue,
            // Collect only with a slot free: what queues up while every
            // slot is taken goes out together in the next batch.
            first = queued.recv(), if in_flight.len() < MAX_IN_FLIGHT => match first {
                Some(first) => first,
                None => break,
            },
        };
        batch.push(first);
        // Let the tasks ready now (a round's other callers, gRPC handlers)
        // submit theirs into this batch rather than the next; alone, the
        // batch goes out after one scheduler pass (docs/benchmarks.md).
        tokio::task::yield_now().await;
        // Whatever queued up while the previous batch was being sent.
        while batch.len() < MAX_BATCH {
            match queued.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        if state.is_down() {
            tracing::debug!(
                node = name.node(),
                ops = batch.len(),
                "batch failed: connection down"
            );
            for queued in batch.drain(..) {
                let down = NodeError::Unavailable("connection lost; reconnecting".into());
                queued.awaiting.answer(&name, Err(down));
            }
            continue;
        }
        let (eval, script) = match state.script_must_be_sent() {
            true => ("EVAL", script.lua.clone()),
            false => ("EVALSHA", script.sha.clone()),
        };
        let (args, replies) = encode(script, &horizon_key, &mut batch);
        let cmd = CustomCommand::new_static(eval, ClusterHash::FirstKey, false);
        let (client, sent_on) = (command.clone(), Arc::clone(&state));
        let mut call = Box::pin(async move {
            let reply = client.custom::<Value, Value>(cmd, args).await;
            if reply.is_err() {
                // NOSCRIPT, or the batch may not have reached the master:
                // the next batch carries the text. Not retried: a retry
                // could reach the master after later batches.
                sent_on.script_lost();
            }
            reply
        });
        // The connection current now, before fred is handed the command:
        // it goes out on this one or a later one (`super::connection`).
        let sent_on = state.connection();
        // fred queues the command on the connection at the first poll; do it
        // here, before the next batch, to keep the order.
        // The batch keeps its slot until it is answered or timed out.
        let sent = TokioInstant::now();
        match futures::poll!(call.as_mut()) {
            std::task::Poll::Ready(result) => deliver(&name, &state, sent_on, result, replies),
            std::task::Poll::Pending => {
                let (name, state) = (Arc::clone(&name), Arc::clone(&state));
                let peers = Arc::clone(&peers);
                in_flight.push(Box::pin(async move {
                    let watch = Watch {
                        name: name.node(),
                        state: &state,
                        peers: &peers,
                        pace: peers.pace(),
                        node_timeout,
                    };
                    let result = bounded(&watch, call, sent).await;
                    if result.is_ok() {
                        peers.pace().answered(sent.elapsed(), node_timeout);
                    }
                    if result.is_err() {
                        // As for fred's own errors (above): the next batch
                        // carries the script's text.
                        state.script_lost();
                    }
                    deliver(&name, &state, sent_on, result, replies);
                }));
            }
        }
    }
    // The batcher was dropped: the batches still out get their answers
    // (or time out) as before, then the task ends.
    while in_flight.next().await.is_some() {}
}

/// Hands each operation its part of the batch's reply, and records that
/// the master answered (an error reply is an answer too; a timeout or a
/// lost connection is not). A reply counts only if it came on the verified
/// connection `sent_on` (see [`unverified`]); otherwise every operation
/// gets an error, which the engine counts as a failed vote.
fn deliver(
    node: &metrics::NodeCommands,
    state: &NodeState,
    sent_on: u64,
    result: Result<Value, fred::error::Error>,
    replies: Vec<Awaiting>,
) {
    let answered = match &result {
        Ok(_) => true,
        Err(error) => matches!(super::wire::node_error(error.clone()), NodeError::Server(_)),
    };
    if answered {
        state.answered();
    }
    let result = match result {
        Ok(_) if unverified(state, sent_on) => {
            tracing::debug!(
                node = node.node(),
                ops = replies.len(),
                sent_on,
                "batch reply on an unverified connection"
            );
            let error = NodeError::Unavailable(
                "the reply came on a connection whose master was not verified (INFO) yet".into(),
            );
            for reply in replies {
                reply.answer(node, Err(error.clone()));
            }
            return;
        }
        other => other,
    };
    match result {
        Ok(Value::Array(items)) if items.len() == replies.len() => {
            for (item, reply) in items.into_iter().zip(replies) {
                reply.answer(node, unwrap_item(item));
            }
        }
        Ok(other) => {
            let error = NodeError::Protocol(format!(
                "batch of {}: unexpected reply {other:?}",
                replies.len()
            ));
            for reply in replies {
                reply.answer(node, Err(error.clone()));
            }
        }
        Err(error) => {
            let error = super::wire::node_error(error);
            tracing::debug!(node = node.node(), ops = replies.len(), %error, "batch failed");
            for reply in replies {
                reply.answer(node, Err(error.clone()));
            }
        }
    }
}

/// Whether a reply to a batch queued while connection `sent_on` was current
/// may have come from a server whose `INFO` was not read on that
/// connection: another connection was opened since (the batch may have
/// gone out on it, to a restarted master), or `sent_on` itself was not
/// verified yet.
fn unverified(state: &NodeState, sent_on: u64) -> bool {
    !state.verified_on_connection(sent_on)
}

/// One operation's reply, or the error it raised on the master.
fn unwrap_item(item: Value) -> Result<Value, NodeError> {
    if let Value::Array(fields) = &item {
        if let [marker, message] = fields.as_slice() {
            if marker.as_str().as_deref() == Some(ERROR_MARKER) {
                let message = message.as_string().unwrap_or_default();
                return Err(NodeError::Server(message));
            }
        }
    }
    Ok(item)
}
