//! The handle shared by every lock kind (owner, name, remembered lease), and the macro that
//! gives each public lock type the common API. A kind adds only its description.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use fred::interfaces::{HashesInterface, KeysInterface};

use super::{
    engine::{self, LockKind, UnlockOutcome, Wait},
    guard::LockGuard,
    Ttl,
};
use crate::{
    client::Client,
    config::lease_millis,
    error::{Error, Result},
    owner::Owner,
};

/// A lock handle bound to one owner; the public lock types wrap it.
pub(crate) struct LockHandle {
    pub(crate) client: Client,
    pub(crate) kind: Arc<dyn LockKind>,
    user_name: String,
    owner: Owner,
    field: Arc<str>,
    /// Redisson's `internalLockLeaseTime`: the lease of the latest leased acquisition through
    /// this handle, else the watchdog timeout. Re-armed by a partial `unlock()`.
    internal_lease_ms: AtomicU64,
    invalid: Option<String>,
}

impl std::fmt::Debug for LockHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("name", &self.kind.raw_name())
            .field("owner", &self.field)
            .finish()
    }
}

impl LockHandle {
    /// `make_kind` receives the raw (mapped) name.
    pub(crate) fn new(
        client: Client,
        name: &str,
        owner: Owner,
        make_kind: impl FnOnce(String) -> Arc<dyn LockKind>,
    ) -> Self {
        let raw = client.map_name(name);
        let invalid = if name.is_empty() || raw.is_empty() {
            Some("lock name must not be empty".to_owned())
        } else {
            None
        };
        let kind = make_kind(raw);
        let field: Arc<str> = kind
            .field(&format!("{}:{}", client.id(), owner.id()))
            .into();
        let watchdog_ms = client.config().lock_watchdog_timeout.as_millis() as u64;
        Self {
            client,
            kind,
            user_name: name.to_owned(),
            owner,
            field,
            internal_lease_ms: AtomicU64::new(watchdog_ms),
            invalid,
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.user_name
    }
    pub(crate) fn raw_name(&self) -> &str {
        self.kind.raw_name()
    }
    pub(crate) fn owner(&self) -> Owner {
        self.owner
    }
    pub(crate) fn owner_field(&self) -> &str {
        &self.field
    }

    pub(crate) fn check(&self) -> Result<()> {
        match &self.invalid {
            Some(m) => Err(Error::InvalidArgument(m.clone())),
            None => Ok(()),
        }
    }

    pub(crate) fn field_for(&self, owner: Owner) -> Arc<str> {
        if owner == self.owner {
            self.field.clone()
        } else {
            self.kind
                .field(&format!("{}:{}", self.client.id(), owner.id()))
                .into()
        }
    }

    fn watchdog_ms(&self) -> u64 {
        self.client.config().lock_watchdog_timeout.as_millis() as u64
    }

    pub(crate) fn err(&self, e: fred::error::Error) -> Error {
        Error::from_redis(e, self.kind.raw_name())
    }

    /// Acquires as `owner`. `wait`: `None` without limit, zero = one attempt.
    pub(crate) async fn acquire_as(
        &self,
        owner: Owner,
        lease: Option<Duration>,
        wait: Option<Duration>,
    ) -> Result<Option<LockGuard>> {
        self.check()?;
        let lease_ms = match lease {
            Some(l) => lease_millis(l)?,
            None => self.watchdog_ms(),
        };
        // A queueing kind waits in line for the caller's wait time, else the configured
        // per-waiter timeout (Redisson's threadWaitTime).
        let config = self.client.config();
        let queue_ms = match wait {
            Some(w) if !w.is_zero() => w.as_millis().min(u128::from(crate::MAX_MILLIS)) as u64,
            _ => config.fair_lock_wait_timeout.as_millis() as u64,
        };
        let wait = match wait {
            None => Wait::Until(None),
            Some(w) => Wait::for_duration(w),
        };
        let field = self.field_for(owner);
        let acquired =
            engine::acquire(&self.client, &self.kind, &field, lease_ms, wait, queue_ms).await?;
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

    pub(crate) async fn force_unlock(&self) -> Result<bool> {
        self.check()?;
        self.client.inner.watchdog.remove_lock(self.kind.raw_name());
        let deleted = self
            .kind
            .force_unlock(self.client.inner.core.clone())
            .await?;
        self.internal_lease_ms
            .store(self.watchdog_ms(), Ordering::Relaxed);
        Ok(deleted)
    }

    pub(crate) async fn is_locked(&self) -> Result<bool> {
        self.check()?;
        self.kind.is_locked(self.client.inner.core.clone()).await
    }

    pub(crate) async fn remaining_ttl(&self) -> Result<Ttl> {
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

/// Defines a public lock type over [`LockHandle`] with the common API.
macro_rules! lock_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        pub struct $name {
            pub(crate) handle: $crate::lock::handle::LockHandle,
        }

        impl From<$name> for $crate::LockPart {
            fn from(lock: $name) -> Self {
                $crate::LockPart {
                    handle: lock.handle,
                }
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                self.handle.fmt(f)
            }
        }

        impl $name {
            /// The user-facing name (before the name mapper).
            pub fn name(&self) -> &str {
                self.handle.name()
            }

            /// The raw name in Redis (after the name mapper).
            pub fn raw_name(&self) -> &str {
                self.handle.raw_name()
            }

            /// The owner this handle acts as.
            pub fn owner(&self) -> $crate::Owner {
                self.handle.owner()
            }

            /// The hash field this handle's owner writes (`<client uuid>:<owner id>`, plus
            /// `:write` for a write lock).
            pub fn owner_field(&self) -> &str {
                self.handle.owner_field()
            }

            /// Waits without limit and acquires in watchdog mode: the key's TTL is the watchdog
            /// timeout and the watchdog renews it until the guard is released.
            ///
            /// # Cancel safety
            /// Cancel safe: if the future is dropped, no subscription, queue entry, watchdog
            /// registration or hold is left behind (an acquisition that completes after the
            /// drop is released at once).
            pub async fn lock(&self) -> $crate::Result<$crate::LockGuard> {
                self.handle
                    .acquire_as(self.handle.owner(), None, None)
                    .await
                    .map(|g| g.expect("an unbounded wait only ends by acquiring"))
            }

            /// Waits without limit and acquires with a fixed lease: the lock expires after
            /// `lease` unless released earlier; no watchdog. A zero or overflowing lease is
            /// [`Error::InvalidArgument`]($crate::Error::InvalidArgument).
            ///
            /// # Cancel safety
            /// Cancel safe, as [`lock`](Self::lock).
            pub async fn lock_with_lease(
                &self,
                lease: std::time::Duration,
            ) -> $crate::Result<$crate::LockGuard> {
                self.handle
                    .acquire_as(self.handle.owner(), Some(lease), None)
                    .await
                    .map(|g| g.expect("an unbounded wait only ends by acquiring"))
            }

            /// One attempt, no waiting: `Ok(None)` if another owner holds the lock. Watchdog
            /// mode.
            ///
            /// Returns `Result<Option<_>>` rather than tokio's `Result<_, TryLockError>`
            /// because here a busy lock and a Redis failure are different things: `?`
            /// propagates the failure and the `Option` says whether the lock was free.
            ///
            /// # Cancel safety
            /// Cancel safe, as [`lock`](Self::lock).
            pub async fn try_lock(&self) -> $crate::Result<Option<$crate::LockGuard>> {
                self.handle
                    .acquire_as(self.handle.owner(), None, Some(std::time::Duration::ZERO))
                    .await
            }

            /// Waits at most `wait` (zero: one attempt; `Duration::MAX`: without limit).
            /// Watchdog mode.
            ///
            /// # Cancel safety
            /// Cancel safe, as [`lock`](Self::lock).
            pub async fn try_lock_for(
                &self,
                wait: std::time::Duration,
            ) -> $crate::Result<Option<$crate::LockGuard>> {
                self.handle
                    .acquire_as(self.handle.owner(), None, Some(wait))
                    .await
            }

            /// Waits at most `wait`, then holds for at most `lease` (no watchdog).
            ///
            /// # Cancel safety
            /// Cancel safe, as [`lock`](Self::lock).
            pub async fn try_lock_with_lease(
                &self,
                wait: std::time::Duration,
                lease: std::time::Duration,
            ) -> $crate::Result<Option<$crate::LockGuard>> {
                self.handle
                    .acquire_as(self.handle.owner(), Some(lease), Some(wait))
                    .await
            }

            /// Releases one hold of this handle's owner (the Java style; guards do this on
            /// drop). [`Error::NotHeld`]($crate::Error::NotHeld) if the owner does not hold
            /// the lock. A partial release re-arms the TTL to the latest lease used through
            /// this handle.
            pub async fn unlock(&self) -> $crate::Result<$crate::UnlockOutcome> {
                self.handle.unlock_as(self.handle.owner()).await
            }

            /// Deletes the lock whoever holds it and wakes waiters; `true` if it was locked.
            /// Holders in this client are told their lock is lost; others learn it at their
            /// next renewal.
            pub async fn force_unlock(&self) -> $crate::Result<bool> {
                self.handle.force_unlock().await
            }

            /// `true` if any owner holds the lock.
            pub async fn is_locked(&self) -> $crate::Result<bool> {
                self.handle.is_locked().await
            }

            /// `true` if this handle's owner holds the lock.
            pub async fn is_held_by_current(&self) -> $crate::Result<bool> {
                self.handle.is_held_as(self.handle.owner()).await
            }

            /// This handle's owner's hold count (0 if not held).
            pub async fn hold_count(&self) -> $crate::Result<u64> {
                self.handle.hold_count_as(self.handle.owner()).await
            }

            /// Remaining time to live of the lock key.
            pub async fn remaining_ttl(&self) -> $crate::Result<$crate::Ttl> {
                self.handle.remaining_ttl().await
            }
        }
    };
}
pub(crate) use lock_type;
