//! The registry's command task: every (S)SUBSCRIBE and UNSUBSCRIBE goes through it, in the
//! order they were asked for, so an `UNSUBSCRIBE` from a departing last waiter can never
//! overtake the `SUBSCRIBE` of a new one; runs of the same kind are batched.
//!
//! * The first waiter on a channel asks for a subscription; the task sends `SUBSCRIBE` (per slot
//!   `SSUBSCRIBE` when messages are sharded) and then `PING` on the same connection: fred
//!   resolves `subscribe()` before the server has registered the channel, and the `PING` reply
//!   comes after the `SUBSCRIBE` has been processed (the barrier), so waiters retry their
//!   acquisition only once the subscription really exists.
//! * After a reconnect (or a slot move), every live channel is subscribed again, per slot when
//!   messages are sharded, and every waiter is woken (a message may have been missed); a
//!   channel whose re-subscription fails keeps its entry and wake-ups and is tried again with
//!   back-off until it succeeds or its last waiter leaves.
//! * Node-local channels on a cluster are subscribed on every master (`keyspace.rs`).

use std::{
    sync::{atomic::Ordering, Arc},
    time::Duration,
};

use fred::{
    error::Error as FredError,
    interfaces::{ClientLike, ClusterInterface, PubsubInterface},
    types::{config::Options, ClusterHash, Value},
};
use tokio::sync::mpsc;

use super::{
    keyspace::{self, Masters},
    registry::{refused_error, refused_for, settle, subscribe_error, Channel, Op, Shared, Status},
};
use crate::error::Result;

/// The first pause before a failed re-subscription is tried again; it doubles up to
/// [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(50);
/// The longest pause between tries of a failed re-subscription.
const RETRY_MAX: Duration = Duration::from_secs(2);

/// Sends subscribe/unsubscribe commands in order, batching runs of the same kind.
pub(super) async fn run_ops(
    shared: Arc<Shared>,
    masters: Arc<Masters>,
    mut rx: mpsc::UnboundedReceiver<Op>,
) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while let Ok(op) = rx.try_recv() {
            batch.push(op);
        }
        let mut i = 0;
        while i < batch.len() {
            match &batch[i] {
                Op::Subscribe(_) => {
                    let (everywhere, routed) = take_run(&shared, &batch, &mut i);
                    if !routed.is_empty() {
                        subscribe_group(&shared, &routed).await;
                    }
                    if !everywhere.is_empty() {
                        keyspace::subscribe_on_every_master(&shared, &masters, &everywhere).await;
                    }
                }
                Op::Unsubscribe(_) => {
                    let (everywhere, routed) = take_run(&shared, &batch, &mut i);
                    if !routed.is_empty() {
                        let names = routed.iter().map(|c| c.name.to_string()).collect();
                        if let Err(e) = unsubscribe_names(&shared, names).await {
                            log::warn!("UNSUBSCRIBE failed: {e:#}");
                        }
                    }
                    if !everywhere.is_empty() {
                        let names = everywhere.iter().map(|c| c.name.to_string()).collect();
                        keyspace::unsubscribe_on_every_master(&shared, &masters, names).await;
                    }
                }
                Op::Resubscribe => {
                    i += 1;
                    let all: Vec<Arc<Channel>> = shared.channels.lock().values().cloned().collect();
                    if !all.is_empty() {
                        crate::observe::resubscribed(all.len());
                        let routed = all
                            .into_iter()
                            .filter(|c| !shared.on_every_master(c))
                            .collect();
                        let failed = resubscribe(&shared, routed).await;
                        retry_later(&shared, failed, RETRY_FIRST);
                        keyspace::follow_masters(
                            &shared,
                            &masters,
                            shared.established_node_local(),
                            true,
                        )
                        .await;
                    }
                    shared.wake_everyone();
                }
                Op::FollowMasters => {
                    i += 1;
                    keyspace::follow_masters(
                        &shared,
                        &masters,
                        shared.established_node_local(),
                        false,
                    )
                    .await;
                }
                Op::Retry { channels, pause } => {
                    i += 1;
                    // Only the channels that still have waiters (the same entry: a channel left
                    // and joined again was subscribed by its new entry).
                    for ch in channels {
                        ch.retrying.store(false, Ordering::Release);
                    }
                    let live: Vec<Arc<Channel>> = {
                        let map = shared.channels.lock();
                        channels
                            .iter()
                            .filter(|c| map.is_current(c))
                            .cloned()
                            .collect()
                    };
                    let failed = resubscribe(&shared, live).await;
                    retry_later(&shared, failed, (*pause * 2).min(RETRY_MAX));
                }
            }
        }
    }
}

