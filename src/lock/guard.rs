//! The guard of an acquired lock, shared by every lock kind.

use std::{sync::Arc, time::Duration};

use tokio::time::Instant;

use super::engine::{self, Acquired, LockKind, UnlockOutcome};
use crate::{
    client::Client,
    error::Result,
    owner::Owner,
    watchdog::{drift, LossSignal},
};

/// One hold of an acquired lock.
///
/// Dropping the guard releases the hold in the background: drop never blocks and never panics,
/// failures are logged. Use [`unlock`](Self::unlock) to see errors. A guard is `Send + 'static`,
/// so it can move to another task or thread: it remembers its owner, so releasing it never
/// depends on where it is dropped.
///
/// The guard knows when the lock is lost: [`is_lost`](Self::is_lost) and [`lost`](Self::lost).
/// For a watchdog lock that is when renewal finds the lock gone, or when the watchdog could not
/// renew it before its deadline (last successful acquire/renew send time + timeout − drift);
/// for a leased lock, when the lease (minus drift) has run out.
#[must_use = "dropping the guard releases the lock at once"]
pub struct LockGuard {
    client: Client,
    kind: Arc<dyn LockKind>,
    field: Arc<str>,
    owner: Owner,
    lease_ms: u64,
    watchdog: bool,
    token: Option<i64>,
    loss: Arc<LossSignal>,
    released: bool,
}

impl std::fmt::Debug for LockGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockGuard")
            .field("lock", &self.kind.raw_name())
            .field("owner", &self.field)
            .field("watchdog", &self.watchdog)
            .finish()
    }
}

impl LockGuard {
    pub(crate) fn new(acquired: Acquired, owner: Owner, watchdog: bool) -> Self {
        let client = acquired.client.clone();
        let kind = acquired.kind.clone();
        let field = acquired.field.clone();
        let lease_ms = acquired.lease_ms;
        let token = acquired.token;
        let sent_at = acquired.disarm();
        let loss = if watchdog {
            client
                .inner
                .watchdog
                .register(kind.raw_name(), &field, kind.renewal(), sent_at)
        } else {
            let lease = Duration::from_millis(lease_ms);
            LossSignal::new(sent_at + lease.saturating_sub(drift(lease)))
        };
        Self {
            client,
            kind,
            field,
            owner,
            lease_ms,
            watchdog,
            token,
            loss,
            released: false,
        }
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// Sets a held leased lock's TTL to `lease` from now (owner-checked) and moves its deadline
    /// accordingly. Used by the multi-lock after taking its parts with a longer lease.
    pub(crate) async fn rearm_lease(&mut self, lease: Duration) -> Result<()> {
        let lease_ms = crate::config::lease_millis(lease)?;
        let core = &self.client.inner.core;
        let sent_at = Instant::now();
        let keys = vec![fred::types::Key::from(self.kind.raw_name())];
        let args = vec![
            fred::types::Value::from(lease_ms as i64),
            fred::types::Value::from(&*self.field),
        ];
        let flags: Vec<i64> = core
            .scripts
            .run(&core.redis, crate::scripts::ScriptId::Renew, keys, args)
            .await
            .map_err(|e| crate::Error::from_redis(e, self.kind.raw_name()))?;
        if flags.first() != Some(&1) {
            self.loss.mark_lost();
            return Err(crate::Error::LockLost {
                lock: self.kind.raw_name().to_owned(),
            });
        }
        self.lease_ms = lease_ms;
        if !self.watchdog {
            self.loss = LossSignal::new(sent_at + lease.saturating_sub(drift(lease)));
        }
        Ok(())
    }

    /// The raw lock name in Redis.
    pub fn name(&self) -> &str {
        self.kind.raw_name()
    }

    /// The owner that holds this hold.
    pub fn owner(&self) -> Owner {
        self.owner
    }

    /// The hash field of the owner: `<client uuid>:<owner id>`.
    pub fn owner_field(&self) -> &str {
        &self.field
    }

    /// The fencing token of this acquisition ([`FencedLock`](crate::FencedLock) only): strictly
    /// larger than the token of every earlier acquisition of the lock.
    pub fn token(&self) -> Option<u64> {
        self.token.map(|t| t.max(0) as u64)
    }

    /// `true` when the lock is kept alive by the watchdog (taken without a lease).
    pub fn is_watchdog(&self) -> bool {
        self.watchdog
    }

    /// `true` once the lock is known or presumed lost; never turns back to `false`.
    pub fn is_lost(&self) -> bool {
        self.loss.is_lost()
    }

    /// The instant (monotonic clock) until which the lock is known to be held, unless lost
    /// earlier. The watchdog moves it forward at every renewal.
    pub fn valid_until(&self) -> Instant {
        self.loss.deadline()
    }

    /// Resolves when the lock is lost. Use it with `select!` to abort work that must not
    /// continue without the lock.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future has no effect on the lock.
    pub async fn lost(&self) {
        self.loss.wait_lost().await
    }

    /// Releases this hold and reports the outcome; errors (e.g. [`NotHeld`] after the lock
    /// expired) are returned instead of logged. Watchdog renewal for this hold stops whatever
    /// the outcome.
    ///
    /// [`NotHeld`]: crate::Error::NotHeld
    pub async fn unlock(mut self) -> Result<UnlockOutcome> {
        self.released = true;
        if self.watchdog {
            self.client
                .inner
                .watchdog
                .deregister(self.kind.raw_name(), &self.field);
        }
        engine::release(&self.client, &self.kind, &self.field, self.lease_ms).await
    }

    /// Gives up the guard without releasing the hold: the lock stays held (and renewed, in
    /// watchdog mode) until the owner releases it through its lock handle (`RLock::unlock`) or
    /// it is force-unlocked. This is the Java style of `lock()` … `unlock()`.
    pub fn keep(mut self) {
        self.released = true;
    }
}

impl Drop for LockGuard {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        if self.watchdog {
            self.client
                .inner
                .watchdog
                .deregister(self.kind.raw_name(), &self.field);
        }
        engine::release_in_background(&self.client, &self.kind, &self.field, self.lease_ms);
    }
}
