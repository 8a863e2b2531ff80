//! Keeping `run`'s lock: the `Hold` session's events move a validity
//! deadline (measured on the monotonic clock from when each event arrived);
//! when the session goes quiet or breaks, redlockctl re-attaches by calling
//! Extend with the token on a new connection; when that cannot be done in
//! time, the lock counts as lost a margin *before* the deadline, so the
//! command is stopped before anyone else can be granted the lock.
//!
//! Safety rests on the deadline alone: whatever happens to the connection,
//! [`Lease::watch`] returns no later than `deadline - stop_margin`.

use crate::client::{proto_duration, std_duration, Client, Target};
use crate::error::{code_name, describe, CtlError};
use crate::print::shell_word;
use redlockd_proto::pb;
use redlockd_proto::pb::hold_event::Event;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};
use tonic::{Code, Status, Streaming};

/// How long a release waits for the daemon's answer.
const RELEASE_WAIT: Duration = Duration::from_secs(2);
/// Pause between failed re-attach attempts.
const RETRY_PAUSE: Duration = Duration::from_millis(100);
/// How long after the session broke the first Extend waits: a daemon that
/// is alive releases a broken session's lock at once, and that release must
/// land before the Extend, or the Extend could succeed just before it and
/// leave redlockctl believing in a lock that is gone. A daemon that died
/// releases nothing, and the Extend re-attaches.
const SETTLE: Duration = Duration::from_millis(200);

/// Why the lock is gone, and how hard to stop the command.
#[derive(Debug)]
pub(crate) struct Lost {
    /// In words, for stderr.
    pub reason: String,
    /// The latest moment for SIGKILL: set when the lock may still be held
    /// but its validity is about to run out.
    pub kill_by: Option<Instant>,
    /// The daemon said the lock is gone: nothing is left to release.
    pub gone: bool,
}

/// How the release went.
pub(crate) enum Released {
    /// The daemon released it; whether it was still held.
    Done { was_held: bool },
    /// Nothing to release (the daemon said the lock was gone).
    Nothing,
    /// No answer: it expires with its ttl or when the daemon sees us gone.
    Failed(String),
}

struct Session {
    requests: mpsc::Sender<pb::HoldRequest>,
    events: Streaming<pb::HoldEvent>,
    /// The session's connection, kept open exactly as long as the session:
    /// closing it would make the daemon release the lock.
    _client: Client,
}

/// A held lock and what keeps it.
pub(crate) struct Lease {
    target: Target,
    /// The lock as granted (resource, token, fence).
    pub lock: pb::Lock,
    ttl: Duration,
    /// End of the last known validity.
    deadline: Instant,
    /// When `deadline` was last moved.
    heard: Instant,
    /// The Hold stream, until it ends.
    session: Option<Session>,
    /// redlockctl's own connection for Extend and Release (never the
    /// session's), opened when first needed.
    client: Option<Client>,
    /// The session went quiet or ended: redlockctl extends the lock itself.
    extending: bool,
    /// When to try Extend again after a failure.
    retry_at: Option<Instant>,
    /// The last failure, for the message if all attempts fail.
    last_error: Option<String>,
}

impl Lease {
    /// Opens a Hold session and waits until the lock is granted. Dropping
    /// the future cancels the session: the daemon leaves nothing locked.
    pub(crate) async fn open(
        target: &Target,
        acquire: pb::AcquireRequest,
    ) -> Result<Lease, CtlError> {
        let what = format!("run {}", shell_word(&acquire.resource));
        let ttl = std_duration(acquire.ttl);
        let mut client = target.connect().await?;
        let (requests, outgoing) = mpsc::channel(2);
        let first = pb::HoldRequest {
            request: Some(pb::hold_request::Request::Acquire(acquire)),
        };
        requests
            .send(first)
            .await
            .map_err(|_| CtlError::Local("the request queue closed".into()))?;
        let stream = tokio_stream::wrappers::ReceiverStream::new(outgoing);
        let mut events = client
            .hold(stream)
            .await
            .map_err(|status| CtlError::status(&what, status))?
            .into_inner();
        let lock = match events.message().await {
            Ok(Some(pb::HoldEvent {
                event: Some(Event::Acquired(lock)),
            })) => lock,
            Ok(Some(other)) => {
                return Err(CtlError::Protocol(format!(
                    "{what}: {other:?} before `acquired`"
                )))
            }
            Ok(None) => {
                return Err(CtlError::Protocol(format!(
                    "{what}: the session ended unanswered"
                )))
            }
            Err(status) => return Err(CtlError::status(&what, status)),
        };
        let heard = Instant::now();
        Ok(Lease {
            target: target.clone(),
            deadline: heard + std_duration(lock.validity),
            lock,
            ttl,
            heard,
            session: Some(Session {
                requests,
                events,
                _client: client,
            }),
            client: None,
            extending: false,
            retry_at: None,
            last_error: None,
        })
    }

