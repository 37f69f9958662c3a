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
//! with the cluster ([`plan`]), the per-node `SUBSCRIBE` + barrier and `UNSUBSCRIBE`, the rule a
//! node's `notify-keyspace-events` must meet ([`setting_suffices`]), and the registry's
//! operations on every master: a first subscription ([`subscribe_on_every_master`]), leaving
//! ([`unsubscribe_on_every_master`]), following the masters ([`follow_masters`]). The channels,
//! their listeners and the order of operations stay in the registry (`registry.rs`, `ops.rs`).

use std::sync::Arc;

use fred::{
    clients::Client as FredClient,
    error::Error as FredError,
    interfaces::{ClientLike, ClusterInterface, PubsubInterface},
    types::{
        config::{Options, Server},
        Value,
    },
};
use parking_lot::Mutex;

use super::registry::{
    refused_error, refused_for, settle, subscribe_error, Channel, Shared, Status,
};
use crate::{conn::core::Core, error::Error};

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
pub(crate) fn current(sub: &FredClient) -> Vec<Server> {
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
    sub: &FredClient,
    node: &Server,
    names: &[String],
) -> Result<(), FredError> {
    let pinned = sub.with_options(&on(node));
    pinned.subscribe(names.to_vec()).await?;
    pinned.ping::<Value>(None).await.map(drop)
}

/// `UNSUBSCRIBE names` on `node`'s connection.
pub(crate) async fn unsubscribe_on(
    sub: &FredClient,
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
        Err(e) => log::debug!("cannot read the notify-keyspace-events of {node}: {e:#}"),
    }
}

/// The first subscription of node-local channels on a cluster: a classic `SUBSCRIBE` and its
/// barrier on every master at once (whatever the sharded mode: keyspace notifications are never
/// sharded). Ready once every master has it; failed, naming a master that did not take it,
/// otherwise.
pub(super) async fn subscribe_on_every_master(
    shared: &Shared,
    masters: &Masters,
    group: &[Arc<Channel>],
) {
    let names: Vec<String> = group.iter().map(|c| c.name.to_string()).collect();
    // The connect-time probe asked about SUBSCRIBE only when messages are classic.
    if shared.messaging.classic {
        if let Err(error) = shared
            .core
            .permissions()
            .check(crate::conn::permissions::Need::Listen, &names.join(", "))
        {
            return settle(group, Status::Failed(Box::new(error)));
        }
    }
    match refused_for(shared, &names, &["subscribe"]).await {
        Ok(None) => {}
        Ok(Some(refused)) => {
            log::warn!("this Redis user may not listen on {refused}");
            return settle(group, Status::Failed(Box::new(refused_error(&refused))));
        }
        // Not subscribed blind (see `refused_for`): the error is the waiters'.
        Err(e) => return settle(group, Status::Failed(Box::new(e))),
    }
    let now = current(&shared.sub);
    if now.is_empty() {
        let error = Error::Connection("the cluster's masters are not known yet".into());
        return settle(group, Status::Failed(Box::new(error)));
    }
    let names = &names;
    let outcomes = futures::future::join_all(
        now.iter()
            .map(|m| async move { (m, subscribe_on(&shared.sub, m, names).await) }),
    )
    .await;
    let failure = outcomes
        .into_iter()
        .find_map(|(m, outcome)| outcome.err().map(|e| (m, e)));
    let status = match failure {
        None => {
            // The first node-local channels: the masters they are on are the registry's set
            // (with channels already live, the next topology check compares and follows).
            if masters.get().is_empty() {
                masters.set(now.clone());
            }
            Status::Ready
        }
        Some((master, e)) => {
            log::warn!("SUBSCRIBE on cluster master {master} failed: {e:#}");
            let what = format!(
                "subscribing to {} on cluster master {master}",
                names.join(", ")
            );
            Status::Failed(Box::new(subscribe_error(what, e)))
        }
    };
    settle(group, status);
}

/// Leaves node-local channels on every master (of the registry's set and of the slot table; a
/// failure only logged: the server forgets a subscription with its connection anyway).
pub(super) async fn unsubscribe_on_every_master(
    shared: &Shared,
    masters: &Masters,
    names: Vec<String>,
) {
    let names = &names;
    let now = current(&shared.sub);
    let outcomes = futures::future::join_all(
        now.iter()
            .map(|m| async move { (m, unsubscribe_on(&shared.sub, m, names).await) }),
    )
    .await;
    for (master, outcome) in outcomes {
        if let Err(e) = outcome {
            log::debug!("UNSUBSCRIBE on cluster master {master} failed: {e:#}");
        }
    }
    let any_left = shared
        .channels
        .lock()
        .values()
        .any(|c| shared.on_every_master(c));
    if !any_left {
        masters.set(Vec::new());
    }
}

/// Brings the established node-local `channels` in line with the cluster's masters
/// (`plan`): subscribes them on each new master (on every master when `again`, after
/// a reconnect), forgets the nodes that are no longer masters. The masters at once; while one
/// fails the channels are pending (a new listener waits for them) and the next topology check,
/// finding them pending, tries again; they are ready again once every master of the moment has
/// them.
pub(super) async fn follow_masters(
    shared: &Shared,
    masters: &Masters,
    channels: Vec<Arc<Channel>>,
    again: bool,
) {
    if channels.is_empty() {
        return;
    }
    let names: Vec<String> = channels.iter().map(|c| c.name.to_string()).collect();
    let names = &names;
    let before = masters.get();
    let plan = plan(&before, &current(&shared.sub), again);
    if plan.subscribe.is_empty() && plan.left.is_empty() {
        // Every master has them (a master that failed before may have left since).
        for ch in &channels {
            ch.status.send_if_modified(|s| {
                let was_pending = *s == Status::Pending;
                *s = Status::Ready;
                was_pending
            });
        }
        return;
    }
    if !plan.left.is_empty() {
        log::info!(
            "no longer cluster masters: {:?}; their keyspace subscriptions went with fred's \
             connections",
            plan.left
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        );
    }
    let outcomes = futures::future::join_all(
        plan.subscribe
            .iter()
            .map(|m| async move { (m, subscribe_on(&shared.sub, m, names).await) }),
    )
    .await;
    let mut subscribed = plan.kept;
    let mut failed = Vec::new();
    for (master, outcome) in outcomes {
        match outcome {
            Ok(()) => {
                if !before.is_empty() && !before.contains(master) {
                    log::info!("listening to keyspace events on the new cluster master {master}");
                    let (core, master) = (shared.core.clone(), master.clone());
                    drop(tokio::spawn(async move {
                        check_joined(&core, &master).await;
                    }));
                }
                subscribed.push(master.clone());
            }
            Err(e) => failed.push(format!("{master}: {e}")),
        }
    }
    masters.set(subscribed);
    if failed.is_empty() {
        for ch in &channels {
            ch.status.send_replace(Status::Ready);
        }
    } else {
        log::warn!(
            "subscribing to {} on cluster masters failed ({}); retrying at the next topology \
             check",
            names.join(", "),
            failed.join("; ")
        );
        for ch in &channels {
            ch.status.send_if_modified(|s| {
                let was_ready = *s == Status::Ready;
                *s = Status::Pending;
                was_ready
            });
        }
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
