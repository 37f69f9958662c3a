//! The registry's state: one entry per channel with local waiters ([`Channel`]: its wake-ups,
//! its status, its message count and payloads), shared by every local waiter of it through a
//! reference-counted [`Subscription`] (the last one out unsubscribes), and the queue of
//! operations for the command task ([`Op`]).
//!
//! A channel is [`Scope::Routed`] (the locks', semaphores' and count-down latches' channels:
//! subscribed the way the client's messaging says) or [`Scope::NodeLocal`] (keyspace
//! notifications, which a node publishes only to its own clients; on a cluster subscribed on
//! every master, `keyspace.rs`).

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use fred::{clients::Client as FredClient, error::Error as FredError, types::Value};
use parking_lot::{Mutex, MutexGuard};
use tokio::sync::{mpsc, Notify};

use super::wakeups::{Reading, Wakeups};
use crate::{
    conn::{cluster::Messaging, core::Core},
    error::{Error, Result},
    types::table::{Keyed, Table},
};

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

/// Where a channel's subscription stands (its waiters wait for it to leave `Pending`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Status {
    Pending,
    Ready,
    /// The (S)SUBSCRIBE or its barrier failed: the error a waiter gets (a refused channel is
    /// [`Error::PermissionDenied`], every time, for every waiter that joins the attempt). Boxed:
    /// every channel keeps a status, few a failure.
    Failed(Box<Error>),
}

/// A channel's [`Status`], and the wake-up of those waiting for it to settle: a watch channel's
/// shape, kept in the channel itself (tokio's watch channel puts eight `Notify`s on the heap
/// per channel, more than the rest of a waiter's share of its subscription).
pub(super) struct StatusCell {
    status: Mutex<Status>,
    changed: Notify,
}

impl StatusCell {
    fn new(status: Status) -> Self {
        Self {
            status: Mutex::new(status),
            changed: Notify::new(),
        }
    }

    /// The status now (held locked while the guard lives: look, do not wait).
    pub(super) fn borrow(&self) -> MutexGuard<'_, Status> {
        self.status.lock()
    }

    /// Sets the status and wakes those waiting for it.
    pub(super) fn send_replace(&self, status: Status) {
        *self.status.lock() = status;
        self.changed.notify_waiters();
    }

    /// Changes the status with `change`; those waiting are woken when it says it changed it.
    pub(super) fn send_if_modified(&self, change: impl FnOnce(&mut Status) -> bool) {
        let changed = change(&mut self.status.lock());
        if changed {
            self.changed.notify_waiters();
        }
    }

    /// Waits until the status is no longer [`Status::Pending`], and returns it.
    async fn settled(&self) -> Status {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let status = self.status.lock();
                if *status != Status::Pending {
                    return status.clone();
                }
            }
            changed.await;
        }
    }
}

/// One subscribed channel and its wake-ups.
pub(super) struct Channel {
    /// The channel's name (the registry's key for it).
    pub(super) name: Arc<str>,
    pub(super) reading: Reading,
    pub(super) scope: Scope,
    /// Its first subscription succeeded: from then on re-subscriptions (a reconnect, a change of
    /// masters) are the registry's, not the first subscriber's operation.
    pub(super) established: std::sync::atomic::AtomicBool,
    pub(super) wakeups: Wakeups,
    pub(super) status: StatusCell,
    /// A retry of its failed re-subscription is scheduled (one at a time per channel).
    pub(super) retrying: std::sync::atomic::AtomicBool,
    /// Messages (and wake-everyone events) seen on the channel so far: a waiter that must act on
    /// a message sent after some moment compares counts (see [`Subscription::messages`]).
    pub(super) messages: AtomicU64,
    /// Every message's payload, for subscriptions that read them (keyspace events, an
    /// election's unlock messages); made by the first reader ([`Subscription::payloads`]), so a
    /// channel nobody reads payloads of (a lock's waiters) carries no buffer, and sent only
    /// while someone listens.
    payloads: std::sync::OnceLock<tokio::sync::broadcast::Sender<Value>>,
}

impl Keyed for Channel {
    type Key<'a> = &'a str;

    fn key(&self) -> &str {
        &self.name
    }

    fn has_key(&self, key: &str) -> bool {
        *self.name == *key
    }
}