    /// Keeps the lock until it is lost; returns why. Cancel-safe: call it
    /// again after being interrupted (by a signal, say).
    pub(crate) async fn watch(&mut self) -> Lost {
        loop {
            let stop_at = self.stop_at();
            if Instant::now() >= stop_at {
                return self.running_out();
            }
            // The daemon extends every third of the ttl: quiet for half of
            // it means an extension is overdue.
            let overdue = if self.extending { 3 } else { 2 };
            let act_at = self
                .retry_at
                .unwrap_or(self.heard + self.ttl / overdue)
                .min(stop_at);
            tokio::select! {
                event = next_event(&mut self.session) => {
                    if let Some(lost) = self.on_event(event) {
                        return lost;
                    }
                }
                () = sleep_until(act_at) => {
                    if Instant::now() >= stop_at {
                        return self.running_out();
                    }
                    if let Some(lost) = self.extend_ourselves(stop_at).await {
                        return lost;
                    }
                }
            }
        }
    }

    /// The moment the command must be told to stop if the deadline has not
    /// moved: a tenth of the ttl (50 ms to 2 s) before it.
    fn stop_at(&self) -> Instant {
        let margin = (self.ttl / 10).clamp(Duration::from_millis(50), Duration::from_secs(2));
        self.deadline.checked_sub(margin).unwrap_or(self.heard)
    }

    fn running_out(&self) -> Lost {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let why = self.last_error.as_deref().unwrap_or("no extension arrived");
        // SIGKILL comes no later than a quarter of the margin before the end.
        let margin = (self.ttl / 40).clamp(Duration::from_millis(12), Duration::from_millis(500));
        Lost {
            reason: format!(
                "could not keep the lock: {why}; its validity runs out in {} ms",
                left.as_millis()
            ),
            kill_by: Some(self.deadline.checked_sub(margin).unwrap_or(self.deadline)),
            gone: false,
        }
    }

    fn on_event(&mut self, event: Result<Option<pb::HoldEvent>, Status>) -> Option<Lost> {
        let gone = |reason: String| {
            Some(Lost {
                reason,
                kill_by: None,
                gone: true,
            })
        };
        match event {
            Ok(Some(pb::HoldEvent { event: Some(event) })) => match event {
                Event::Extended(lock) => {
                    if self.extending {
                        eprintln!("redlockctl: the session is extending the lock again");
                    }
                    self.refresh(&lock);
                    None
                }
                Event::Lost(lost) => {
                    self.session = None;
                    gone(format!("the daemon reports it lost: {}", lost.reason))
                }
                Event::Released(_) => {
                    self.session = None;
                    gone("the daemon released it (is it shutting down?)".into())
                }
                Event::Acquired(_) => None,
                // The daemon keeps extending until it releases at the end
                // of its grace (`released`, handled above).
                Event::Draining(_) => {
                    eprintln!("redlockctl: the daemon is draining (stopping)");
                    None
                }
            },
            Ok(Some(pb::HoldEvent { event: None })) => None,
            Ok(None) => self.session_broke("the daemon ended the session without a word".into()),
            Err(status) => self.session_broke(describe(&status)),
        }
    }

    fn session_broke(&mut self, why: String) -> Option<Lost> {
        self.session = None;
        eprintln!(
            "redlockctl: the Hold session on {} broke ({why}); re-attaching through Extend \
             ({} ms of validity left)",
            shell_word(&self.lock.resource),
            self.deadline
                .saturating_duration_since(Instant::now())
                .as_millis()
        );
        self.extending = true;
        self.client = None;
        self.retry_at = Some(Instant::now() + SETTLE);
        self.last_error = Some(format!("the session broke ({why})"));
        None
    }

    fn refresh(&mut self, lock: &pb::Lock) {
        self.heard = Instant::now();
        self.deadline = self.heard + std_duration(lock.validity);
        self.extending = false;
        self.retry_at = None;
        self.last_error = None;
    }

