//! Listening for release notices on every master (see
//! `crate::redlock::notices`): one pub/sub connection per master, resubscribed
//! after every reconnection.

use super::auth::MasterAccess;
use super::node_name;
use fred::clients::SubscriberClient;
use fred::prelude::{
    Builder, ClientLike, Config as FredConfig, EventInterface, PubsubInterface, ReconnectPolicy,
};
use std::sync::Arc;

/// What to do with each message received on the channel.
pub(crate) type OnMessage = Arc<dyn Fn(&str) + Send + Sync>;

/// The subscriptions of one daemon, one per master.
pub(crate) struct Subscriptions {
    clients: Vec<SubscriberClient>,
}

impl Subscriptions {
    /// Subscribes to `channel` on every master in `urls`, in the background
    /// (a master that is down is subscribed to when it comes back).
    pub(crate) fn start(
        urls: &[String],
        access: &MasterAccess,
        channel: &str,
        on_message: OnMessage,
    ) -> Subscriptions {
        let mut clients = Vec::with_capacity(urls.len());
        for url in urls {
            let name = node_name(url);
            let client = match FredConfig::from_url(url).and_then(|mut config| {
                access.apply(&mut config);
                Builder::from_config(config)
                    .set_policy(ReconnectPolicy::new_exponential(0, 20, 2_000, 2))
                    .build_subscriber_client()
            }) {
                Ok(client) => client,
                Err(error) => {
                    tracing::warn!(node = %name, %error, "cannot subscribe to release notices");
                    continue;
                }
            };
            let handler = on_message.clone();
            client.on_message(move |message| {
                if let Some(text) = message.value.as_str() {
                    handler(&text);
                }
                async { Ok(()) }
            });
            client.connect();
            client.manage_subscriptions();
            let subscriber = client.clone();
            let channel = channel.to_owned();
            tokio::spawn(async move {
                if subscriber.wait_for_connect().await.is_ok() {
                    if let Err(error) = subscriber.subscribe(channel).await {
                        tracing::warn!(node = %name, %error, "SUBSCRIBE failed");
                    }
                }
            });
            clients.push(client);
        }
        Subscriptions { clients }
    }

    /// Closes every subscription (at shutdown).
    pub(crate) async fn close(&self) {
        for client in &self.clients {
            // Bounded: QUIT waits for a master that is down to come back.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(1), client.quit()).await;
        }
    }
}
