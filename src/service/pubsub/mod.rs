//! The subscription registry: one subscriber connection per client, one subscription per
//! channel shared by every local waiter (reference counted), and a wake-up semaphore per channel
//! ([`Wakeups`]) that the channel's messages signal as its [`Reading`] says.
//!
//! * Every (S)SUBSCRIBE and UNSUBSCRIBE goes through one command task, in the order asked for,
//!   each subscription followed by a `PING` barrier: waiters attempt again only once the server
//!   has registered it (`ops.rs`).
//! * If the message stream lags or the connection was re-established, every waiter is woken
//!   once (a spurious wake costs one script call, a lost one a whole TTL), and after a
//!   reconnect or a slot move every live channel is subscribed again (`readers.rs`, `ops.rs`).
//! * A channel is routed (the locks', semaphores' and count-down latches' channels: classic,
//!   sharded or both, as the messaging says) or node-local (keyspace notifications: on a
//!   cluster a classic `SUBSCRIBE` on every master, following the masters as they change,
//!   `keyspace.rs`; on one server both are the same classic subscription).
//!
//! Its rooms, lowest first (none imports one beside it or above it): [`wakeups`] (the wake-up
//! primitive), [`registry`] (the channels and their subscriptions), [`keyspace`] (node-local
//! channels on every master of a cluster), [`ops`] (the command task), [`readers`] (messages,
//! reconnects, topology); this file starts them ([`PubSub`]).

pub(crate) mod keyspace;
mod ops;
mod readers;
mod registry;
mod wakeups;

use std::sync::Arc;

use fred::{clients::Client as FredClient, interfaces::ClientLike};
use parking_lot::Mutex;
use tokio::sync::mpsc;

pub(crate) use registry::Subscription;
pub(crate) use wakeups::{Reading, Wakeups};

use crate::conn::core::Core;
use keyspace::Masters;
use registry::{Scope, Shared};

/// The registry. Owned by the client; its tasks stop when the client shuts down.
pub(crate) struct PubSub {
    shared: Arc<Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl PubSub {
    /// Starts the registry's tasks on an initialised subscriber client, listening the way the
    /// core resolved (classic, sharded or both).
    pub(crate) fn start(sub: FredClient, core: &Arc<Core>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            sub,
            closed: tokio::sync::watch::Sender::new(false),
            channels: Mutex::default(),
            ops: tx,
            messaging: core.messaging(),
            clustered: core.is_clustered(),
            core: core.clone(),
        });
        // The masters the node-local channels are subscribed on (a cluster only).
        let masters = Arc::new(Masters::default());
        let mut tasks = vec![
            tokio::spawn(ops::run_ops(shared.clone(), masters.clone(), rx)),
            tokio::spawn(readers::run_messages(shared.clone())),
            tokio::spawn(readers::run_reconnects(shared.clone())),
        ];
        // Sharded channels follow their slots' owners, node-local ones the masters.
        if shared.clustered {
            tasks.push(tokio::spawn(readers::run_topology(
                shared.clone(),
                masters,
                core.redis().clone(),
            )));
        }
        Self { shared, tasks }
    }

    /// Joins (or creates) the shared subscription of the lock channel `channel`. Dropping the
    /// returned value leaves it; the last one out unsubscribes.
    pub(crate) fn subscribe(&self, channel: &str) -> Subscription {
        self.subscribe_as(channel, Reading::Lock)
    }

    /// [`subscribe`](Self::subscribe) to a channel whose messages are read as `reading` says
    /// (the reading of the channel's first subscriber stays while the channel has waiters:
    /// every object of one channel name reads it alike).
    pub(crate) fn subscribe_as(&self, channel: &str, reading: Reading) -> Subscription {
        self.shared.join(channel, reading, Scope::Routed)
    }

    /// [`subscribe`](Self::subscribe) to a channel whose name the caller shares: the registry
    /// keeps that name rather than a copy of its own.
    pub(crate) fn subscribe_shared(&self, channel: &Arc<str>) -> Subscription {
        self.shared
            .join_shared(channel, Reading::Lock, Scope::Routed)
    }

    /// Joins (or creates) the shared subscription of a node-local channel (keyspace
    /// notifications, read through [`Subscription::payloads`]): a classic subscription on every
    /// master of a cluster, the one subscription of a single server. Dropping the returned
    /// value leaves it; the last one out unsubscribes (on every master).
    pub(crate) fn subscribe_node_local(&self, channel: &str) -> Subscription {
        self.shared.join(channel, Reading::Lock, Scope::NodeLocal)
    }

    /// Number of channels with local waiters (each is exactly one server subscription).
    pub(crate) fn active_channels(&self) -> usize {
        self.shared.channels.lock().len()
    }

    /// The local waiters of `channel` (0 when nobody of this client listens on it).
    pub(crate) fn waiters_of(&self, channel: &str) -> usize {
        let map = self.shared.channels.lock();
        map.get(channel).map_or(0, |c| c.wakeups.waiters())
    }

    /// Every channel with its number of local waiters (a snapshot).
    pub(crate) fn channel_waiters(&self) -> impl Iterator<Item = (String, usize)> {
        let map = self.shared.channels.lock();
        let all: Vec<(String, usize)> = map
            .values()
            .map(|c| (c.name.to_string(), c.wakeups.waiters()))
            .collect();
        all.into_iter()
    }

    pub(crate) async fn shutdown(&self) {
        self.shared.closed.send_replace(true);
        for t in &self.tasks {
            t.abort();
        }
        let _ = self.shared.sub.quit().await;
    }
}

impl Drop for PubSub {
    fn drop(&mut self) {
        // The client is gone: its streams end (they keep the registry's shared state alive,
        // not its tasks, so nothing would ever reach them).
        self.shared.closed.send_replace(true);
        for t in &self.tasks {
            t.abort();
        }
    }
}
