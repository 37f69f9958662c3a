//! Keyspace notifications on a Redis Cluster: the registry's *node-local* channels
//! (`__keyevent@<db>__:del`, `__keyevent@<db>__:expired`) on every master.
//!
//! A node publishes its keyspace notifications only to the clients subscribed on that node:
//! they never travel over the cluster bus, and they are always classic pub/sub (a sharded
//! subscription never receives them, whatever the client's sharded-subscription mode). So the
//! events of a key come from the master that owns its slot, and from the new owner once the
//! slot moves (a migration, a failover).
//!
//! Design: the registry subscribes each node-local channel with a classic `SUBSCRIBE` on
//! **every master** of the cluster (on that master's connection of the subscriber client, then a
//! `PING` there as the barrier), once per client and channel, shared by every listener and
//! filtered by payload (the key). The set of masters it is subscribed on is compared with the
//! cluster's masters after every topology change fred reports and at the registry's periodic
//! check (fred re-reads the slot table there and drops its connections to nodes that are no
//! longer masters, which takes their subscriptions with them): a new master (a promoted
//! replica, a node added by resharding) is subscribed, one that left is forgotten, and after a
//! reconnect every master is subscribed again. Following the slot owner of each lock instead
//! would need one subscription per lock and node, a re-subscription at each slot move, and would
//! still miss the events between the move and its discovery; with every master subscribed, a
//! migration needs nothing (the target already listens), and a failover needs only the promoted
//! replica, once, for every lock.
//!
//! What Redis reports around a topology change (the server's behaviour, not filtered here): a
//! key moved by `MIGRATE` is a `del` on its old master (a `Deleted` event although the lock
//! lives on at its new master), and a node demoted to replica replays its master's deletions
//! as `del` until the registry has noticed the demotion (at most one periodic check).
//!
//! This file holds the set of subscribed masters ([`Masters`]), the plan that brings it in line
//! with the cluster ([`plan`]), the per-node `SUBSCRIBE` + barrier and `UNSUBSCRIBE`, and the
//! rule a node's `notify-keyspace-events` must meet ([`setting_suffices`]). The channels, their
//! listeners and the order of operations stay in the registry (`pubsub.rs`).

use fred::{
    clients::SubscriberClient,
    error::Error as FredError,
    interfaces::{ClientLike, ClusterInterface, PubsubInterface},
    types::{
        config::{Options, Server},
        Value,
    },
};
use parking_lot::Mutex;

use crate::conn::core::Core;

/// Whether a `notify-keyspace-events` setting publishes the `del` and `expired` key-event
/// messages: `E` (key-event channels) with `g` (generic commands, `del`) and `x` (expirations),
/// or `A` for all classes.
pub(crate) fn setting_suffices(setting: &str) -> bool {
    let has = |c| setting.contains(c);
    has('E') && (has('A') || (has('g') && has('x')))
}

/// The masters the node-local channels are subscribed on (address order). Changed only by the
/// registry's one operations task; the mutex makes it shareable.
#[derive(Debug, Default)]
pub(crate) struct Masters(Mutex<Vec<Server>>);

impl Masters {
    pub(crate) fn get(&self) -> Vec<Server> {
        self.0.lock().clone()
    }

    pub(crate) fn set(&self, mut masters: Vec<Server>) {
        masters.sort();
        masters.dedup();
        *self.0.lock() = masters;
    }
}

/// The cluster's masters as the subscriber client's slot table has them (address order, each
/// once). Empty until the table is known.
pub(crate) fn current(sub: &SubscriberClient) -> Vec<Server> {
    sub.cached_cluster_state()
        .map(|state| state.unique_primary_nodes())
        .unwrap_or_default()
}

/// What bringing the subscriptions in line with the cluster takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// Masters to subscribe every node-local channel on.
    pub(crate) subscribe: Vec<Server>,
    /// Masters subscribed on before that kept their subscriptions.
    pub(crate) kept: Vec<Server>,
    /// Nodes that are no longer masters: forgotten (fred closed its connection to each when it
    /// re-read the slot table, and their subscriptions went with it).
    pub(crate) left: Vec<Server>,
}

