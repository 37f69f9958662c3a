//! The subscription registry: one subscriber connection per client, one subscription per channel
//! shared by every local waiter (reference counted), and a wake-up semaphore per channel ([`Wakeups`]; "latch" in this crate means the unlock-latch keys).
//!
//! * The first waiter on a channel asks for a subscription; the registry sends `SUBSCRIBE` and
//!   then `PING` on the subscriber connection. fred resolves `subscribe()` before the server has
//!   registered the channel; the `PING` reply comes after the `SUBSCRIBE` has been processed, so
//!   waiters retry their acquisition only once the subscription really exists.
//! * All subscribe/unsubscribe commands go through one task, in the order they were asked for, so
//!   an `UNSUBSCRIBE` from a departing last waiter can never overtake the `SUBSCRIBE` of a new one.
//! * How a message wakes is the channel's [`Reading`], fixed by its first subscriber: on a lock
//!   channel a message `0` adds one permit (wakes one waiter), `1` wakes every waiter; on a
//!   semaphore channel a message `v` wakes `v` waiters; on a count-down latch channel `0` wakes
//!   every waiter (and `1`, "closed", wakes nobody). Permits are capped at the number of waiters, so a burst of messages cannot turn into a busy
//!   loop. If the message stream lags (fred's broadcast channel overflowed) or the connection was
//!   re-established, every waiter is woken once: a spurious wake costs one script call, a lost
//!   one a whole TTL.
//! * After a reconnect (or a slot move), every live channel is subscribed again, per slot when
//!   messages are sharded; a channel whose re-subscription fails keeps its entry and wake-ups and
//!   is tried again with back-off until it succeeds or its last waiter leaves.
//! * A channel is [`Scope::Routed`] (the locks', semaphores' and latches' channels: subscribed
//!   the way the client's messaging says) or [`Scope::NodeLocal`] (keyspace notifications, which
//!   a node publishes only to its own clients). On a cluster a node-local channel is subscribed
//!   with a classic `SUBSCRIBE` on every master and follows the masters as they change
//!   (`keyspace.rs`); on one server both scopes are the same classic subscription.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use fred::{
    clients::SubscriberClient,
    error::Error as FredError,
    interfaces::{ClientLike, ClusterInterface, EventInterface, PubsubInterface},
    types::{config::Options, ClusterHash, Value},
};
use parking_lot::Mutex;
use tokio::sync::{broadcast::error::RecvError, mpsc, watch, Semaphore};

use super::keyspace;
use crate::{
    conn::{cluster::Messaging, core::Core},
    error::{Error, Result},
};

/// How the messages of a channel wake its waiters (protocol §3.2, sync protocol §1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reading {
    /// Lock channels: `0` wakes one waiter, `1` wakes them all.
    Lock,
    /// Semaphore channels (`redisson_sc:{N}`): a message `v` (the permits now available, or
    /// given back) wakes `min(v, waiters)` waiters; `v <= 0` wakes nobody.
    Permits,
    /// Count-down latch channels: `0` (the count reached zero) wakes every waiter; anything
    /// else (`1`: the count was set) wakes nobody.
    Opening,
}

impl Reading {
    /// How many waiters message `value` wakes: `None` for every one of them.
    fn wakes(self, value: i64) -> Option<u64> {
        match (self, value) {
            (Reading::Lock, 0) => Some(1),
            (Reading::Lock, 1) | (Reading::Opening, 0) => None,
            (Reading::Permits, v) if v > 0 => Some(v as u64),
            _ => Some(0),
        }
    }
}

/// Where a channel's messages are published, hence where it is subscribed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scope {
    /// Through the whole deployment (`PUBLISH` reaches every node of a cluster, `SPUBLISH` the
    /// slot's shard): lock, semaphore and latch channels, subscribed classic, sharded or both,
    /// as the client's messaging says.
    Routed,
    /// By each node to its own clients only: keyspace notifications. Always a classic
    /// subscription; on a cluster one on every master (`keyspace.rs`).
    NodeLocal,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Status {
    Pending,
    Ready,
    /// The (S)SUBSCRIBE or its barrier failed: the error a waiter gets (a refused channel is
    /// [`Error::PermissionDenied`], every time, for every waiter that joins the attempt).
    Failed(Error),
}

