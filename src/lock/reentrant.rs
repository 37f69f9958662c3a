//! The reentrant lock (Redisson `RLock`, protocol §4): its description for the engine and the
//! public handle.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use fred::{
    interfaces::{HashesInterface, KeysInterface},
    types::{Key, Value},
};
use futures::future::BoxFuture;

use super::{
    engine::{self, LockKind, UnlockOutcome, Wait},
    guard::LockGuard,
    Ttl,
};
use crate::{
    client::{Client, Core},
    config::lease_millis,
    error::{Error, Result},
    names,
    owner::Owner,
    scripts::ScriptId,
};

/// The publish command passed to the scripts (standalone and Sentinel deployments).
pub(crate) const PUBLISH: &str = "publish";

/// The reentrant lock as the engine sees it: name, channel, scripts.
pub(crate) struct Reentrant {
    name: String,
    key: Key,
    channel: String,
}

impl Reentrant {
    pub(crate) fn new(raw_name: String) -> Self {
        Self {
            key: Key::from(raw_name.as_str()),
            channel: names::lock_channel(&raw_name),
            name: raw_name,
        }
    }
}

/// Interprets a lock script's reply: nil → `None`, integer → `Some`.
pub(crate) fn nil_or_int(v: Value, lock: &str) -> Result<Option<i64>> {
    match v {
        Value::Null => Ok(None),
        Value::Integer(i) => Ok(Some(i)),
        other => match other.as_i64() {
            Some(i) => Ok(Some(i)),
            None => Err(Error::Redis(format!(
                "unexpected script reply {other:?} for lock {lock}"
            ))),
        },
    }
}

impl LockKind for Reentrant {
    fn raw_name(&self) -> &str {
        &self.name
    }

    fn channel(&self, _field: &str) -> String {
        self.channel.clone()
    }

    fn attempt(
        &self,
        core: Arc<Core>,
        field: Arc<str>,
        lease_ms: u64,
    ) -> BoxFuture<'static, Result<Option<i64>>> {
        let keys = vec![self.key.clone()];
        let args = vec![Value::from(lease_ms as i64), Value::from(&*field)];
        let name = self.name.clone();
        Box::pin(async move {
            let v: Value = core
                .scripts
                .run(&core.redis, ScriptId::Acquire, keys, args)
                .await
                .map_err(|e| Error::from_redis(e, &name))?;
            nil_or_int(v, &name)
        })
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
        let name = self.name.clone();
        Box::pin(async move {
            let v: Value = core
                .scripts
                .run(&core.redis, ScriptId::Release, keys, args)
                .await
                .map_err(|e| Error::from_redis(e, &name))?;
            nil_or_int(v, &name)
        })
    }
}

/// A reentrant distributed lock (Redisson `RLock`), bound to one [`Owner`].
///
/// Data layout (wire-compatible with Redisson): a hash at the lock name with one field
/// `<client uuid>:<owner id>` holding the hold count; the key's TTL is the lease or the watchdog
/// timeout; a full release publishes `0` on `redisson_lock__channel:{name}`.
///
/// # Owners
/// The handle acts as one owner (one Java thread): its acquisitions re-enter, and handles with
/// different owners exclude each other even on the same OS thread. [`Client::get_lock`] binds a
/// fresh owner, so give each task its own handle. Sharing one handle (e.g. in an `Arc`) between
/// tasks makes them one owner that re-enters — only do that on purpose.
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
pub struct RLock {
    client: Client,
    kind: Arc<dyn LockKind>,
    user_name: String,
    owner: Owner,
    field: Arc<str>,
    /// Redisson's `internalLockLeaseTime`: the lease of the latest leased acquisition through
    /// this handle, else the watchdog timeout. Re-armed by a partial `unlock()`.
    internal_lease_ms: AtomicU64,
    invalid: Option<String>,
}

impl std::fmt::Debug for RLock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RLock")
            .field("name", &self.kind.raw_name())
            .field("owner", &self.field)
            .finish()
    }
}