/// The plan from the masters subscribed on (`subscribed`) to the cluster's masters (`now`);
/// `again` (after a reconnect, whose connection lost its subscriptions) subscribes on every
/// master.
pub(crate) fn plan(subscribed: &[Server], now: &[Server], again: bool) -> Plan {
    let (kept, subscribe) = now
        .iter()
        .cloned()
        .partition(|m| !again && subscribed.contains(m));
    Plan {
        subscribe,
        kept,
        left: subscribed
            .iter()
            .filter(|m| !now.contains(m))
            .cloned()
            .collect(),
    }
}

fn on(node: &Server) -> Options {
    Options {
        cluster_node: Some(node.clone()),
        ..Default::default()
    }
}

/// `SUBSCRIBE names` on `node`'s connection, then `PING` there: its reply comes after the
/// server has registered the subscription (fred resolves `SUBSCRIBE` when it is written).
pub(crate) async fn subscribe_on(
    sub: &SubscriberClient,
    node: &Server,
    names: &[String],
) -> Result<(), FredError> {
    let pinned = sub.with_options(&on(node));
    pinned.subscribe(names.to_vec()).await?;
    pinned.ping::<Value>(None).await.map(drop)
}

/// `UNSUBSCRIBE names` on `node`'s connection.
pub(crate) async fn unsubscribe_on(
    sub: &SubscriberClient,
    node: &Server,
    names: &[String],
) -> Result<(), FredError> {
    sub.with_options(&on(node))
        .unsubscribe(names.to_vec())
        .await
}

/// A master that joined after the events were asked for: its setting was not checked then, so
/// it is read now and a setting without the needed flags is logged (the events of the keys it
/// owns will not come).
pub(crate) async fn check_joined(core: &Core, node: &Server) {
    match core.keyspace_events_setting_on(node, "").await {
        Ok(setting) if !setting_suffices(&setting) => log::warn!(
            "cluster master {node} joined with notify-keyspace-events {setting:?}: the lock \
             events of the keys it owns are not published (they need E with g and x, or A)"
        ),
        Ok(_) => {}
        Err(e) => log::debug!("cannot read the notify-keyspace-events of {node}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(ports: &[u16]) -> Vec<Server> {
        ports.iter().map(|p| Server::new("127.0.0.1", *p)).collect()
    }

    #[test]
    fn the_setting_needs_key_events_of_generic_commands_and_expirations() {
        for ok in ["Egx", "AE", "KEA", "xEg", "Eghx"] {
            assert!(setting_suffices(ok), "{ok}");
        }
        for off in ["", "Kgx", "Eg", "Ex", "KA", "K$"] {
            assert!(!setting_suffices(off), "{off}");
        }
    }

    #[test]
    fn a_promoted_replica_is_subscribed_and_its_demoted_master_forgotten() {
        let p = plan(&nodes(&[1, 2, 3]), &nodes(&[1, 2, 4]), false);
        assert_eq!(p.subscribe, nodes(&[4]));
        assert_eq!(p.kept, nodes(&[1, 2]));
        assert_eq!(p.left, nodes(&[3]));
    }

    #[test]
    fn a_reconnect_subscribes_on_every_master_again() {
        let p = plan(&nodes(&[1, 2, 3]), &nodes(&[1, 2, 3]), true);
        assert_eq!(p.subscribe, nodes(&[1, 2, 3]));
        assert!(p.kept.is_empty() && p.left.is_empty());
    }

    #[test]
    fn an_unchanged_cluster_needs_nothing() {
        let p = plan(&nodes(&[1, 2, 3]), &nodes(&[1, 2, 3]), false);
        assert!(p.subscribe.is_empty() && p.left.is_empty());
        assert_eq!(p.kept, nodes(&[1, 2, 3]));
    }
}