/// The wake-ups of one channel: a semaphore whose permits are capped at the number of waiters.
///
/// A message `0` adds one permit (wakes one waiter), `1` (or a lag, or a reconnect) tops the
/// permits up to the number of waiters (wakes them all). A waiter takes one permit per wake-up.
#[derive(Debug)]
pub(crate) struct Wakeups {
    waiters: AtomicUsize,
    permits: Semaphore,
}

impl Wakeups {
    pub(crate) fn new(waiters: usize) -> Self {
        Self {
            waiters: AtomicUsize::new(waiters),
            permits: Semaphore::new(0),
        }
    }

    fn join(&self) {
        self.waiters.fetch_add(1, Ordering::AcqRel);
    }

    /// One waiter leaves; returns how many are left.
    fn leave(&self) -> usize {
        self.waiters.fetch_sub(1, Ordering::AcqRel) - 1
    }

    pub(crate) fn waiters(&self) -> usize {
        self.waiters.load(Ordering::Acquire)
    }

    /// Message `0`: wake one waiter (unless every waiter already has a permit).
    pub(crate) fn wake_one(&self) {
        self.wake(1);
    }

    /// Wakes `n` waiters, never more than there are waiters without a permit.
    pub(crate) fn wake(&self, n: u64) {
        let missing = self
            .waiters()
            .saturating_sub(self.permits.available_permits());
        let add = usize::try_from(n).unwrap_or(usize::MAX).min(missing);
        if add > 0 {
            self.permits.add_permits(add);
        }
    }

    /// Message `1`, a lagged stream or a reconnect: wake every waiter.
    pub(crate) fn wake_all(&self) {
        let waiters = self.waiters();
        let available = self.permits.available_permits();
        if available < waiters {
            self.permits.add_permits(waiters - available);
        }
    }

    /// Sleeps until a wake-up or `max` passes (`None`: no bound). `true` when woken.
    pub(crate) async fn wait(&self, max: Option<Duration>) -> bool {
        let acquire = self.permits.acquire();
        let permit = match max {
            Some(d) => match tokio::time::timeout(d, acquire).await {
                Ok(p) => p,
                Err(_) => return false,
            },
            None => acquire.await,
        };
        match permit {
            Ok(p) => {
                p.forget();
                true
            }
            Err(_) => false,
        }
    }
}

/// One subscribed channel and its wake-ups.
struct Channel {
    name: String,
    reading: Reading,
    scope: Scope,
    /// Its first subscription succeeded: from then on re-subscriptions (a reconnect, a change of
    /// masters) are the registry's, not the first subscriber's operation.
    established: std::sync::atomic::AtomicBool,
    wakeups: Wakeups,
    status: watch::Sender<Status>,
    /// A retry of its failed re-subscription is scheduled (one at a time per channel).
    retrying: std::sync::atomic::AtomicBool,
    /// Messages (and wake-everyone events) seen on the channel so far: a waiter that must act on
    /// a message sent after some moment compares counts (see [`Subscription::messages`]).
    messages: AtomicU64,
    /// Every message's payload, for subscriptions that read them (keyspace events); sent only
    /// while someone listens.
    payloads: tokio::sync::broadcast::Sender<Value>,
}

impl Channel {
    /// Counts one message (or event), then wakes one waiter (`false`) or all of them.
    fn signal(&self, all: bool) {
        self.messages.fetch_add(1, Ordering::AcqRel);
        if all {
            self.wakeups.wake_all();
        } else {
            self.wakeups.wake_one();
        }
    }

