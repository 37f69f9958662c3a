//! The reentrant lock (Redisson `RLock`, protocol §4).

use std::sync::Arc;

use fred::types::{Key, Value};
use futures::future::BoxFuture;

use super::{
    engine::{flag_script, int_script, ttl_script, LockKind, Reply, Waiting},
    handle::{lock_type, LockHandle},
};
use crate::{
    client::{Client, Core},
    error::Result,
    names,
    owner::Owner,
    scripts::ScriptId,
};

/// The publish command passed to the scripts (standalone and Sentinel deployments).
pub(crate) const PUBLISH: &str = "publish";

/// The reentrant lock as the engine sees it: name, channel, scripts.
pub(crate) struct Reentrant {
    pub(crate) name: String,
    pub(crate) key: Key,
    pub(crate) channel: String,
}

impl Reentrant {
    pub(crate) fn new(raw_name: String) -> Self {
        Self {
            key: Key::from(raw_name.as_str()),
            channel: names::lock_channel(&raw_name),
            name: raw_name,
        }
    }

    /// L-ACQ: `KEYS=[N]`, `ARGV=[leaseMs, F]`.
    pub(crate) fn acquire_script(
        &self,
        core: Arc<Core>,
        field: Arc<str>,
        lease_ms: u64,
    ) -> BoxFuture<'static, Result<Reply>> {
        let keys = vec![self.key.clone()];
        let args = vec![Value::from(lease_ms as i64), Value::from(&*field)];
        ttl_script(core, ScriptId::Acquire, &self.name, keys, args)
    }
}

impl LockKind for Reentrant {
    fn raw_name(&self) -> &str {
        &self.name
    }

    fn waiting(&self, _field: &str) -> Waiting {
        Waiting::Channel(self.channel.clone())
    }

    fn attempt(
        &self,
        core: Arc<Core>,
        field: Arc<str>,
        lease_ms: u64,
        _queue_ms: Option<u64>,
    ) -> BoxFuture<'static, Result<Reply>> {
        self.acquire_script(core, field, lease_ms)
    }

    fn release(
        &self,
        core: Arc<Core>,
        field: Arc<str>,
        lease_ms: u64,
        request_id: Arc<str>,
    ) -> BoxFuture<'static, Result<Option<i64>>> {
        let keys = vec![
            self.key.clone(),
            Key::from(self.channel.as_str()),
            Key::from(names::unlock_latch(&self.name, &request_id)),
        ];
        let args = vec![
            Value::from("0"),
            Value::from(lease_ms as i64),
            Value::from(&*field),
            Value::from(PUBLISH),
            Value::from(core.config.latch_px_ms() as i64),
        ];
        int_script(core, ScriptId::Release, &self.name, keys, args)
    }

    fn force_unlock(&self, core: Arc<Core>) -> BoxFuture<'static, Result<bool>> {
        let keys = vec![self.key.clone(), Key::from(self.channel.as_str())];
        let args = vec![Value::from("0"), Value::from(PUBLISH)];
        flag_script(core, ScriptId::ForceUnlock, &self.name, keys, args)
    }
}

lock_type! {
    /// A reentrant distributed lock (Redisson `RLock`), bound to one [`Owner`].
    ///
    /// Data layout (wire-compatible with Redisson): a hash at the lock name with one field
    /// `<client uuid>:<owner id>` holding the hold count; the key's TTL is the lease or the
    /// watchdog timeout; a full release publishes `0` on `redisson_lock__channel:{name}`.
    ///
    /// # Owners
    /// The handle acts as one owner (one Java thread): its acquisitions re-enter, and handles
    /// with different owners exclude each other even on the same OS thread.
    /// [`Client::get_lock`] binds a fresh owner, so give each task its own handle. Sharing one
    /// handle (e.g. in an `Arc`) between tasks makes them one owner that re-enters — only do
    /// that on purpose.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// use std::time::Duration;
    /// let lock = client.get_lock("invoice:42");
    /// if let Some(guard) = lock.try_lock_for(Duration::from_secs(2)).await? {
    ///     assert_eq!(lock.hold_count().await?, 1);
    ///     let again = lock.lock().await?;       // same owner: re-entry
    ///     assert_eq!(lock.hold_count().await?, 2);
    ///     drop(again);
    ///     guard.unlock().await?;
    /// }
    /// # Ok(()) }
    /// ```
    RLock
}

impl RLock {
    pub(crate) fn new(client: Client, name: &str, owner: Owner) -> Self {
        RLock {
            handle: LockHandle::new(client, name, owner, |raw| Arc::new(Reentrant::new(raw))),
        }
    }
}
