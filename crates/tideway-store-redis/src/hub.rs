//! The event hub: signals published on one channel, and the listener that
//! passes them to this node's subscriptions.

use crate::RedisShared;
use async_trait::async_trait;
use redis::RedisError;
use std::time::Duration;
use tideway_core::{ItemId, UserId};
use tideway_store::{Engine, Hub, HubEvent, Result, Signal, StoreError, Subscription};

/// The event hub's side of a node: where signals are published, and the
/// listener that passes them to this node's subscriptions.
pub(crate) struct RedisHub {
    pub(crate) urls: Vec<String>,
    pub(crate) channel: String,
    pub(crate) timeout: Duration,
    pub(crate) tx: tokio::sync::broadcast::Sender<HubEvent>,
    /// The listener task, once started; it reports when it is subscribed.
    pub(crate) listener: tokio::sync::Mutex<Option<(tokio::task::JoinHandle<()>, tokio::sync::watch::Receiver<bool>)>>,
}

impl Drop for RedisHub {
    fn drop(&mut self) {
        if let Some((task, _)) = self.listener.get_mut().take() {
            task.abort();
        }
    }
}

/// A message of the hub's channel: its signals, comma-separated.
fn encode_signals(signals: &[Signal]) -> String {
    let parts: Vec<String> = signals
        .iter()
        .filter_map(|s| match s {
            Signal::Work => Some("w".to_owned()),
            Signal::Home(u) => Some(format!("h{}", u.0)),
            Signal::Author(u) => Some(format!("a{}", u.0)),
            Signal::Gone(u) => Some(format!("g{}", u.0)),
            Signal::Item(i) => Some(format!("i{}", i.0)),
            // A signal this build cannot send to other nodes.
            _ => None,
        })
        .collect();
    parts.join(",")
}

/// The signals of a message (unknown ones, from a newer node, are skipped).
fn decode_signals(msg: &str) -> impl Iterator<Item = Signal> + '_ {
    msg.split(',').filter_map(|part| match part.as_bytes().first() {
        Some(b'w') if part.len() == 1 => Some(Signal::Work),
        Some(b'h') => part[1..].parse().ok().map(|u| Signal::Home(UserId(u))),
        Some(b'a') => part[1..].parse().ok().map(|u| Signal::Author(UserId(u))),
        Some(b'g') => part[1..].parse().ok().map(|u| Signal::Gone(UserId(u))),
        Some(b'i') => part[1..].parse().ok().map(|i| Signal::Item(ItemId(i))),
        _ => None,
    })
}

impl RedisHub {
    /// Subscribes on one of the URLs after another until one answers, then
    /// passes messages on until the connection is lost; forever.
    async fn listen(
        urls: Vec<String>,
        channel: String,
        timeout: Duration,
        tx: tokio::sync::broadcast::Sender<HubEvent>,
        ready: tokio::sync::watch::Sender<bool>,
    ) {
        use futures_util::StreamExt;
        let mut backoff = Duration::from_millis(50);
        let mut first = true;
        for url in urls.iter().cycle() {
            let subscribed = async {
                let client = redis::Client::open(url.as_str())?;
                let mut ps = tokio::time::timeout(timeout, client.get_async_pubsub())
                    .await
                    .map_err(|_| RedisError::from((redis::ErrorKind::Io, "timed out connecting")))??;
                ps.subscribe(&channel).await?;
                Ok::<_, RedisError>(ps)
            }
            .await;
            match subscribed {
                Ok(ps) => {
                    backoff = Duration::from_millis(50);
                    // Whatever was published while no connection listened
                    // is lost: subscriptions hear of it.
                    if !first {
                        let _ = tx.send(HubEvent::Gap);
                    }
                    first = false;
                    let _ = ready.send(true);
                    let mut messages = ps.into_on_message();
                    while let Some(msg) = messages.next().await {
                        if let Ok(text) = msg.get_payload::<String>() {
                            for s in decode_signals(&text) {
                                let _ = tx.send(HubEvent::Signal(s));
                            }
                        }
                    }
                    let _ = ready.send(false);
                    tracing::warn!(url = %tideway_store::redact_url(url), "the event hub's connection to Redis was lost; subscribing again");
                }
                Err(e) => {
                    tracing::warn!(url = %tideway_store::redact_url(url), error = %e, "the event hub could not subscribe to Redis; retrying")
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    }
}

#[async_trait]
impl Hub for RedisShared {
    async fn ping(&self) -> Result<()> {
        self.ping_every_server().await
    }

    /// Every key under the prefix, on every primary, as after a failover.
    async fn forget_all(&self) -> Result<usize> {
        self.purge_anyway().await
    }

    async fn publish(&self, signals: &[Signal]) -> Result<()> {
        let msg = encode_signals(signals);
        if msg.is_empty() {
            return Ok(());
        }
        let _: i64 = self.query(redis::cmd("PUBLISH").arg(&self.hub.channel).arg(msg)).await?;
        Ok(())
    }

    /// The first call starts this node's listener and waits (at most the
    /// command timeout) until the server confirmed its subscription.
    async fn subscribe(&self) -> Result<Subscription> {
        let h = &self.hub;
        let mut ready = {
            let mut listener = h.listener.lock().await;
            let (_, ready) = listener.get_or_insert_with(|| {
                let (tx_ready, rx_ready) = tokio::sync::watch::channel(false);
                let task = tokio::spawn(RedisHub::listen(
                    h.urls.clone(),
                    h.channel.clone(),
                    h.timeout,
                    h.tx.clone(),
                    tx_ready,
                ));
                (task, rx_ready)
            });
            ready.clone()
        };
        // Subscribed before this returns: what is published next is heard.
        let sub = Subscription::new(h.tx.subscribe());
        tokio::time::timeout(h.timeout, ready.wait_for(|up| *up))
            .await
            .map_err(|_| StoreError::unavailable_because(Engine::Redis, "the event hub could not subscribe in time"))?
            .map_err(|_| StoreError::unavailable_because(Engine::Redis, "the event hub's listener stopped"))?;
        Ok(sub)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hub_messages_round_trip_and_skip_what_they_do_not_know() {
        use tideway_store::Signal;
        let signals = [
            Signal::Work,
            Signal::Home(UserId(7)),
            Signal::Home(UserId(u64::MAX >> 1)),
            Signal::Author(UserId(9)),
            Signal::Gone(UserId(5)),
        ];
        let msg = encode_signals(&signals);
        assert_eq!(msg, format!("w,h7,h{},a9,g5", u64::MAX >> 1));
        assert_eq!(decode_signals(&msg).collect::<Vec<_>>(), signals);
        assert_eq!(
            decode_signals("x9,w,h,hx,wz,h3,a,a4").collect::<Vec<_>>(),
            vec![Signal::Work, Signal::Home(UserId(3)), Signal::Author(UserId(4))]
        );
        assert_eq!(encode_signals(&[]), "");
    }
}
