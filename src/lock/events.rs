//! Lock events: the deleted and expired events of a lock's key, from the server's keyspace
//! notifications (Redisson's `RLock.addListener` with `DeletedObjectListener` /
//! `ExpiredObjectListener`, 3.43+), through the one subscription registry.

use fred::types::Value;
use tokio::sync::broadcast::{error::RecvError, Receiver};

use super::{front::Lock, kind::Kind};
use crate::{
    error::{Error, Result},
    service::pubsub::Subscription,
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
/// reconnect is not replayed (the subscription is made again at once).
pub struct LockEvents {
    name: String,
    deleted: Receiver<Value>,
    expired: Receiver<Value>,
    _subscriptions: [Subscription; 2],
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

/// Whether a `notify-keyspace-events` setting publishes the `del` and `expired` key-event
/// messages: `E` (key-event channels) with `g` (generic commands, `del`) and `x` (expirations),
/// or `A` for all classes.
fn setting_suffices(setting: &str) -> bool {
    let has = |c| setting.contains(c);
    has('E') && (has('A') || (has('g') && has('x')))
}

fn payload_is(v: &Value, name: &str) -> bool {
    match v {
        Value::String(s) => &**s == name,
        Value::Bytes(b) => &b[..] == name.as_bytes(),
        _ => false,
    }
}

impl LockEvents {
    /// The next event of the lock's key; `None` once the client is shut down.
    ///
    /// # Cancel safety
    /// Cancel safe: an event not returned because the future was dropped is returned by the
    /// next call.
    pub async fn next(&mut self) -> Option<LockEvent> {
        loop {
            let (got, event) = tokio::select! {
                got = self.deleted.recv() => (got, LockEvent::Deleted),
                got = self.expired.recv() => (got, LockEvent::Expired),
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
    /// [`EventsUnavailable`](Error::EventsUnavailable) when the setting lacks those flags or
    /// the deployment is a Redis Cluster (its nodes publish keyspace notifications only to
    /// their own clients); [`PermissionDenied`](Error::PermissionDenied) when this user may
    /// not read the setting (`CONFIG GET`) or listen; a Redis, connection or timeout error.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves no subscription behind.
    pub async fn events(&self) -> Result<LockEvents> {
        self.handle.check()?;
        let client = self.handle.client();
        let core = client.core();
        let name = self.raw_name().to_owned();
        if core.is_clustered() {
            return Err(Error::EventsUnavailable {
                lock: name,
                reason: "on a Redis Cluster each node publishes keyspace notifications only to \
                         its own clients; lock events are not supported there yet"
                    .into(),
            });
        }
        let setting = core.keyspace_events_setting(&name).await?;
        if !setting_suffices(&setting) {
            return Err(Error::EventsUnavailable {
                lock: name,
                reason: format!(
                    "the server's notify-keyspace-events is {setting:?}; lock events need E \
                     with g and x (e.g. \"Egx\") or A"
                ),
            });
        }
        let [del, expired] = channels(core.database());
        let subscriptions = [
            client.pubsub().subscribe(&del),
            client.pubsub().subscribe(&expired),
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
            _subscriptions: subscriptions,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
