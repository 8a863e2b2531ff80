//! The engine over the configured masters: its settings and each master's,
//! from the configuration ([`engine_settings`], [`node_settings`]), and
//! [`build_engine`], which connects to the masters and hands back the
//! [`Engine`] with everything it holds open.

use super::ServeError;
use crate::config::{Config, RestartQuarantine};
use crate::redlock::keys::release_channel;
use crate::redlock::{AdmissionLimits, Master, Redlock, RetryPolicy, Settings};
use crate::valkey::auth::MasterAccess;
use crate::valkey::quarantine::Peers;
use crate::valkey::scripts::{BatchScript, Constants};
use crate::valkey::subscriber::Subscriptions;
use crate::valkey::{NodeSettings, ValkeyMaster};
use futures::future::join_all;
use std::sync::Arc;
use std::time::Duration;

/// How long start-up waits for the masters' first connections before
/// serving anyway (a master that is down is retried in the background).
const FIRST_CONNECT_WAIT: Duration = Duration::from_secs(2);

/// The engine's settings from the configuration.
pub(crate) fn engine_settings(config: &Config) -> Settings {
    let r = &config.redlock;
    Settings {
        key_prefix: r.key_prefix.clone(),
        node_timeout: r.node_timeout,
        drift_factor: r.drift_factor,
        retry: RetryPolicy {
            min: r.retry_delay_min,
            max: r.retry_delay_max,
        },
        fence_ttl: r.fence_ttl,
        wake_on_release: r.wake_on_release,
        wait_fallback: r.wait_fallback,
        max_waiters_per_resource: config.limits.max_waiters_per_resource,
        max_waiters: config.limits.max_waiters,
        admission: AdmissionLimits {
            max_in_flight: config.limits.max_acquisitions_in_flight,
            max_queued: config.limits.max_queued_acquisitions,
        },
    }
}

/// How each master is watched, from the configuration: the blanket
/// restart quarantine lasts the longest lock's ttl plus its drift
/// allowance; under the horizon quarantine (the default) the masters'
/// horizons shorten it (see `crate::valkey::horizon`).
pub(crate) fn node_settings(config: &Config) -> NodeSettings {
    let r = &config.redlock;
    let mode = r.quarantine;
    NodeSettings {
        node_timeout: r.node_timeout,
        quarantine: (mode != RestartQuarantine::Off)
            .then(|| r.max_ttl + crate::redlock::validity::drift(r.max_ttl, r.drift_factor)),
        horizon: mode == RestartQuarantine::Horizon,
        drift_factor: r.drift_factor,
        max_clock_offset: r.max_clock_offset,
    }
}

/// The engine and everything it holds open: master connections and, when
/// waiters are woken by releases, the release-notice subscriptions.
pub struct Engine {
    /// The engine itself.
    pub redlock: Arc<Redlock>,
    /// The master connections.
    pub nodes: Vec<Arc<ValkeyMaster>>,
    subscriptions: Option<Subscriptions>,
}

impl Engine {
    /// Closes every connection to the masters.
    pub async fn close(&self) {
        if let Some(subscriptions) = &self.subscriptions {
            subscriptions.close().await;
        }
        join_all(self.nodes.iter().map(|n| n.close())).await;
    }
}

/// Connects to the configured masters and builds the engine over them.
pub async fn build_engine(config: &Config) -> Result<Engine, ServeError> {
    let r = &config.redlock;
    // Horizons outlast each lock by the fences' clock allowance (see
    // `redlock::fence`): a master that lost its counters sits out until
    // the clock alone orders fences again.
    let allowance = crate::redlock::clock_allowance(r.node_timeout, r.max_clock_offset);
    let script = Arc::new(BatchScript::with(
        config.testing.counterfactuals,
        Constants::of(r),
    ));
    let access = MasterAccess::load(&config.masters)?;
    let peers = Peers::new(
        r.nodes.len(),
        &r.key_prefix,
        (r.max_ttl, allowance),
        r.drift_factor,
    );
    let nodes = r
        .nodes
        .iter()
        .map(|url| {
            ValkeyMaster::connect(url, node_settings(config), script.clone(), &access, &peers)
                .map(Arc::new)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let connected = join_all(nodes.iter().map(|n| n.wait_connected(FIRST_CONNECT_WAIT))).await;
    for (node, up) in nodes.iter().zip(connected) {
        if !up {
            tracing::warn!(
                node = node.name(),
                "master not reachable at start-up; retrying in the background"
            );
        }
    }
    // A master first seen young sits out until the other masters' horizons
    // are read (`node::quarantine`); on a new cluster that takes a round
    // trip or two and ends with no quarantine. Serve once it is settled, so
    // that the first call after start-up meets masters whose trust is
    // known, not UNAVAILABLE (bounded: a master that never answers is
    // settled in the background).
    let settled = async {
        while nodes.iter().any(|n| n.state().unsettled().is_some()) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    if tokio::time::timeout(FIRST_CONNECT_WAIT, settled)
        .await
        .is_err()
    {
        tracing::warn!("restart quarantines not settled at start-up; serving anyway");
    }
    let as_nodes = nodes
        .iter()
        .map(|n| Arc::clone(n) as Arc<dyn Master>)
        .collect();
    let redlock = Arc::new(Redlock::new(as_nodes, engine_settings(config))?);
    redlock.watch_for_suspend();
    let subscriptions = r.wake_on_release.then(|| {
        let engine = Arc::downgrade(&redlock);
        Subscriptions::start(
            &r.nodes,
            &access,
            &release_channel(&r.key_prefix),
            Arc::new(move |message: &str| {
                if let Some(engine) = engine.upgrade() {
                    engine.notice_received(message);
                }
            }),
        )
    });
    Ok(Engine {
        redlock,
        nodes,
        subscriptions,
    })
}