impl Channel {
    /// Hands a message's payload to the channel's payload readers, if it has any.
    pub(super) fn payload(&self, value: impl FnOnce() -> Value) {
        if let Some(readers) = self.payloads.get().filter(|r| r.receiver_count() > 0) {
            let _ = readers.send(value());
        }
    }

    /// Counts one message (or event), then wakes one waiter (`false`) or all of them.
    pub(super) fn signal(&self, all: bool) {
        self.messages.fetch_add(1, Ordering::AcqRel);
        if all {
            self.wakeups.wake_all();
        } else {
            self.wakeups.wake_one();
        }
    }

    /// A message `value`: counted, then read as the channel's [`Reading`] says.
    pub(super) fn message(&self, value: i64) {
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

pub(super) enum Op {
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
const PAYLOADS: usize = 1024;

/// What the registry's tasks and its subscriptions share.
pub(super) struct Shared {
    pub(super) sub: FredClient,
    /// `true` once the client is shut down: the streams over subscriptions (lock events, a
    /// leader watch) end then, rather than wait on channels that will never carry anything.
    pub(super) closed: tokio::sync::watch::Sender<bool>,
    pub(super) channels: Mutex<Table<Channel>>,
    pub(super) ops: mpsc::UnboundedSender<Op>,
    pub(super) messaging: Messaging,
    pub(super) clustered: bool,
    pub(super) core: Arc<Core>,
}

impl Shared {
    pub(super) fn wake_everyone(&self) {
        let all: Vec<Arc<Channel>> = self.channels.lock().values().cloned().collect();
        for ch in all {
            ch.signal(true);
        }
    }

    /// `true` when `ch` is subscribed on every master rather than as the messaging says: a
    /// node-local channel on a cluster.
    pub(super) fn on_every_master(&self, ch: &Channel) -> bool {
        self.clustered && ch.scope == Scope::NodeLocal
    }

    /// The node-local channels whose first subscription succeeded (those not yet established
    /// are their first subscriber's operation, queued).
    pub(super) fn established_node_local(&self) -> Vec<Arc<Channel>> {
        self.channels
            .lock()
            .values()
            .filter(|c| self.on_every_master(c) && c.established.load(Ordering::Acquire))
            .cloned()
            .collect()
    }

    /// Joins (or creates) the shared subscription of `channel`; a new one is queued for the
    /// command task (under the map lock, so the order of operations is the order of decisions).
    pub(super) fn join(
        self: &Arc<Self>,
        channel: &str,
        reading: Reading,
        scope: Scope,
    ) -> Subscription {
        self.join_named(channel, || channel.into(), reading, scope)
    }

    /// [`join`](Self::join) with the channel's name already shared: a new entry keeps that
    /// name rather than a copy.
    pub(super) fn join_shared(
        self: &Arc<Self>,
        channel: &Arc<str>,
        reading: Reading,
        scope: Scope,
    ) -> Subscription {
        self.join_named(channel, || channel.clone(), reading, scope)
    }

    fn join_named(
        self: &Arc<Self>,
        channel: &str,
        name: impl FnOnce() -> Arc<str>,
        reading: Reading,
        scope: Scope,
    ) -> Subscription {
        let mut map = self.channels.lock();
        if let Some(existing) = map.get(channel) {
            let failed = matches!(*existing.status.borrow(), Status::Failed(_));
            if !failed {
                existing.wakeups.join();
                return Subscription {
                    shared: self.clone(),
                    channel: existing.clone(),
                };
            }
        }
        let entry = Arc::new(Channel {
            name: name(),
            reading,
            scope,
            established: Default::default(),
            wakeups: Wakeups::new(1),
            status: StatusCell::new(Status::Pending),
            retrying: Default::default(),
            messages: AtomicU64::new(0),
            payloads: std::sync::OnceLock::new(),
        });
        if map.replace(entry.clone()).is_none() {
            crate::observe::subscriptions_changed(1);
        }
        // Sent under the map lock so the order of operations equals the order of decisions.
        let _ = self.ops.send(Op::Subscribe(entry.clone()));
        Subscription {
            shared: self.clone(),
            channel: entry,
        }
    }
}

/// A waiter's share of a channel subscription.
pub(crate) struct Subscription {
    shared: Arc<Shared>,
    channel: Arc<Channel>,
}

impl Subscription {
    /// `true` once the server has registered the subscription (see [`ready`](Self::ready)).
    pub(crate) fn is_ready(&self) -> bool {
        *self.channel.status.borrow() == Status::Ready
    }

    /// Waits until the server has registered the subscription (SUBSCRIBE + PING answered).
    ///
    /// The timeout runs from this call (not from the first poll).
    pub(crate) fn ready(
        &self,
        timeout: Duration,
    ) -> impl std::future::Future<Output = Result<()>> + Send + '_ {
        use futures::FutureExt;
        let settled = tokio::time::timeout(timeout, self.channel.status.settled());
        settled.map(move |status| match status {
            Err(_) => Err(Error::Timeout(
                format!(
                    "subscription to {} not established within {timeout:?}",
                    self.channel.name
                )
                .into(),
            )),
            Ok(Status::Ready) => Ok(()),
            Ok(Status::Failed(e)) => Err(*e),
            Ok(Status::Pending) => unreachable!("settled returned a pending status"),
        })
    }

    /// Sleeps until a message wakes this waiter or `max` passes (`None`: no bound).
    /// Returns `true` when woken by a message.
    pub(crate) fn wait(
        &self,
        max: Option<Duration>,
    ) -> impl std::future::Future<Output = bool> + Send + '_ {
        self.channel.wakeups.wait(max)
    }

    /// The payloads of the messages on this channel from now on (for channels whose messages
    /// are not wake-ups: keyspace events). A reader slower than [`PAYLOADS`] messages behind
    /// is told how many it missed.
    pub(crate) fn payloads(&self) -> tokio::sync::broadcast::Receiver<Value> {
        self.channel
            .payloads
            .get_or_init(|| tokio::sync::broadcast::channel(PAYLOADS).0)
            .subscribe()
    }

    /// Resolves once the client is shut down (at once if it already is).
    pub(crate) async fn shut_down(&self) {
        let mut closed = self.shared.closed.subscribe();
        // An error: the sender is gone with the registry, which is as shut down.
        let _ = closed.wait_for(|closed| *closed).await;
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
        if left > 0 && self.channel.reading == Reading::OwnLock {
            // The others are the same owner's acquisitions: see `Reading::OwnLock`.
            self.channel.wakeups.wake_all();
        }
        // The last one out of the channel's current entry (a failed one replaced meanwhile
        // is no longer in the table: removing it removes nothing).
        if left == 0 && map.remove(&self.channel) {
            crate::observe::subscriptions_changed(-1);
            let _ = self.shared.ops.send(Op::Unsubscribe(self.channel.clone()));
        }
    }
}

/// The first of `names` this user may not listen on with any of `commands` (`subscribe`,
/// `ssubscribe`); see [`refused_channel`](super::ops). `Ok(None)` when all are allowed (or the
/// server is too old to tell: Redis < 7 has no `redis.acl_check_cmd`); an error when the server
/// could not be asked (the caller must then not subscribe blind: a refused `SUBSCRIBE` whose
/// error reply arrives before the barrier is written is dropped by fred, and the channel would
/// be taken for subscribed while nothing listens).
pub(super) async fn refused_for(
    shared: &Shared,
    names: &[String],
    commands: &[&str],
) -> Result<Option<String>> {
    for &command in commands {
        let mut args = vec![Value::from(command)];
        args.extend(names.iter().map(|n| Value::from(n.as_str())));
        let call = crate::conn::scripts::ScriptCall::new(
            crate::conn::scripts::ScriptId::CanSubscribe,
            vec![],
            args,
        );
        match shared.core.run(call, "").await.map(|v| v.as_i64()) {
            Ok(Some(i)) if i > 0 => return Ok(names.get(i as usize - 1).cloned()),
            Ok(_) => {}
            Err(e) => {
                log::debug!("cannot ask the server for channel permissions: {e:#}");
                return Err(e);
            }
        }
    }
    Ok(None)
}

/// The error a refused channel gives its waiters.
pub(super) fn refused_error(refused: &str) -> Error {
    Error::PermissionDenied(
        format!("subscribing to {refused}: this Redis user has no permission for the channel")
            .into(),
    )
}

/// The error a failed (S)SUBSCRIBE gives its waiters, described by `what`.
pub(super) fn subscribe_error(what: String, e: FredError) -> Error {
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
pub(super) fn settle(group: &[Arc<Channel>], status: Status) {
    for ch in group {
        if status == Status::Ready {
            ch.established.store(true, Ordering::Release);
        }
        ch.status.send_replace(status.clone());
    }
}
