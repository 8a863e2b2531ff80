//! One scenario's run: what each step kind of the suite's README does,
//! through the client's API only (its state is `state.rs`). A step kind
//! the suite adds is taught here (and to the other runners).

use crate::clients::Clients;
use crate::outcome::expect;
use crate::protocol::Harness;
use crate::spec::{Scenario, Step};
use crate::state::{Pending, State};
use redlockd_client::{Acquire, Client, Error, Lease, Lock};
use std::future::IntoFuture;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::{sleep, timeout, Instant};

/// How long a step that waits for an outcome may take unless `within_ms`
/// says otherwise.
const STEP_LIMIT: Duration = Duration::from_secs(30);
/// How often `wait_expired` and `await_draining` look again.
const POLL: Duration = Duration::from_millis(10);

/// What lasts across scenarios: the resource prefix, the clients, the
/// harness's answers.
pub(crate) struct Runner {
    pub(crate) prefix: String,
    pub(crate) clients: Clients,
    pub(crate) harness: Harness,
}

impl Runner {
    /// Runs the scenario's steps until one fails, then ends its leases
    /// and calls still under way either way.
    pub(crate) async fn run(&mut self, scenario: &Scenario) -> Result<(), String> {
        let mut state = State::default();
        let mut result = Ok(());
        for (index, step) in scenario.steps.iter().enumerate() {
            if let Err(why) = self.step(step, &mut state).await {
                result = Err(format!("step {index} ({}): {why}", step.op));
                break;
            }
        }
        state.close().await;
        result
    }

    /// One step: `Err` says what it observed instead of what it expected.
    async fn step(&mut self, step: &Step, st: &mut State) -> Result<(), String> {
        match step.op.as_str() {
            "acquire" => {
                let client = self.clients.get(&step.client)?;
                match self.acquire(&client, step).await {
                    // Granted after all (the race went the other way):
                    // released at once, so the step leaves nothing held.
                    Ok(lock) if step.may_succeed => release_at_once(&client, &lock).await,
                    result => st.keep_lock(step, expect(step, result)?),
                }
            }
            "acquire_async" => {
                let client = self.clients.get(&step.client)?;
                let task = tokio::spawn(self.acquire(&client, step).into_future());
                st.pending.insert(step.pending.clone(), Pending::Lock(task));
                Ok(())
            }
            "await" => {
                let Some(Pending::Lock(task)) = st.pending.remove(&step.pending) else {
                    return Err(format!("no pending acquire {:?}", step.pending));
                };
                let result = finish(task, within(step), "the pending call").await?;
                st.keep_lock(step, expect(step, result)?)
            }
            "extend" => {
                let client = self.clients.get(&step.client)?;
                let result = client
                    .extend(st.lock(&step.lock)?, millis(step.ttl_ms))
                    .await;
                st.keep_lock(step, expect(step, result)?)
            }
            "release" => {
                let client = self.clients.get(&step.client)?;
                let was_held = expect(step, client.release(st.lock(&step.lock)?).await)?;
                compare("was_held", step.was_held, was_held)
            }
            "validate" => {
                let client = self.clients.get(&step.client)?;
                let validation = expect(step, client.validate(st.lock(&step.lock)?).await)?;
                compare("held", step.held, validation.map(|v| v.held))
            }
            "wait_expired" => {
                let client = self.clients.get(&step.client)?;
                let lock = st.lock(&step.lock)?;
                let limit = within(step);
                let deadline = Instant::now() + limit;
                loop {
                    let validation = client.validate(lock).await;
                    match validation {
                        Ok(v) if !v.held => return Ok(()),
                        Ok(_) if Instant::now() >= deadline => {
                            return Err(format!("still held after {limit:?}"))
                        }
                        Ok(_) => sleep(POLL).await,
                        Err(error) => return Err(format!("validate: {error}")),
                    }
                }
            }
            "hold" => {
                let client = self.clients.get(&step.client)?;
                let result = self.hold(&client, step).await;
                st.keep_lease(step, expect(step, result)?)
            }
            "hold_async" => {
                let client = self.clients.get(&step.client)?;
                let task = tokio::spawn(self.hold(&client, step).into_future());
                st.pending
                    .insert(step.pending.clone(), Pending::Lease(task));
                Ok(())
            }
            "await_hold" => {
                let Some(Pending::Lease(task)) = st.pending.remove(&step.pending) else {
                    return Err(format!("no pending hold {:?}", step.pending));
                };
                let result = finish(task, within(step), "the pending session").await?;
                st.keep_lease(step, expect(step, result)?)
            }
            "check" => expect(step, st.lease(&step.lease)?.check()).map(drop),
            "release_lease" => {
                let lease = st
                    .leases
                    .remove(&step.lease)
                    .ok_or_else(|| format!("no lease {:?}", step.lease))?;
                let was_held = expect(step, lease.release().await)?;
                compare("was_held", step.was_held, was_held)
            }
            "await_lost" => {
                let limit = within(step);
                let lost = st.lease(&step.lease)?.lost();
                timeout(limit, lost)
                    .await
                    .map(drop)
                    .map_err(|_| format!("lost did not fire within {limit:?}"))
            }
            "await_draining" => {
                let lease = st.lease(&step.lease)?;
                let limit = within(step);
                let deadline = Instant::now() + limit;
                while !lease.is_draining() {
                    if Instant::now() >= deadline {
                        return Err(format!("not draining within {limit:?}"));
                    }
                    sleep(POLL).await;
                }
                Ok(())
            }
            "pause" => {
                sleep(millis(step.ms)).await;
                Ok(())
            }
            "fault" => self.harness.fault(&step.name).await,
            other => Err(format!("unknown op {other}")),
        }
    }

