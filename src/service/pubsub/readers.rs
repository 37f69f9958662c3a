//! The registry's readers: the message reader (a message wakes its channel's waiters as the
//! channel's reading says, and goes to its payload readers; a lagged stream wakes everyone),
//! the reconnect listener, and on a cluster the topology check (sharded subscriptions follow
//! their slots' owners, node-local ones the masters). What they find to do is queued for the
//! command task (`ops.rs`).

use std::{sync::Arc, time::Duration};

use fred::{
    clients::Client as FredClient,
    interfaces::{ClusterInterface, EventInterface},
    types::Value,
};
use tokio::sync::broadcast::error::RecvError;

use super::{
    keyspace::{current, Masters},
    registry::{Op, Scope, Shared, Status},
};

/// Reads messages and signals the channels' wake-ups. fred hands messages of keyspace-event
/// channels (`__keyevent@<db>__:<event>`) to a stream of their own: they go to their channel's
/// payload readers (the key is the payload).
pub(super) async fn run_messages(shared: Arc<Shared>) {
    let mut rx = shared.sub.message_rx();
    let mut keyspace = shared.sub.keyspace_event_rx();
    loop {
        let received = tokio::select! {
            m = rx.recv() => m,
            event = keyspace.recv() => {
                match event {
                    Ok(e) => {
                        let name = format!("__keyevent@{}__:{}", e.db, e.operation);
                        let channel = shared.channels.lock().get(name.as_str()).cloned();
                        if let Some(channel) = channel {
                            channel.payload(|| Value::Bytes(e.key.as_bytes().to_vec().into()));
                        }
                    }
                    Err(RecvError::Lagged(n)) => {
                        log::warn!("keyspace-event reader lagged by {n} messages");
                    }
                    Err(RecvError::Closed) => break,
                }
                continue;
            }
        };
        match received {
            Ok(msg) => {
                let channel = shared.channels.lock().get(&*msg.channel).cloned();
                let Some(channel) = channel else { continue };
                channel.payload(|| msg.value.clone());
                match message_value(&msg.value) {
                    Some(v) => channel.message(v),
                    None => log::debug!("ignoring message {:?} on {}", msg.value, channel.name),
                }
            }
            Err(RecvError::Lagged(n)) => {
                log::warn!("pub/sub reader lagged by {n} messages; waking every waiter");
                shared.wake_everyone();
            }
            Err(RecvError::Closed) => break,
        }
    }
}

fn message_value(v: &Value) -> Option<i64> {
    match v {
        Value::Integer(i) => Some(*i),
        Value::String(s) => s.parse().ok(),
        Value::Bytes(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        _ => None,
    }
}

/// How often a cluster client with sharded waiters re-reads the slot table: the server drops
/// the shard subscriptions of a slot that moves (failover, migration) without an event fred
/// reports, so a change of owner must be noticed here.
const TOPOLOGY_CHECK: Duration = Duration::from_secs(1);

/// The primaries of every slot range, as the subscriber connection sees them.
fn slot_owners(sub: &FredClient) -> Vec<(u16, u16, String)> {
    sub.cached_cluster_state()
        .map(|state| {
            state
                .slots()
                .iter()
                .map(|r| (r.start, r.end, r.primary.to_string()))
                .collect()
        })
        .unwrap_or_default()
}

/// On a cluster, after a topology change seen by either connection and at every periodic check:
/// with sharded pub/sub, when some slot has another owner, subscribe every live channel again
/// (on its new owner) and wake every waiter; with node-local channels, when the masters they
/// are subscribed on are not the cluster's masters, or some are pending after a failure, follow
/// them (`follow_masters`).
pub(super) async fn run_topology(
    shared: Arc<Shared>,
    masters: Arc<Masters>,
    commands: fred::clients::Client,
) {
    let mut changes = commands.cluster_change_rx();
    let mut sub_changes = shared.sub.cluster_change_rx();
    let mut tick = tokio::time::interval(TOPOLOGY_CHECK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut known = slot_owners(&shared.sub);
    loop {
        tokio::select! {
            _ = changes.recv() => {}
            _ = sub_changes.recv() => {}
            _ = tick.tick() => {}
        }
        let (sharded, node_local) = {
            let map = shared.channels.lock();
            let sharded =
                shared.messaging.sharded && map.values().any(|c| c.scope == Scope::Routed);
            let node_local = map.values().any(|c| c.scope == Scope::NodeLocal);
            (sharded, node_local)
        };
        if !sharded && !node_local {
            continue;
        }
        if let Err(e) = shared.sub.sync_cluster().await {
            log::debug!("cannot re-read the cluster slots: {e:#}");
            continue;
        }
        if sharded {
            let now = slot_owners(&shared.sub);
            if now != known {
                log::info!("cluster slots moved; subscribing every lock channel again");
                known = now;
                let _ = shared.ops.send(Op::Resubscribe);
            }
        }
        if node_local {
            let short = shared
                .established_node_local()
                .iter()
                .any(|c| *c.status.borrow() == Status::Pending);
            if short || current(&shared.sub) != masters.get() {
                let _ = shared.ops.send(Op::FollowMasters);
            }
        }
    }
}

/// After every reconnect: subscribe every live channel again and wake every waiter.
pub(super) async fn run_reconnects(shared: Arc<Shared>) {
    let mut rx = shared.sub.reconnect_rx();
    while let Ok(_) | Err(RecvError::Lagged(_)) = rx.recv().await {
        let _ = shared.ops.send(Op::Resubscribe);
    }
}