impl RLock {
    pub(crate) fn new(client: Client, name: &str, owner: Owner) -> Self {
        let raw = client.map_name(name);
        let invalid = if name.is_empty() || raw.is_empty() {
            Some("lock name must not be empty".to_owned())
        } else {
            None
        };
        let field: Arc<str> = format!("{}:{}", client.id(), owner.id()).into();
        let watchdog_ms = client.config().lock_watchdog_timeout.as_millis() as u64;
        Self {
            kind: Arc::new(Reentrant::new(raw)),
            client,
            user_name: name.to_owned(),
            owner,
            field,
            internal_lease_ms: AtomicU64::new(watchdog_ms),
            invalid,
        }
    }

    /// The user-facing name (before the name mapper).
    pub fn name(&self) -> &str {
        &self.user_name
    }

    /// The raw name in Redis (after the name mapper).
    pub fn raw_name(&self) -> &str {
        self.kind.raw_name()
    }

    /// The owner this handle acts as.
    pub fn owner(&self) -> Owner {
        self.owner
    }

    /// The owner field `<client uuid>:<owner id>` this handle writes.
    pub fn owner_field(&self) -> &str {
        &self.field
    }

    fn check(&self) -> Result<()> {
        match &self.invalid {
            Some(m) => Err(Error::InvalidArgument(m.clone())),
            None => Ok(()),
        }
    }

    pub(crate) fn field_for(&self, owner: Owner) -> Arc<str> {
        if owner == self.owner {
            self.field.clone()
        } else {
            format!("{}:{}", self.client.id(), owner.id()).into()
        }
    }

    fn watchdog_ms(&self) -> u64 {
        self.client.config().lock_watchdog_timeout.as_millis() as u64
    }

    pub(crate) async fn acquire_as(
        &self,
        owner: Owner,
        lease: Option<Duration>,
        wait: Wait,
    ) -> Result<Option<LockGuard>> {
        self.check()?;
        let lease_ms = match lease {
            Some(l) => lease_millis(l)?,
            None => self.watchdog_ms(),
        };
        let field = self.field_for(owner);
        let acquired = engine::acquire(&self.client, &self.kind, &field, lease_ms, wait).await?;
        Ok(acquired.map(|a| {
            if lease.is_some() {
                self.internal_lease_ms.store(lease_ms, Ordering::Relaxed);
            }
            LockGuard::new(a, owner, lease.is_none())
        }))
    }

    pub(crate) async fn unlock_as(&self, owner: Owner) -> Result<UnlockOutcome> {
        self.check()?;
        let field = self.field_for(owner);
        self.client
            .inner
            .watchdog
            .deregister(self.kind.raw_name(), &field);
        let lease_ms = self.internal_lease_ms.load(Ordering::Relaxed);
        let outcome = engine::release(&self.client, &self.kind, &field, lease_ms).await?;
        if outcome == UnlockOutcome::Released {
            self.internal_lease_ms
                .store(self.watchdog_ms(), Ordering::Relaxed);
        }
        Ok(outcome)
    }

    pub(crate) async fn hold_count_as(&self, owner: Owner) -> Result<u64> {
        self.check()?;
        let field = self.field_for(owner);
        let n: Option<i64> = self
            .client
            .inner
            .core
            .redis
            .hget(self.kind.raw_name(), &*field)
            .await
            .map_err(|e| self.err(e))?;
        Ok(n.unwrap_or(0).max(0) as u64)
    }

    pub(crate) async fn is_held_as(&self, owner: Owner) -> Result<bool> {
        self.check()?;
        let field = self.field_for(owner);
        self.client
            .inner
            .core
            .redis
            .hexists(self.kind.raw_name(), &*field)
            .await
            .map_err(|e| self.err(e))
    }

    fn err(&self, e: fred::error::Error) -> Error {
        Error::from_redis(e, self.kind.raw_name())
    }