    /// The step's unary acquire, not yet sent.
    fn acquire(&self, client: &Client, step: &Step) -> Acquire<Lock> {
        options(
            client.acquire(self.resource(step), millis(step.ttl_ms)),
            step,
        )
    }

    /// The step's Hold session, not yet opened.
    fn hold(&self, client: &Client, step: &Step) -> Acquire<Lease> {
        options(client.hold(self.resource(step), millis(step.ttl_ms)), step)
    }

    /// The step's resource, `{prefix}` replaced.
    fn resource(&self, step: &Step) -> String {
        step.resource.replace("{prefix}", &self.prefix)
    }
}

/// The step's wait and deadline (the longest until granted: for a Hold it
/// does not bound the session, unlike a Go context).
fn options<T>(mut call: Acquire<T>, step: &Step) -> Acquire<T> {
    if let Some(wait) = step.wait_ms {
        call = call.wait(millis(wait));
    }
    if let Some(deadline) = step.deadline_ms {
        call = call.timeout(millis(deadline));
    }
    call
}

/// Releases a lock granted where the step allowed a failure; it must still
/// be held.
async fn release_at_once(client: &Client, lock: &Lock) -> Result<(), String> {
    match client.release(lock).await {
        Ok(true) => Ok(()),
        Ok(false) => Err("the lock granted was no longer held when released".into()),
        Err(error) => Err(format!("the release of the lock granted failed: {error}")),
    }
}

/// The outcome of a spawned call, within `limit` (else it is dropped).
async fn finish<T>(
    mut task: JoinHandle<Result<T, Error>>,
    limit: Duration,
    what: &str,
) -> Result<Result<T, Error>, String> {
    match timeout(limit, &mut task).await {
        Ok(Ok(result)) => Ok(result),
        Ok(Err(join)) => Err(format!("{what} ended abnormally: {join}")),
        Err(_) => {
            task.abort();
            Err(format!("{what} did not finish within {limit:?}"))
        }
    }
}

/// Compares an observed flag with the step's, when both are there.
fn compare(name: &str, expected: Option<bool>, got: Option<bool>) -> Result<(), String> {
    match (expected, got) {
        (Some(expected), Some(got)) if expected != got => {
            Err(format!("{name} {got}, expected {expected}"))
        }
        _ => Ok(()),
    }
}

/// The step's `within_ms`, or the default limit.
fn within(step: &Step) -> Duration {
    step.within_ms.map_or(STEP_LIMIT, millis)
}

fn millis(ms: u64) -> Duration {
    Duration::from_millis(ms)
}
