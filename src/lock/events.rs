//! Lock events: the deleted and expired events of a lock's key, from the server's keyspace
//! notifications (Redisson's `RLock.addListener` with `DeletedObjectListener` /
//! `ExpiredObjectListener`, 3.43+), through the one subscription registry.
//!
//! On a Redis Cluster a node publishes keyspace notifications only to its own clients, so the
//! registry subscribes the two key-event channels as node-local channels: a classic
//! subscription on every master, following the masters as they change (`service/pubsub/keyspace.rs`
//! explains why every master rather than each lock's slot owner). Every master's setting is
//! checked first.

use fred::types::Value;
use tokio::sync::broadcast::{error::RecvError, Receiver};

use super::{front::Lock, protocol::Kind};
use crate::{
    error::{Error, Result},
    service::pubsub::{keyspace::setting_suffices, Subscription},
};

/// One event of a lock's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LockEvent {
    /// The key was deleted: an unlock that freed the lock, a forced unlock, a `DEL` (the
    /// keyspace event `del`).
    Deleted,
    /// The key expired: its holder's lease (or watchdog timeout) ran out unrenewed (the
    /// keyspace event `expired`).
    Expired,
}

/// The events of one lock's key, from [`Lock::events`]. Dropping it unsubscribes (the last
/// listener of the client leaves the channels).
///
/// Events are what the server reports while this client is connected: an event during a
/// reconnect is not replayed (the subscription is made again at once). On a Redis Cluster they
/// come from whichever master owns the lock's slot, including a master that took the slot over
/// after the stream was opened (a promoted replica is listened to once the client has seen the
/// failover, within about a second). Around a topology change Redis itself reports a key moved
/// by a slot migration as deleted on its old master, and a demoted master may repeat a
/// deletion until the client has seen the change: an event is a hint to look, not a proof.
pub struct LockEvents {
    name: String,
    deleted: Receiver<Value>,
    expired: Receiver<Value>,
    subscriptions: [Subscription; 2],
}

impl std::fmt::Debug for LockEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockEvents")
            .field("lock", &self.name)
            .finish()
    }
}

/// The keyspace-event channels of database `db`: deletions and expirations.
fn channels(db: u8) -> [String; 2] {
    [
        format!("__keyevent@{db}__:del"),
        format!("__keyevent@{db}__:expired"),
    ]
}

fn payload_is(v: &Value, name: &str) -> bool {
    match v {
        Value::String(s) => &**s == name,
        Value::Bytes(b) => &b[..] == name.as_bytes(),
        _ => false,
    }
}

impl LockEvents {
    /// The next event of the lock's key; `None` once the client is shut down (or dropped).
    ///
    /// # Cancel safety
    /// Cancel safe: an event not returned because the future was dropped is returned by the
    /// next call.
    pub async fn next(&mut self) -> Option<LockEvent> {
        loop {
            let (got, event) = tokio::select! {
                got = self.deleted.recv() => (got, LockEvent::Deleted),
                got = self.expired.recv() => (got, LockEvent::Expired),
                () = self.subscriptions[0].shut_down() => return None,
            };
            match got {
                Ok(v) if payload_is(&v, &self.name) => {
                    let label = match event {
                        LockEvent::Deleted => "deleted",
                        LockEvent::Expired => "expired",
                    };
                    crate::observe::lock_event(&self.name, label);
                    return Some(event);
                }
                Ok(_) => {}
                Err(RecvError::Lagged(n)) => {
                    log::warn!(
                        "the events of lock {} fell {n} keyspace messages behind; some may be \
                         missed",
                        self.name
                    );
                }
                Err(RecvError::Closed) => return None,
            }
        }
    }
}

impl<K: Kind> Lock<K> {
    /// The deleted and expired events of this lock's key (Redisson's lock listeners), from
    /// the server's keyspace notifications: `__keyevent@<db>__:del` and
    /// `__keyevent@<db>__:expired`, filtered by the lock's raw name.
    ///
    /// The server's `notify-keyspace-events` is checked first: it must contain `E` with `g`
    /// and `x` (or `A`), as Redisson's listeners need. The subscription is made (and
    /// acknowledged by the server) before this returns, so every event after the return is
    /// seen.
    ///
    /// On a Redis Cluster, whose nodes publish keyspace notifications only to their own
    /// clients, the setting of every master is checked, and the client listens on every master
    /// (one subscription per master and channel, shared by all the client's streams, in every
    /// [`ShardedSubscriptionMode`](crate::ShardedSubscriptionMode): keyspace notifications are
    /// never sharded). Masters that join later (a promoted replica) are listened to as the
    /// client sees them; one whose setting lacks the flags is logged.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// use redisson_lock::LockEvent;
    /// let lock = client.get_lock("orders");
    /// let mut events = lock.events().await?;
    /// while let Some(event) = events.next().await {
    ///     if event == LockEvent::Expired {
    ///         eprintln!("a holder of orders let it expire");
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`EventsUnavailable`](Error::EventsUnavailable) when the setting lacks those flags (on
    /// a cluster: the setting of some master, named in the error);
    /// [`PermissionDenied`](Error::PermissionDenied) when this user may not read the setting
    /// (`CONFIG GET`) or listen; a Redis, connection or timeout error (on a cluster also when
    /// a master cannot be asked or subscribed on).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves no subscription behind.
    pub async fn events(&self) -> Result<LockEvents> {
        self.handle.check()?;
        let client = self.handle.client();
        let core = client.core();
        let name = self.raw_name().to_owned();
        let settings = core.keyspace_events_settings(&name).await?;
        if let Some((node, setting)) = settings.iter().find(|(_, s)| !setting_suffices(s)) {
            let whose = match node {
                Some(node) => format!("the notify-keyspace-events of cluster master {node}"),
                None => "the server's notify-keyspace-events".to_owned(),
            };
            return Err(Error::EventsUnavailable {
                lock: name,
                reason: format!(
                    "{whose} is {setting:?}; lock events need E with g and x (e.g. \"Egx\") \
                     or A"
                ),
            });
        }
        let [del, expired] = channels(core.database());
        let subscriptions = [
            client.pubsub().subscribe_node_local(&del),
            client.pubsub().subscribe_node_local(&expired),
        ];
        // Readers first, so nothing published once the subscription exists is missed.
        let deleted = subscriptions[0].payloads();
        let expired = subscriptions[1].payloads();
        let timeout = client.config().subscription_timeout;
        for s in &subscriptions {
            s.ready(timeout).await?;
        }
        crate::observe::lock_events_subscribed(&name);
        Ok(LockEvents {
            name,
            deleted,
            expired,
            subscriptions,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_locks_own_name_is_an_event_of_it() {
        assert!(payload_is(&Value::from("orders"), "orders"));
        assert!(payload_is(
            &Value::Bytes(b"orders".to_vec().into()),
            "orders"
        ));
        assert!(!payload_is(&Value::from("orders2"), "orders"));
        assert!(!payload_is(&Value::Integer(0), "orders"));
        assert_eq!(channels(3)[1], "__keyevent@3__:expired");
    }
}