    /// One Extend on redlockctl's own connection, bounded by `stop_at`.
    async fn extend_ourselves(&mut self, stop_at: Instant) -> Option<Lost> {
        if !self.extending {
            eprintln!(
                "redlockctl: no extension from the daemon for {} ms; extending through Extend",
                self.heard.elapsed().as_millis()
            );
            self.extending = true;
        }
        // One attempt may not use up the whole budget: a connection that
        // hangs must leave time for another.
        let attempt = (self.ttl / 5).max(Duration::from_millis(250));
        let budget = stop_at
            .saturating_duration_since(Instant::now())
            .min(attempt);
        let recovering = self.last_error.is_some();
        match tokio::time::timeout(budget, self.extend_once(budget)).await {
            Ok(Ok(lock)) => {
                self.refresh(&lock);
                self.extending = true;
                if recovering {
                    eprintln!(
                        "redlockctl: re-attached: the lock on {} is extended ({} ms)",
                        shell_word(&self.lock.resource),
                        std_duration(lock.validity).as_millis()
                    );
                }
                None
            }
            Ok(Err(status)) if status.code() == Code::FailedPrecondition => Some(Lost {
                reason: format!("it is no longer held ({})", describe(&status)),
                kill_by: None,
                gone: true,
            }),
            Ok(Err(status)) => {
                self.failed(describe(&status));
                None
            }
            Err(_) => {
                self.failed(format!(
                    "Extend got no answer within {} ms",
                    budget.as_millis()
                ));
                None
            }
        }
    }

    fn failed(&mut self, why: String) {
        // A fresh connection next time: this one may be what is broken.
        self.client = None;
        self.retry_at = Some(Instant::now() + RETRY_PAUSE);
        self.last_error = Some(why);
    }

    async fn extend_once(&mut self, limit: Duration) -> Result<pb::Lock, Status> {
        let mut request = tonic::Request::new(pb::ExtendRequest {
            resource: self.lock.resource.clone(),
            token: self.lock.token.clone(),
            ttl: Some(proto_duration(self.ttl)),
        });
        request.set_timeout(limit);
        let client = self.client(limit).await?;
        let answer = client.extend(request).await?.into_inner();
        answer
            .lock
            .ok_or_else(|| Status::internal("Extend answered without a lock"))
    }

    async fn client(&mut self, limit: Duration) -> Result<&mut Client, Status> {
        if self.client.is_none() {
            let client = self
                .target
                .connect_quietly(limit)
                .await
                .map_err(Status::unavailable)?;
            self.client = Some(client);
        }
        self.client
            .as_mut()
            .ok_or_else(|| Status::internal("no connection"))
    }

    /// Releases the lock: through the session while it is healthy, else
    /// with a Release call; waits at most a couple of seconds.
    pub(crate) async fn release(mut self, gone: bool) -> Released {
        if gone {
            return Released::Nothing;
        }
        // Kept open until the end: dropping it would make the daemon release
        // the lock concurrently with the Release call below.
        let mut session = self.session.take();
        if let (Some(session), false) = (session.as_mut(), self.extending) {
            let message = pb::HoldRequest {
                request: Some(pb::hold_request::Request::Release(
                    pb::hold_request::Release {},
                )),
            };
            if session.requests.send(message).await.is_ok() {
                let answer = tokio::time::timeout(RELEASE_WAIT, released(&mut session.events));
                if let Ok(Some(was_held)) = answer.await {
                    return Released::Done { was_held };
                }
            }
        }
        let request = pb::ReleaseRequest {
            resource: self.lock.resource.clone(),
            token: self.lock.token.clone(),
        };
        let call = async {
            let client = self.client(RELEASE_WAIT).await?;
            client.release(request).await
        };
        match tokio::time::timeout(RELEASE_WAIT, call).await {
            Ok(Ok(answer)) => Released::Done {
                was_held: answer.into_inner().was_held,
            },
            Ok(Err(status)) => Released::Failed(describe(&status)),
            Err(_) => Released::Failed(format!(
                "{}: no answer within {RELEASE_WAIT:?}",
                code_name(Code::DeadlineExceeded)
            )),
        }
    }
}

/// The session's next event; never completes once there is no session.
async fn next_event(session: &mut Option<Session>) -> Result<Option<pb::HoldEvent>, Status> {
    match session {
        Some(session) => session.events.message().await,
        None => std::future::pending().await,
    }
}

/// Reads events up to `released`; None if the stream ends first.
async fn released(events: &mut Streaming<pb::HoldEvent>) -> Option<bool> {
    loop {
        match events.message().await {
            Ok(Some(pb::HoldEvent {
                event: Some(Event::Released(r)),
            })) => return Some(r.was_held),
            Ok(Some(pb::HoldEvent {
                event: Some(Event::Lost(_)),
            })) => return Some(false),
            Ok(Some(_)) => continue,
            Ok(None) | Err(_) => return None,
        }
    }
}
