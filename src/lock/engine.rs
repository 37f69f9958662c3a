//! The one acquire engine shared by every lock kind, and the release path.
//!
//! attempt → on failure subscribe (barrier) → attempt again → wait on the latch for
//! min(TTL, time left) → repeat until acquired or out of time → leave the subscription.
//!
//! Cancel safety: every attempt runs as its own task. If the caller's future is dropped while an
//! attempt is in flight, the task still completes; a success then comes back as an [`Acquired`]
//! nobody claims, whose `Drop` releases that hold at once (restoring a pre-existing re-entrant
//! count). The subscription is a value whose `Drop` leaves the channel. So a dropped waiter
//! leaves no subscription, no lock and no watchdog registration.

use std::{sync::Arc, time::Duration};

use futures::future::BoxFuture;
use tokio::time::Instant;

use crate::{
    client::{Client, Core},
    error::{Error, Result},
    names,
};

/// What a lock kind supplies to the engine: its name, channel and scripts.
pub(crate) trait LockKind: Send + Sync + 'static {
    /// The raw lock name in Redis.
    fn raw_name(&self) -> &str;
    /// The channel a waiter for `field` listens on.
    fn channel(&self, field: &str) -> String;
    /// One acquisition attempt: `Ok(None)` acquired, `Ok(Some(ttl_ms))` held by someone else.
    fn attempt(
        &self,
        core: Arc<Core>,
        field: Arc<str>,
        lease_ms: u64,
    ) -> BoxFuture<'static, Result<Option<i64>>>;
    /// Releases one hold; the reply follows the spec: nil (not owner), 0 (still held), 1 (free).
    fn release(
        &self,
        core: Arc<Core>,
        field: Arc<str>,
        lease_ms: u64,
        request_id: Arc<str>,
    ) -> BoxFuture<'static, Result<Option<i64>>>;
}

/// How long an acquisition may wait.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Wait {
    /// One attempt only.
    No,
    /// Until the deadline (`None`: without limit).
    Until(Option<Instant>),
}

impl Wait {
    /// A wait of `d`; zero means one attempt, an overflowing one means "without limit".
    pub(crate) fn for_duration(d: Duration) -> Wait {
        if d.is_zero() {
            Wait::No
        } else {
            Wait::Until(Instant::now().checked_add(d))
        }
    }
}

/// Result of one unlock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnlockOutcome {
    /// One hold was released; the owner still holds the lock (re-entrant count > 0).
    StillHeld,
    /// The last hold was released; the lock is free and waiters were woken.
    Released,
}

/// A successful acquisition not yet turned into a guard. Dropping it releases the hold.
pub(crate) struct Acquired {
    pub(crate) client: Client,
    pub(crate) kind: Arc<dyn LockKind>,
    pub(crate) field: Arc<str>,
    pub(crate) lease_ms: u64,
    pub(crate) sent_at: Instant,
    armed: bool,
}

impl Acquired {
    /// Takes responsibility for the hold (the guard releases it from now on).
    pub(crate) fn disarm(mut self) -> Instant {
        self.armed = false;
        self.sent_at
    }
}

impl Drop for Acquired {
    fn drop(&mut self) {
        if self.armed {
            log::debug!(
                "acquisition of {} finished after its caller gave up; releasing it",
                self.kind.raw_name()
            );
            release_in_background(&self.client, &self.kind, &self.field, self.lease_ms);
        }
    }
}

/// Hands a release to the client's runtime; never blocks, never panics.
pub(crate) fn release_in_background(
    client: &Client,
    kind: &Arc<dyn LockKind>,
    field: &Arc<str>,
    lease_ms: u64,
) {
    if client.is_closed() {
        return;
    }
    let (c, k, f) = (client.clone(), kind.clone(), field.clone());
    drop(client.inner.runtime.spawn(async move {
        if let Err(e) = release(&c, &k, &f, lease_ms).await {
            log::warn!("background unlock of {} failed: {e}", k.raw_name());
        }
    }));
}