    /// A message `value`: counted, then read as the channel's [`Reading`] says.
    fn message(&self, value: i64) {
        match self.reading.wakes(value) {
            None => self.signal(true),
            Some(0) => {
                self.messages.fetch_add(1, Ordering::AcqRel);
            }
            Some(n) => {
                self.messages.fetch_add(1, Ordering::AcqRel);
                self.wakeups.wake(n);
            }
        }
    }
}

enum Op {
    Subscribe(Arc<Channel>),
    Unsubscribe(Arc<Channel>),
    Resubscribe,
    /// Bring the node-local channels' subscriptions in line with the cluster's masters.
    FollowMasters,
    /// Re-subscribe channels whose re-subscription failed; `pause` was waited before.
    Retry {
        channels: Vec<Arc<Channel>>,
        pause: Duration,
    },
}

/// How many payloads a channel's payload readers may fall behind before they miss some.
pub(crate) const PAYLOADS: usize = 1024;

/// The first pause before a failed re-subscription is tried again; it doubles up to
/// [`RETRY_MAX`].
const RETRY_FIRST: Duration = Duration::from_millis(50);
/// The longest pause between tries of a failed re-subscription.
const RETRY_MAX: Duration = Duration::from_secs(2);

struct Shared {
    sub: SubscriberClient,
    channels: Mutex<HashMap<String, Arc<Channel>>>,
    ops: mpsc::UnboundedSender<Op>,
    messaging: Messaging,
    clustered: bool,
    core: Arc<Core>,
    /// The masters the node-local channels are subscribed on (a cluster only).
    masters: keyspace::Masters,
}

impl Shared {
    fn wake_everyone(&self) {
        let all: Vec<Arc<Channel>> = self.channels.lock().values().cloned().collect();
        for ch in all {
            ch.signal(true);
        }
    }

    /// `true` when `ch` is subscribed on every master rather than as the messaging says: a
    /// node-local channel on a cluster.
    fn on_every_master(&self, ch: &Channel) -> bool {
        self.clustered && ch.scope == Scope::NodeLocal
    }

    /// The node-local channels whose first subscription succeeded (those not yet established
    /// are their first subscriber's operation, queued).
    fn established_node_local(&self) -> Vec<Arc<Channel>> {
        self.channels
            .lock()
            .values()
            .filter(|c| self.on_every_master(c) && c.established.load(Ordering::Acquire))
            .cloned()
            .collect()
    }
}

