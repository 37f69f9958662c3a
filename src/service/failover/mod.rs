//! Sentinel failovers, heard as they happen.
//!
//! A Sentinel failover does not stop the old master. `SENTINEL FAILOVER`, or a master paused
//! past `down-after-milliseconds` and then resumed, or one killed and restarted after the
//! failover, leaves the old master running and answering as a master until the sentinels'
//! next `INFO` poll of it turns it into a replica (up to 10 s later). A client still connected
//! to it keeps renewing and acquiring there, while clients that reconnected acquire on the new
//! master: two holders, neither told. fred reconnects only when a connection fails.
//!
//! So a Sentinel client subscribes to every configured sentinel's failover events (one
//! subscriber connection per sentinel, fred's, re-subscribed after a reconnect) and:
//! - on `+try-failover` for its master (sent before the replica is promoted, so before anyone
//!   can acquire on the new master): every hold is in doubt and no renewal confirms it, a hold
//!   taken meanwhile starts in doubt ([`FailoverHolds::began`]), and commands wait (at most one
//!   command timeout) for the switch ([`Core::set_failover`]);
//! - on `+switch-master`: the sentinels are asked which master they name now (a majority of
//!   them; a sentinel catching up may republish an old switch, so the message's address is
//!   only the fallback), and the command and subscriber connections are closed and opened
//!   again until both reach it (fred asks the sentinels in order, and one that has not heard
//!   of the switch yet names the old master), for at most one connect timeout; the
//!   replica-sync connections to the old master are closed; then the wait ends and a renewal
//!   sent to the new master confirms each hold or finds it gone ([`FailoverHolds::ended`]);
//!   a switch ends only the attempts to replace the master it moved *from*: the sentinel that
//!   led a failover announces its switch last (once the replicas are reconfigured), and by
//!   then another sentinel may have begun replacing the new master (seen in chaos runs: two
//!   failovers a second apart, the second promoting a replica that had not synced); a
//!   `+try-failover` of the new master heard while moving to it keeps the holds in doubt;
//!   connections that do not reach the named master within the connect timeout confirm
//!   nothing (commands go on, the holds stay in doubt) and the move is tried again every
//!   second;
//! - on every sentinel's attempt abandoned (`-failover-abort-*`, `+failover-end-for-timeout`),
//!   or after one watchdog timeout without a switch: the same end, on the master the
//!   connections reach;
//! - on `+reset-master` (the sentinel forgot its state, its own attempt with it) or a sentinel's
//!   events missed (the receiver lagged): the sentinels are asked which master they name now.
//!   With no attempt left under way, as a switch to that master. While one is, the failover
//!   goes on unless they name another master than the ones being replaced (a switch that was
//!   missed): a reset of another sentinel, or a lag, must not end it on the master being
//!   replaced, where the holds would be confirmed.
//!
//! Nothing here is on a lock's path: it costs one connection per sentinel, and a few
//! short-lived ones per failover.
//!
//! Rooms: [`event`] reads the sentinels' messages, [`attempts`] decides (both pure, unit
//! tested), [`watch`] listens and acts (the connections); this file starts and stops it
//! ([`Failovers`]).

mod attempts;
mod event;
mod watch;

use std::{sync::Arc, time::Duration};

use fred::{clients::SubscriberClient, interfaces::ClientLike};

use crate::{
    conn::{connect::Sentinels, core::Core},
    service::watchdog::FailoverHolds,
};

/// The failover watcher of a Sentinel client.
pub(crate) struct Failovers {
    clients: Vec<SubscriberClient>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// Where the connections were started (their closing is spawned there on drop).
    runtime: tokio::runtime::Handle,
}

impl Failovers {
    /// Starts watching the sentinels of `core`'s deployment (nothing on other deployments).
    /// `sub` is the registry's subscriber connection, moved to the new master with the
    /// command connection.
    pub(crate) fn start(
        core: &Arc<Core>,
        holds: FailoverHolds,
        sub: fred::clients::Client,
    ) -> Self {
        let Some(sentinels) = core.sentinels().cloned() else {
            return Self {
                clients: Vec::new(),
                task: None,
                runtime: tokio::runtime::Handle::current(),
            };
        };
        let clients = connect_all(core, &sentinels);
        let task = tokio::spawn(watch::watch(
            Arc::downgrade(core),
            holds,
            sub,
            sentinels,
            clients.clone(),
        ));
        Self {
            clients,
            task: Some(task),
            runtime: tokio::runtime::Handle::current(),
        }
    }

    /// Stops watching and closes the sentinel connections.
    pub(crate) async fn shutdown(&self) {
        if let Some(task) = &self.task {
            task.abort();
        }
        for c in &self.clients {
            let _ = tokio::time::timeout(Duration::from_millis(500), c.quit()).await;
        }
    }
}

impl Drop for Failovers {
    /// A client dropped without `shutdown`: the sentinel connections are closed too (a fred
    /// client left alone would stay connected, and reconnect).
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
        for c in std::mem::take(&mut self.clients) {
            drop(self.runtime.spawn(async move {
                let _ = tokio::time::timeout(Duration::from_millis(500), c.quit()).await;
            }));
        }
    }
}

/// One subscriber connection per sentinel, connecting (and re-subscribing) in the background:
/// a sentinel down at connect is reached when it comes back.
fn connect_all(core: &Core, sentinels: &Sentinels) -> Vec<SubscriberClient> {
    let config = core.config();
    sentinels
        .nodes
        .iter()
        .filter_map(|node| {
            let builder = crate::conn::connect::builder_for(node.clone(), config);
            match builder.build_subscriber_client() {
                Ok(client) => Some(client),
                Err(e) => {
                    log::warn!("cannot watch a sentinel for failovers: {e:#}");
                    None
                }
            }
        })
        .collect()
}