async fn attempt_once(
    client: &Client,
    kind: &Arc<dyn LockKind>,
    field: &Arc<str>,
    lease_ms: u64,
) -> Result<std::result::Result<Acquired, i64>> {
    if client.is_closed() {
        return Err(Error::Shutdown);
    }
    let (c, k, f) = (client.clone(), kind.clone(), field.clone());
    let task = client.inner.runtime.spawn(async move {
        let sent_at = Instant::now();
        let reply = k.attempt(c.inner.core.clone(), f.clone(), lease_ms).await?;
        Ok(match reply {
            None => Ok(Acquired {
                client: c,
                kind: k,
                field: f,
                lease_ms,
                sent_at,
                armed: true,
            }),
            Some(ttl) => Err(ttl),
        })
    });
    task.await.map_err(|_| Error::Shutdown)?
}

/// Runs the acquire protocol of §4.7 for any lock kind.
pub(crate) async fn acquire(
    client: &Client,
    kind: &Arc<dyn LockKind>,
    field: &Arc<str>,
    lease_ms: u64,
    wait: Wait,
) -> Result<Option<Acquired>> {
    if let Ok(acquired) = attempt_once(client, kind, field, lease_ms).await? {
        return Ok(Some(acquired));
    }
    let deadline = match wait {
        Wait::No => return Ok(None),
        Wait::Until(deadline) => deadline,
    };
    let left = |now: Instant| deadline.map(|d| d.saturating_duration_since(now));
    if left(Instant::now()) == Some(Duration::ZERO) {
        return Ok(None);
    }

    let config = &client.inner.core.config;
    let subscription = client.inner.pubsub.subscribe(&kind.channel(field));
    let sub_wait = match left(Instant::now()) {
        Some(l) => l.min(config.subscription_timeout),
        None => config.subscription_timeout,
    };
    if let Err(e) = subscription.ready(sub_wait).await {
        if matches!(e, Error::Timeout(_)) && left(Instant::now()) == Some(Duration::ZERO) {
            return Ok(None);
        }
        return Err(e);
    }

    loop {
        let ttl = match attempt_once(client, kind, field, lease_ms).await? {
            Ok(acquired) => return Ok(Some(acquired)),
            Err(ttl) => ttl,
        };
        let remaining = left(Instant::now());
        if remaining == Some(Duration::ZERO) {
            return Ok(None);
        }
        // The TTL bounds the sleep, so a missed message costs at most one TTL. A key without a
        // TTL (-1, only left behind by a foreign client) gets the watchdog timeout as a bound
        // instead of an endless wait.
        let ttl_bound = if ttl >= 0 {
            Duration::from_millis(ttl as u64)
        } else {
            config.lock_watchdog_timeout
        };
        let sleep = remaining.map_or(ttl_bound, |r| r.min(ttl_bound));
        let woken = subscription.wait(Some(sleep)).await;
        // A waiter woken by a message always tries once more, even at its deadline, so the
        // wake-up it consumed is never wasted.
        if !woken && left(Instant::now()) == Some(Duration::ZERO) {
            return Ok(None);
        }
    }
}

/// Releases one hold, retrying transient failures with the same request id (the unlock latch
/// makes the retries idempotent), then deletes the latch in the background.
pub(crate) async fn release(
    client: &Client,
    kind: &Arc<dyn LockKind>,
    field: &Arc<str>,
    lease_ms: u64,
) -> Result<UnlockOutcome> {
    if client.is_closed() {
        return Err(Error::Shutdown);
    }
    let core = &client.inner.core;
    let request_id: Arc<str> = names::request_id().into();
    let mut tries = 0;
    let reply = loop {
        let r = kind
            .release(core.clone(), field.clone(), lease_ms, request_id.clone())
            .await;
        match r {
            Err(e) if e.is_transient() && tries < core.config.retry_attempts => {
                tries += 1;
                log::debug!("unlock of {} failed ({e}); retrying", kind.raw_name());
                tokio::time::sleep(core.config.retry_delay).await;
            }
            other => break other?,
        }
    };
    let latch = names::unlock_latch(kind.raw_name(), &request_id);
    let redis = core.redis.clone();
    drop(client.inner.runtime.spawn(async move {
        use fred::interfaces::KeysInterface;
        let _ = redis.del::<i64, _>(latch).await;
    }));
    match reply {
        None => Err(Error::NotHeld {
            lock: kind.raw_name().to_owned(),
            owner: field.to_string(),
        }),
        Some(0) => Ok(UnlockOutcome::StillHeld),
        Some(_) => Ok(UnlockOutcome::Released),
    }
}