/// Takes the run of operations of one kind (`Subscribe` or `Unsubscribe`) that starts at
/// `batch[*i]`: its channels, those subscribed on every master apart from the routed ones.
fn take_run(
    shared: &Shared,
    batch: &[Op],
    i: &mut usize,
) -> (Vec<Arc<Channel>>, Vec<Arc<Channel>>) {
    let kind = std::mem::discriminant(&batch[*i]);
    let mut group = Vec::new();
    while let Some(Op::Subscribe(ch) | Op::Unsubscribe(ch)) = batch.get(*i) {
        if std::mem::discriminant(&batch[*i]) != kind {
            break;
        }
        group.push(ch.clone());
        *i += 1;
    }
    group.into_iter().partition(|c| shared.on_every_master(c))
}

/// The first channel this user may not listen on (asked with a script on the command
/// connection: on a subscriber connection a refused SUBSCRIBE's error reply is not tied to the
/// command that caused it). `Ok(None)` when all are allowed; an error when the server could not
/// be asked (see [`refused_for`]).
async fn refused_channel(shared: &Shared, names: &[String]) -> Result<Option<String>> {
    let mut commands = Vec::new();
    if shared.messaging.classic {
        commands.push("subscribe");
    }
    if shared.messaging.sharded {
        commands.push("ssubscribe");
    }
    refused_for(shared, names, &commands).await
}

/// Channels grouped by cluster slot (one `SSUBSCRIBE` reaches one shard).
fn by_slot(names: Vec<String>) -> Vec<(u16, Vec<String>)> {
    let mut groups: Vec<(u16, Vec<String>)> = Vec::new();
    for name in names {
        let slot = fred::util::redis_keyslot(name.as_bytes());
        match groups.iter_mut().find(|(s, _)| *s == slot) {
            Some((_, g)) => g.push(name),
            None => groups.push((slot, vec![name])),
        }
    }
    groups
}

/// A `PING` on the connection that carries the subscriptions of `slot` (`None`: the classic
/// subscriptions). Its reply comes after the server has processed the (S)SUBSCRIBE sent before
/// it on that connection: the barrier.
async fn barrier(shared: &Shared, slot: Option<u16>) -> std::result::Result<(), FredError> {
    if !shared.clustered {
        return shared.sub.ping::<Value>(None).await.map(drop);
    }
    // fred sends classic (UN)SUBSCRIBE to the node of the client id's slot.
    let slot = slot.unwrap_or_else(|| fred::util::redis_keyslot(shared.sub.id().as_bytes()));
    let options = Options {
        cluster_hash: Some(ClusterHash::Custom(slot)),
        ..Default::default()
    };
    shared
        .sub
        .with_options(&options)
        .ping::<Value>(None)
        .await
        .map(drop)
}

/// Runs a sharded (un)subscription, retrying while the subscriber's view of the cluster is
/// stale: fred gives pub/sub commands a single attempt, so the first one after a failover or a
/// slot move fails with the redirection and the next one, after a re-sync, reaches the owner.
async fn with_resync<F, Fut>(shared: &Shared, mut op: F) -> std::result::Result<(), FredError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = std::result::Result<(), FredError>>,
{
    let mut tries = 0;
    loop {
        match op().await {
            Err(e) if tries < 3 => {
                tries += 1;
                log::debug!("sharded (un)subscribe failed ({e:#}); re-reading the cluster");
                let _ = shared.sub.sync_cluster().await;
                tokio::time::sleep(Duration::from_millis(20 * tries)).await;
            }
            other => return other,
        }
    }
}

/// Subscribes `names` in every namespace the client listens on, each followed by its barrier.
async fn subscribe_names(
    shared: &Shared,
    names: Vec<String>,
) -> std::result::Result<(), FredError> {
    if shared.messaging.classic {
        shared.sub.subscribe(names.clone()).await?;
        barrier(shared, None).await?;
    }
    if shared.messaging.sharded {
        for (slot, group) in by_slot(names) {
            with_resync(shared, || shared.sub.ssubscribe(group.clone())).await?;
            barrier(shared, Some(slot)).await?;
        }
    }
    Ok(())
}

/// Leaves `names` in every namespace the client listens on.
async fn unsubscribe_names(
    shared: &Shared,
    names: Vec<String>,
) -> std::result::Result<(), FredError> {
    if shared.messaging.classic {
        shared.sub.unsubscribe(names.clone()).await?;
    }
    if shared.messaging.sharded {
        for (_, group) in by_slot(names) {
            with_resync(shared, || shared.sub.sunsubscribe(group.clone())).await?;
        }
    }
    Ok(())
}