/// The registry. Owned by the client; its tasks stop when the client shuts down.
pub(crate) struct PubSub {
    shared: Arc<Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl PubSub {
    /// Starts the registry's tasks on an initialised subscriber client, listening the way the
    /// core resolved (classic, sharded or both).
    pub(crate) fn start(sub: SubscriberClient, core: &Arc<Core>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            sub,
            channels: Mutex::new(HashMap::new()),
            ops: tx,
            messaging: core.messaging(),
            clustered: core.is_clustered(),
            core: core.clone(),
            masters: keyspace::Masters::default(),
        });
        let mut tasks = vec![
            tokio::spawn(run_ops(shared.clone(), rx)),
            tokio::spawn(run_messages(shared.clone())),
            tokio::spawn(run_reconnects(shared.clone())),
        ];
        // Sharded channels follow their slots' owners, node-local ones the masters.
        if shared.clustered {
            tasks.push(tokio::spawn(run_topology(
                shared.clone(),
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
        self.join(channel, reading, Scope::Routed)
    }

    /// Joins (or creates) the shared subscription of a node-local channel (keyspace
    /// notifications, read through [`Subscription::payloads`]): a classic subscription on every
    /// master of a cluster, the one subscription of a single server. Dropping the returned
    /// value leaves it; the last one out unsubscribes (on every master).
    pub(crate) fn subscribe_node_local(&self, channel: &str) -> Subscription {
        self.join(channel, Reading::Lock, Scope::NodeLocal)
    }

    fn join(&self, channel: &str, reading: Reading, scope: Scope) -> Subscription {
        let mut map = self.shared.channels.lock();
        if let Some(existing) = map.get(channel) {
            let failed = matches!(*existing.status.borrow(), Status::Failed(_));
            if !failed {
                existing.wakeups.join();
                return Subscription {
                    shared: self.shared.clone(),
                    channel: existing.clone(),
                };
            }
        }
        let (status, _) = watch::channel(Status::Pending);
        let entry = Arc::new(Channel {
            name: channel.to_owned(),
            reading,
            scope,
            established: Default::default(),
            wakeups: Wakeups::new(1),
            status,
            retrying: Default::default(),
            messages: AtomicU64::new(0),
            payloads: tokio::sync::broadcast::channel(PAYLOADS).0,
        });
        if map.insert(channel.to_owned(), entry.clone()).is_none() {
            crate::observe::subscriptions_changed(1);
        }
        // Sent under the map lock so the order of operations equals the order of decisions.
        let _ = self.shared.ops.send(Op::Subscribe(entry.clone()));
        Subscription {
            shared: self.shared.clone(),
            channel: entry,
        }
    }

    /// Number of channels with local waiters (each is exactly one server subscription).
    pub(crate) fn active_channels(&self) -> usize {
        self.shared.channels.lock().len()
    }

    /// Every channel with its number of local waiters (a snapshot).
    pub(crate) fn channel_waiters(&self) -> impl Iterator<Item = (String, usize)> {
        let map = self.shared.channels.lock();
        let all: Vec<(String, usize)> = map
            .iter()
            .map(|(name, c)| (name.clone(), c.wakeups.waiters()))
            .collect();
        all.into_iter()
    }

    pub(crate) async fn shutdown(&self) {
        for t in &self.tasks {
            t.abort();
        }
        let _ = self.shared.sub.quit().await;
    }
}

impl Drop for PubSub {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A waiter's share of a channel subscription.
pub(crate) struct Subscription {
    shared: Arc<Shared>,
    channel: Arc<Channel>,
}

impl Subscription {
    /// Waits until the server has registered the subscription (SUBSCRIBE + PING answered).
    pub(crate) async fn ready(&self, timeout: Duration) -> Result<()> {
        let mut rx = self.channel.status.subscribe();
        let waited = tokio::time::timeout(timeout, async {
            rx.wait_for(|s| *s != Status::Pending)
                .await
                .map(|s| s.clone())
        })
        .await;
        match waited {
            Err(_) => Err(Error::Timeout(
                format!(
                    "subscription to {} not established within {timeout:?}",
                    self.channel.name
                )
                .into(),
            )),
            Ok(Err(_)) => Err(Error::Shutdown),
            Ok(Ok(status)) => match status {
                Status::Ready => Ok(()),
                Status::Failed(e) => Err(e),
                Status::Pending => unreachable!("wait_for returned a pending status"),
            },
        }
    }

    /// Sleeps until a message wakes this waiter or `max` passes (`None`: no bound).
    /// Returns `true` when woken by a message.
    pub(crate) async fn wait(&self, max: Option<Duration>) -> bool {
        self.channel.wakeups.wait(max).await
    }

    /// The payloads of the messages on this channel from now on (for channels whose messages
    /// are not wake-ups: keyspace events). A reader slower than [`PAYLOADS`] messages behind
    /// is told how many it missed.
    pub(crate) fn payloads(&self) -> tokio::sync::broadcast::Receiver<Value> {
        self.channel.payloads.subscribe()
    }

    /// How many messages (and wake-everyone events: a lag, a reconnect) the channel has seen
    /// since this client subscribed to it. Every waiter of the channel sees the same count.
    pub(crate) fn messages(&self) -> u64 {
        self.channel.messages.load(Ordering::Acquire)
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut map = self.shared.channels.lock();
        let left = self.channel.wakeups.leave();
        if left == 0 {
            let current = map
                .get(&self.channel.name)
                .is_some_and(|c| Arc::ptr_eq(c, &self.channel));
            if current {
                map.remove(&self.channel.name);
                crate::observe::subscriptions_changed(-1);
                let _ = self.shared.ops.send(Op::Unsubscribe(self.channel.clone()));
            }
        }
    }
}

/// Sends subscribe/unsubscribe commands in order, batching runs of the same kind.
async fn run_ops(shared: Arc<Shared>, mut rx: mpsc::UnboundedReceiver<Op>) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while let Ok(op) = rx.try_recv() {
            batch.push(op);
        }
        let mut i = 0;
        while i < batch.len() {
            match &batch[i] {
                Op::Subscribe(_) => {
                    let mut group = Vec::new();
                    while let Some(Op::Subscribe(ch)) = batch.get(i) {
                        group.push(ch.clone());
                        i += 1;
                    }
                    let (everywhere, routed): (Vec<_>, Vec<_>) =
                        group.into_iter().partition(|c| shared.on_every_master(c));
                    if !routed.is_empty() {
                        subscribe_group(&shared, &routed).await;
                    }
                    if !everywhere.is_empty() {
                        subscribe_on_every_master(&shared, &everywhere).await;
                    }
                }
                Op::Unsubscribe(_) => {
                    let mut group = Vec::new();
                    while let Some(Op::Unsubscribe(ch)) = batch.get(i) {
                        group.push(ch.clone());
                        i += 1;
                    }
                    let (everywhere, routed): (Vec<_>, Vec<_>) =
                        group.into_iter().partition(|c| shared.on_every_master(c));
                    if !routed.is_empty() {
                        let names = routed.iter().map(|c| c.name.clone()).collect();
                        if let Err(e) = unsubscribe_names(&shared, names).await {
                            log::warn!("UNSUBSCRIBE failed: {e}");
                        }
                    }
                    if !everywhere.is_empty() {
                        let names = everywhere.iter().map(|c| c.name.clone()).collect();
                        unsubscribe_on_every_master(&shared, names).await;
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
                        follow_masters(&shared, shared.established_node_local(), true).await;
                    }
                    shared.wake_everyone();
                }
                Op::FollowMasters => {
                    i += 1;
                    follow_masters(&shared, shared.established_node_local(), false).await;
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
                            .filter(|c| map.get(&c.name).is_some_and(|m| Arc::ptr_eq(m, c)))
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

/// The first channel this user may not listen on (asked with a script on the command
/// connection: on a subscriber connection a refused SUBSCRIBE's error reply is not tied to the
/// command that caused it). `None` when all are allowed or the server cannot tell.
async fn refused_channel(shared: &Shared, names: &[String]) -> Option<String> {
    let mut commands = Vec::new();
    if shared.messaging.classic {
        commands.push("subscribe");
    }
    if shared.messaging.sharded {
        commands.push("ssubscribe");
    }
    refused_for(shared, names, &commands).await
}

/// The first of `names` this user may not listen on with any of `commands` (`subscribe`,
/// `ssubscribe`); see [`refused_channel`].
async fn refused_for(shared: &Shared, names: &[String], commands: &[&str]) -> Option<String> {
    for &command in commands {
        let mut args = vec![Value::from(command)];
        args.extend(names.iter().map(|n| Value::from(n.as_str())));
        let call = crate::conn::scripts::ScriptCall::new(
            crate::conn::scripts::ScriptId::CanSubscribe,
            vec![],
            args,
        );
        match shared.core.run(call, "").await.map(|v| v.as_i64()) {
            Ok(Some(i)) if i > 0 => return names.get(i as usize - 1).cloned(),
            Ok(_) => {}
            Err(e) => log::debug!("cannot ask the server for channel permissions: {e}"),
        }
    }
    None
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
                log::debug!("sharded (un)subscribe failed ({e}); re-reading the cluster");
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
        let names: Vec<String> = group.iter().map(|c| c.name.clone()).collect();
        // A refused SUBSCRIBE's error reply is not reliably tied to it on the subscriber
        // connection: asked first on the command connection, as for a first subscription
        // (not on a cluster, where that script runs on any node, not the shard's).
        let refused = match shared.clustered {
            false => refused_channel(shared, &names).await,
            true => None,
        };
        let outcome = match refused {
            Some(refused) => Err(format!("this Redis user may not listen on {refused}")),
            None => subscribe_names(shared, names)
                .await
                .map_err(|e| e.to_string()),
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
                    "subscribing again to {} channel(s) failed ({e}); retrying",
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
    let names: Vec<String> = group.iter().map(|c| c.name.clone()).collect();
    // Refused outright for this user (ACL DRYRUN at connect): nothing is sent.
    if let Err(error) = shared
        .core
        .permissions()
        .check(crate::conn::permissions::Need::Listen, &names.join(", "))
    {
        for ch in group {
            ch.status.send_replace(Status::Failed(error.clone()));
        }
        return;
    }
    if let Some(refused) = refused_channel(shared, &names).await {
        log::warn!("this Redis user may not listen on {refused}");
        let error = Error::PermissionDenied(
            format!("subscribing to {refused}: this Redis user has no permission for the channel")
                .into(),
        );
        for ch in group {
            ch.status.send_replace(Status::Failed(error.clone()));
        }
        return;
    }
    let result = subscribe_names(shared, names).await;
    let status = match result {
        Ok(()) => Status::Ready,
        Err(e) => {
            log::warn!("SUBSCRIBE failed: {e}");
            let channels: Vec<&str> = group.iter().map(|c| c.name.as_str()).collect();
            let what = format!("subscribing to {}: {}", channels.join(", "), e.details());
            Status::Failed(subscribe_error(what, e))
        }
    };
    settle(group, status);
}

/// The error a failed (S)SUBSCRIBE gives its waiters, described by `what`.
fn subscribe_error(what: String, e: FredError) -> Error {
    match Error::from_redis(e.clone(), "") {
        Error::PermissionDenied(_) => {
            Error::PermissionDenied(crate::error::Failure::with_source(what, e))
        }
        Error::Timeout(_) => Error::Timeout(crate::error::Failure::with_source(what, e)),
        Error::Redis(_) => Error::Redis(crate::error::Failure::with_source(what, e)),
        _ => Error::Connection(crate::error::Failure::with_source(what, e)),
    }
}

/// The outcome of a first subscription, for every channel of `group`.
fn settle(group: &[Arc<Channel>], status: Status) {
    for ch in group {
        if status == Status::Ready {
            ch.established.store(true, Ordering::Release);
        }
        ch.status.send_replace(status.clone());
    }
}

/// The first subscription of node-local channels on a cluster: a classic `SUBSCRIBE` and its
/// barrier on every master at once (whatever the sharded mode: keyspace notifications are never
/// sharded). Ready once every master has it; failed, naming a master that did not take it,
/// otherwise.
async fn subscribe_on_every_master(shared: &Shared, group: &[Arc<Channel>]) {
    let names: Vec<String> = group.iter().map(|c| c.name.clone()).collect();
    // The connect-time probe asked about SUBSCRIBE only when messages are classic.
    if shared.messaging.classic {
        if let Err(error) = shared
            .core
            .permissions()
            .check(crate::conn::permissions::Need::Listen, &names.join(", "))
        {
            return settle(group, Status::Failed(error));
        }
    }
    if let Some(refused) = refused_for(shared, &names, &["subscribe"]).await {
        log::warn!("this Redis user may not listen on {refused}");
        let error = Error::PermissionDenied(
            format!("subscribing to {refused}: this Redis user has no permission for the channel")
                .into(),
        );
        return settle(group, Status::Failed(error));
    }
    let masters = keyspace::current(&shared.sub);
    if masters.is_empty() {
        let error = Error::Connection("the cluster's masters are not known yet".into());
        return settle(group, Status::Failed(error));
    }
    let names = &names;
    let outcomes = futures::future::join_all(
        masters
            .iter()
            .map(|m| async move { (m, keyspace::subscribe_on(&shared.sub, m, names).await) }),
    )
    .await;
    let failure = outcomes
        .into_iter()
        .find_map(|(m, outcome)| outcome.err().map(|e| (m, e)));
    let status = match failure {
        None => {
            // The first node-local channels: the masters they are on are the registry's set
            // (with channels already live, the next topology check compares and follows).
            if shared.masters.get().is_empty() {
                shared.masters.set(masters.clone());
            }
            Status::Ready
        }
        Some((master, e)) => {
            log::warn!("SUBSCRIBE on cluster master {master} failed: {e}");
            let what = format!(
                "subscribing to {} on cluster master {master}: {}",
                names.join(", "),
                e.details()
            );
            Status::Failed(subscribe_error(what, e))
        }
    };
    settle(group, status);
}

/// Leaves node-local channels on every master (of the registry's set and of the slot table; a
/// failure only logged: the server forgets a subscription with its connection anyway).
async fn unsubscribe_on_every_master(shared: &Shared, names: Vec<String>) {
    let names = &names;
    let masters = keyspace::current(&shared.sub);
    let outcomes = futures::future::join_all(
        masters
            .iter()
            .map(|m| async move { (m, keyspace::unsubscribe_on(&shared.sub, m, names).await) }),
    )
    .await;
    for (master, outcome) in outcomes {
        if let Err(e) = outcome {
            log::debug!("UNSUBSCRIBE on cluster master {master} failed: {e}");
        }
    }
    let any_left = shared
        .channels
        .lock()
        .values()
        .any(|c| shared.on_every_master(c));
    if !any_left {
        shared.masters.set(Vec::new());
    }
}

/// Brings the established node-local `channels` in line with the cluster's masters
/// (`keyspace::plan`): subscribes them on each new master (on every master when `again`, after
/// a reconnect), forgets the nodes that are no longer masters. The masters at once; while one
/// fails the channels are pending (a new listener waits for them) and the next topology check,
/// finding them pending, tries again; they are ready again once every master of the moment has
/// them.
async fn follow_masters(shared: &Shared, channels: Vec<Arc<Channel>>, again: bool) {
    if channels.is_empty() {
        return;
    }
    let names: Vec<String> = channels.iter().map(|c| c.name.clone()).collect();
    let names = &names;
    let before = shared.masters.get();
    let plan = keyspace::plan(&before, &keyspace::current(&shared.sub), again);
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
            .map(|m| async move { (m, keyspace::subscribe_on(&shared.sub, m, names).await) }),
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
                        keyspace::check_joined(&core, &master).await;
                    }));
                }
                subscribed.push(master.clone());
            }
            Err(e) => failed.push(format!("{master}: {e}")),
        }
    }
    shared.masters.set(subscribed);
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

/// Reads messages and signals the channels' wake-ups. fred hands messages of keyspace-event
/// channels (`__keyevent@<db>__:<event>`) to a stream of their own: they go to their channel's
/// payload readers (the key is the payload).
async fn run_messages(shared: Arc<Shared>) {
    let mut rx = shared.sub.message_rx();
    let mut keyspace = shared.sub.keyspace_event_rx();
    loop {
        let received = tokio::select! {
            m = rx.recv() => m,
            event = keyspace.recv() => {
                match event {
                    Ok(e) => {
                        let name = format!("__keyevent@{}__:{}", e.db, e.operation);
                        let channel = shared.channels.lock().get(&name).cloned();
                        if let Some(channel) = channel {
                            let key = Value::Bytes(e.key.as_bytes().to_vec().into());
                            let _ = channel.payloads.send(key);
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
                if channel.payloads.receiver_count() > 0 {
                    let _ = channel.payloads.send(msg.value.clone());
                }
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
fn slot_owners(sub: &SubscriberClient) -> Vec<(u16, u16, String)> {
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
async fn run_topology(shared: Arc<Shared>, commands: fred::clients::Client) {
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
            (
                shared.messaging.sharded && map.values().any(|c| c.scope == Scope::Routed),
                map.values().any(|c| c.scope == Scope::NodeLocal),
            )
        };
        if !sharded && !node_local {
            continue;
        }
        if let Err(e) = shared.sub.sync_cluster().await {
            log::debug!("cannot re-read the cluster slots: {e}");
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
            if short || keyspace::current(&shared.sub) != shared.masters.get() {
                let _ = shared.ops.send(Op::FollowMasters);
            }
        }
    }
}

/// After every reconnect: subscribe every live channel again and wake every waiter.
async fn run_reconnects(shared: Arc<Shared>) {
    let mut rx = shared.sub.reconnect_rx();
    while let Ok(_) | Err(RecvError::Lagged(_)) = rx.recv().await {
        let _ = shared.ops.send(Op::Resubscribe);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn permits_are_capped_at_the_number_of_waiters() {
        let wakeups = Wakeups::new(2);
        for _ in 0..10 {
            wakeups.wake_one();
        }
        assert_eq!(
            wakeups.permits.available_permits(),
            2,
            "a burst wakes at most everyone"
        );
        wakeups.wake_all();
        assert_eq!(wakeups.permits.available_permits(), 2);
        assert!(wakeups.wait(Some(Duration::ZERO)).await);
        assert!(wakeups.wait(Some(Duration::ZERO)).await);
        assert!(
            !wakeups.wait(Some(Duration::from_millis(5))).await,
            "no permit left"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn message_zero_wakes_one_waiter_and_one_wakes_all() {
        let wakeups = Arc::new(Wakeups::new(3));
        let sleepers: Vec<_> = (0..3)
            .map(|_| {
                let l = wakeups.clone();
                tokio::spawn(async move { l.wait(Some(Duration::from_secs(60))).await })
            })
            .collect();
        tokio::task::yield_now().await;
        wakeups.wake_one();
        tokio::time::sleep(Duration::from_millis(1)).await;
        let woken = sleepers.iter().filter(|s| s.is_finished()).count();
        assert_eq!(woken, 1, "message 0 wakes exactly one waiter");
        wakeups.wake_all();
        for s in sleepers {
            assert!(tokio::time::timeout(Duration::from_millis(1), s)
                .await
                .expect("woken by message 1")
                .unwrap());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_without_a_message_sleeps_its_whole_bound() {
        let wakeups = Wakeups::new(1);
        let start = tokio::time::Instant::now();
        assert!(!wakeups.wait(Some(Duration::from_millis(250))).await);
        assert_eq!(start.elapsed(), Duration::from_millis(250));
    }

    #[test]
    fn each_reading_wakes_as_its_object_does() {
        assert_eq!(Reading::Lock.wakes(0), Some(1));
        assert_eq!(Reading::Lock.wakes(1), None);
        assert_eq!(Reading::Lock.wakes(7), Some(0));
        assert_eq!(Reading::Permits.wakes(3), Some(3));
        assert_eq!(Reading::Permits.wakes(1), Some(1));
        assert_eq!(Reading::Permits.wakes(0), Some(0));
        assert_eq!(Reading::Permits.wakes(-2), Some(0));
        assert_eq!(Reading::Opening.wakes(0), None);
        assert_eq!(Reading::Opening.wakes(1), Some(0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_permits_message_wakes_as_many_waiters_as_it_names_capped_at_the_waiters() {
        let wakeups = Wakeups::new(4);
        wakeups.wake(3);
        assert_eq!(wakeups.permits.available_permits(), 3);
        wakeups.wake(3);
        assert_eq!(
            wakeups.permits.available_permits(),
            4,
            "capped at the waiters"
        );
        wakeups.wake(u64::MAX);
        assert_eq!(wakeups.permits.available_permits(), 4);
    }

    #[test]
    fn leaving_counts_down_and_caps_follow_the_waiters() {
        let wakeups = Wakeups::new(1);
        wakeups.join();
        assert_eq!(wakeups.waiters(), 2);
        assert_eq!(wakeups.leave(), 1);
        wakeups.wake_all();
        wakeups.wake_all();
        assert_eq!(wakeups.permits.available_permits(), 1);
    }
}