    /// Waits without limit and acquires in watchdog mode: the key's TTL is the watchdog timeout
    /// and the watchdog renews it until the guard is released.
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped, no subscription, watchdog registration or hold is
    /// left behind (an acquisition that completes after the drop is released at once).
    pub async fn lock(&self) -> Result<LockGuard> {
        self.acquire_as(self.owner, None, Wait::Until(None))
            .await
            .map(|g| g.expect("an unbounded wait only ends by acquiring"))
    }

    /// Waits without limit and acquires with a fixed lease: the lock expires after `lease` unless
    /// released earlier; no watchdog. A zero or overflowing lease is [`Error::InvalidArgument`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<LockGuard> {
        self.acquire_as(self.owner, Some(lease), Wait::Until(None))
            .await
            .map(|g| g.expect("an unbounded wait only ends by acquiring"))
    }

    /// One attempt, no waiting: `Ok(None)` if another owner holds the lock. Watchdog mode.
    ///
    /// Returns `Result<Option<_>>` rather than tokio's `Result<_, TryLockError>` because here a
    /// busy lock and a Redis failure are different things: `?` propagates the failure and the
    /// `Option` says whether the lock was free.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn try_lock(&self) -> Result<Option<LockGuard>> {
        self.acquire_as(self.owner, None, Wait::No).await
    }

    /// Waits at most `wait` (zero: one attempt; `Duration::MAX`: without limit). Watchdog mode.
    ///
    /// # Cancel safety
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<LockGuard>> {
        self.acquire_as(self.owner, None, Wait::for_duration(wait))
            .await
    }

    /// Waits at most `wait`, then holds for at most `lease` (no watchdog).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<LockGuard>> {
        self.acquire_as(self.owner, Some(lease), Wait::for_duration(wait))
            .await
    }

    /// Releases one hold of this handle's owner (the Java style; guards do this on drop).
    /// [`Error::NotHeld`] if the owner does not hold the lock (never did, or it expired).
    /// A partial release re-arms the TTL to the latest lease used through this handle.
    pub async fn unlock(&self) -> Result<UnlockOutcome> {
        self.unlock_as(self.owner).await
    }

    /// Deletes the lock whoever holds it and wakes waiters; `true` if it was locked. Holders in
    /// this client are told their lock is lost; others learn it at their next renewal.
    pub async fn force_unlock(&self) -> Result<bool> {
        self.check()?;
        let name = self.kind.raw_name();
        self.client.inner.watchdog.remove_lock(name);
        let core = &self.client.inner.core;
        let keys = vec![Key::from(name), Key::from(names::lock_channel(name))];
        let args = vec![Value::from("0"), Value::from(PUBLISH)];
        let deleted: i64 = core
            .scripts
            .run(&core.redis, ScriptId::ForceUnlock, keys, args)
            .await
            .map_err(|e| self.err(e))?;
        self.internal_lease_ms
            .store(self.watchdog_ms(), Ordering::Relaxed);
        Ok(deleted == 1)
    }

    /// `true` if any owner holds the lock.
    pub async fn is_locked(&self) -> Result<bool> {
        self.check()?;
        let n: i64 = self
            .client
            .inner
            .core
            .redis
            .exists(self.kind.raw_name())
            .await
            .map_err(|e| self.err(e))?;
        Ok(n > 0)
    }

    /// `true` if this handle's owner holds the lock.
    pub async fn is_held_by_current(&self) -> Result<bool> {
        self.is_held_as(self.owner).await
    }

    /// This handle's owner's hold count (0 if not held).
    pub async fn hold_count(&self) -> Result<u64> {
        self.hold_count_as(self.owner).await
    }

    /// Remaining time to live of the lock key.
    pub async fn remaining_ttl(&self) -> Result<Ttl> {
        self.check()?;
        let ms: i64 = self
            .client
            .inner
            .core
            .redis
            .pttl(self.kind.raw_name())
            .await
            .map_err(|e| self.err(e))?;
        Ok(Ttl::from_pttl(ms))
    }
}