/// Subscribes live channels again (after a reconnect or a topology change): per slot when the
/// messages are sharded, so one unreachable shard fails only its own channels. A channel that
/// could not be subscribed keeps its entry and wake-ups (its waiters, asleep on them, hear
/// the first message once a retry succeeded) and goes back to pending, so that waiters joining
/// it wait for the retry instead of replacing it; a channel subscribed again is ready and all
/// its waiters are woken (a message may have been missed meanwhile). Returns the failed ones.
async fn resubscribe(shared: &Shared, channels: Vec<Arc<Channel>>) -> Vec<Arc<Channel>> {
    if channels.is_empty() {
        return channels;
    }
    let groups: Vec<Vec<Arc<Channel>>> = if shared.messaging.sharded {
        let mut by: Vec<(u16, Vec<Arc<Channel>>)> = Vec::new();
        for ch in channels {
            let slot = fred::util::redis_keyslot(ch.name.as_bytes());
            match by.iter_mut().find(|(s, _)| *s == slot) {
                Some((_, g)) => g.push(ch),
                None => by.push((slot, vec![ch])),
            }
        }
        by.into_iter().map(|(_, g)| g).collect()
    } else {
        vec![channels]
    };
    // The shards at once: one that does not answer does not hold up the others.
    let outcomes = futures::future::join_all(groups.into_iter().map(|group| async move {
        let names: Vec<String> = group.iter().map(|c| c.name.to_string()).collect();
        // A refused SUBSCRIBE's error reply is not reliably tied to it on the subscriber
        // connection: asked first on the command connection, as for a first subscription
        // (not on a cluster, where that script runs on any node, not the shard's).
        // A check that could not be made fails the attempt (retried like a refusal): a
        // SUBSCRIBE sent blind could be refused unseen and the channel taken for subscribed.
        let refused = match shared.clustered {
            false => refused_channel(shared, &names).await,
            true => Ok(None),
        };
        let outcome = match refused {
            Err(e) => Err(format!(
                "cannot ask the server whether it may be listened on ({e})"
            )),
            Ok(Some(refused)) => Err(format!("this Redis user may not listen on {refused}")),
            Ok(None) => match subscribe_names(shared, names.clone()).await {
                Err(e) => Err(e.to_string()),
                // The barrier does not prove the server took the subscription (a refused
                // SUBSCRIBE's error can miss it): a channel nobody listens on is not ours.
                Ok(()) => match shared.core.unlistened(&names).await {
                    Ok(None) => Ok(()),
                    Ok(Some(ch)) => Err(format!("the server lists no subscriber of {ch}")),
                    Err(e) => Err(format!("cannot count the subscribers ({e})")),
                },
            },
        };
        (group, outcome)
    }))
    .await;
    let mut failed = Vec::new();
    for (group, outcome) in outcomes {
        match outcome {
            Ok(()) => {
                for ch in &group {
                    ch.status.send_replace(Status::Ready);
                    ch.signal(true);
                }
            }
            Err(e) => {
                log::warn!(
                    "subscribing again to {} channel(s) failed ({e:#}); retrying",
                    group.len()
                );
                for ch in &group {
                    ch.status.send_if_modified(|s| {
                        let was_ready = *s == Status::Ready;
                        *s = Status::Pending;
                        was_ready
                    });
                }
                failed.extend(group);
            }
        }
    }
    failed
}

/// Queues a retry of failed re-subscriptions after `pause`.
fn retry_later(shared: &Shared, mut channels: Vec<Arc<Channel>>, pause: Duration) {
    // A channel already due for a retry keeps that one.
    channels.retain(|ch| !ch.retrying.swap(true, Ordering::AcqRel));
    if channels.is_empty() {
        return;
    }
    let ops = shared.ops.clone();
    drop(tokio::spawn(async move {
        tokio::time::sleep(pause).await;
        let _ = ops.send(Op::Retry { channels, pause });
    }));
}

/// SUBSCRIBE then PING (the barrier), then marks the channels ready or failed.
async fn subscribe_group(shared: &Shared, group: &[Arc<Channel>]) {
    let names: Vec<String> = group.iter().map(|c| c.name.to_string()).collect();
    // Refused outright for this user (ACL DRYRUN at connect): nothing is sent.
    if let Err(error) = shared
        .core
        .permissions()
        .check(crate::conn::permissions::Need::Listen, &names.join(", "))
    {
        for ch in group {
            ch.status
                .send_replace(Status::Failed(Box::new(error.clone())));
        }
        return;
    }
    // A check that could not be made fails this first subscription with its error (a waiting
    // acquisition retries a transient one) rather than subscribing blind.
    let refused = match refused_channel(shared, &names).await {
        Ok(None) => None,
        Ok(Some(refused)) => {
            log::warn!("this Redis user may not listen on {refused}");
            Some(refused_error(&refused))
        }
        Err(e) => Some(e),
    };
    if let Some(error) = refused {
        for ch in group {
            ch.status
                .send_replace(Status::Failed(Box::new(error.clone())));
        }
        return;
    }
    let result = subscribe_names(shared, names).await;
    let status = match result {
        Ok(()) => Status::Ready,
        Err(e) => {
            log::warn!("SUBSCRIBE failed: {e:#}");
            let channels: Vec<&str> = group.iter().map(|c| &*c.name).collect();
            let what = format!("subscribing to {}", channels.join(", "));
            Status::Failed(Box::new(subscribe_error(what, e)))
        }
    };
    settle(group, status);
}
