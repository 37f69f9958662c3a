//! The one acquire engine shared by every lock kind, and the release path.
//!
//! attempt → on failure subscribe (barrier) → attempt again → wait on the latch for
//! min(TTL, time left) → repeat until acquired or out of time → leave the subscription.
//! Kinds without a channel (the spin lock) sleep a back-off step instead of waiting on a latch.
//!
//! Cancel safety: every attempt runs as its own task. If the caller's future is dropped while an
//! attempt is in flight, the task still completes; a success then comes back as an [`Acquired`]
//! nobody claims, whose `Drop` releases that hold at once (restoring a pre-existing re-entrant
//! count). The subscription is a value whose `Drop` leaves the channel, and a kind's give-up
//! clean-up (the fair lock's queue exit) is a value that runs on drop too. So a dropped waiter
//! leaves no subscription, no queue entry, no lock and no watchdog registration.

use std::{sync::Arc, time::Duration};

use futures::future::BoxFuture;
use tokio::time::Instant;

use super::backoff::BackOff;
use crate::{
    client::{Client, Core},
    error::{Error, Result},
    names,
    watchdog::Renewal,
};

/// Reply of one acquisition attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reply {
    /// Acquired (fresh or re-entry), with the fencing token for fenced locks.
    Acquired { token: Option<i64> },
    /// Held by someone else; the TTL bounds the next sleep (negative: no TTL).
    Busy { ttl: i64 },
}

/// How a waiter waits between attempts.
pub(crate) enum Waiting {
    /// Sleep on the latch of this channel, woken by unlock messages.
    Channel(String),
    /// Sleep the steps of a back-off schedule (no pub/sub at all).
    BackOff(BackOff),
}

/// What a lock kind supplies to the engine: its name, how it waits, its scripts.
pub(crate) trait LockKind: Send + Sync + 'static {
    /// The raw lock name in Redis.
    fn raw_name(&self) -> &str;
    /// The hash field of an owner whose base field is `<uuid>:<id>` (the write lock appends
    /// `:write`).
    fn field(&self, base: &str) -> String {
        base.to_owned()
    }
    /// How a waiter for `field` waits.
    fn waiting(&self, field: &str) -> Waiting;
    /// One acquisition attempt. `queue_ms` is `Some(wait)` when the caller is prepared to wait
    /// (the fair lock then enqueues with that per-waiter timeout), `None` for a single try.
    fn attempt(
        &self,
        core: Arc<Core>,
        field: Arc<str>,
        lease_ms: u64,
        queue_ms: Option<u64>,
    ) -> BoxFuture<'static, Result<Reply>>;
    /// Releases one hold; the reply follows the spec: nil (not owner), 0 (still held), 1 (free).
    fn release(
        &self,
        core: Arc<Core>,
        field: Arc<str>,
        lease_ms: u64,
        request_id: Arc<str>,
    ) -> BoxFuture<'static, Result<Option<i64>>>;
    /// Clean-up after a waiter gave up (timeout, error or dropped future).
    fn give_up(
        &self,
        _core: Arc<Core>,
        _field: Arc<str>,
        _queue_ms: u64,
    ) -> Option<BoxFuture<'static, Result<()>>> {
        None
    }
    /// How the watchdog renews a hold of `field`.
    fn renewal(&self) -> Renewal {
        Renewal::Standard
    }
    /// Deletes the lock whoever holds it; `true` if there was one.
    fn force_unlock(&self, core: Arc<Core>) -> BoxFuture<'static, Result<bool>>;
    /// `true` if any owner holds the lock (default: the key exists).
    fn is_locked(&self, core: Arc<Core>) -> BoxFuture<'static, Result<bool>> {
        let name = self.raw_name().to_owned();
        Box::pin(async move {
            use fred::interfaces::KeysInterface;
            let n: i64 = core
                .redis
                .exists(name.as_str())
                .await
                .map_err(|e| Error::from_redis(e, &name))?;
            Ok(n > 0)
        })
    }
}

/// Runs one of the registry's scripts for the lock `name`, mapping errors to that lock.
pub(crate) async fn run_script(
    core: &Core,
    id: crate::scripts::ScriptId,
    name: &str,
    keys: Vec<fred::types::Key>,
    args: Vec<fred::types::Value>,
) -> Result<fred::types::Value> {
    core.scripts
        .run(&core.redis, id, keys, args)
        .await
        .map_err(|e| Error::from_redis(e, name))
}

/// Runs a script whose reply is nil or an integer (releases, forced unlocks, flags).
pub(crate) fn int_script(
    core: Arc<Core>,
    id: crate::scripts::ScriptId,
    name: &str,
    keys: Vec<fred::types::Key>,
    args: Vec<fred::types::Value>,
) -> BoxFuture<'static, Result<Option<i64>>> {
    let name = name.to_owned();
    Box::pin(async move {
        let v = run_script(&core, id, &name, keys, args).await?;
        nil_or_int(v, &name)
    })
}

/// Runs an acquire script that answers nil (acquired) or the PTTL (busy).
pub(crate) fn ttl_script(
    core: Arc<Core>,
    id: crate::scripts::ScriptId,
    name: &str,
    keys: Vec<fred::types::Key>,
    args: Vec<fred::types::Value>,
) -> BoxFuture<'static, Result<Reply>> {
    let reply = int_script(core, id, name, keys, args);
    Box::pin(async move {
        Ok(match reply.await? {
            None => Reply::Acquired { token: None },
            Some(ttl) => Reply::Busy { ttl },
        })
    })
}

/// Runs a script that answers 1 for "yes" (forced unlocks, `is_locked` variants).
pub(crate) fn flag_script(
    core: Arc<Core>,
    id: crate::scripts::ScriptId,
    name: &str,
    keys: Vec<fred::types::Key>,
    args: Vec<fred::types::Value>,
) -> BoxFuture<'static, Result<bool>> {
    let reply = int_script(core, id, name, keys, args);
    Box::pin(async move { Ok(reply.await? == Some(1)) })
}

/// Interprets a script reply: nil → `None`, integer → `Some`.
pub(crate) fn nil_or_int(v: fred::types::Value, lock: &str) -> Result<Option<i64>> {
    use fred::types::Value;
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
    pub(crate) token: Option<i64>,
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

/// Runs a kind's give-up clean-up unless disarmed; on drop it is handed to the runtime.
struct GiveUp<'a> {
    client: &'a Client,
    kind: &'a Arc<dyn LockKind>,
    field: &'a Arc<str>,
    queue_ms: u64,
    armed: bool,
}

impl GiveUp<'_> {
    fn future(&self) -> Option<BoxFuture<'static, Result<()>>> {
        self.kind.give_up(
            self.client.inner.core.clone(),
            self.field.clone(),
            self.queue_ms,
        )
    }

    /// Runs the clean-up now (the waiter's wait ended without the lock).
    async fn run(mut self) {
        self.armed = false;
        if let Some(f) = self.future() {
            if let Err(e) = f.await {
                log::warn!("give-up clean-up of {} failed: {e}", self.kind.raw_name());
            }
        }
    }
}

impl Drop for GiveUp<'_> {
    fn drop(&mut self) {
        if self.armed && !self.client.is_closed() {
            if let Some(f) = self.future() {
                let name = self.kind.raw_name().to_owned();
                drop(self.client.inner.runtime.spawn(async move {
                    if let Err(e) = f.await {
                        log::warn!("give-up clean-up of {name} failed: {e}");
                    }
                }));
            }
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
    queue_ms: Option<u64>,
) -> Result<std::result::Result<Acquired, i64>> {
    if client.is_closed() {
        return Err(Error::Shutdown);
    }
    let (c, k, f) = (client.clone(), kind.clone(), field.clone());
    let task = client.inner.runtime.spawn(async move {
        let sent_at = Instant::now();
        let reply = k
            .attempt(c.inner.core.clone(), f.clone(), lease_ms, queue_ms)
            .await?;
        Ok(match reply {
            Reply::Acquired { token } => Ok(Acquired {
                client: c,
                kind: k,
                field: f,
                lease_ms,
                sent_at,
                token,
                armed: true,
            }),
            Reply::Busy { ttl } => Err(ttl),
        })
    });
    task.await.map_err(|_| Error::Shutdown)?
}

/// Runs the acquire protocol of §4.7 for any lock kind. `queue_ms` is the per-waiter timeout a
/// queueing kind (the fair lock) uses when the caller waits.
pub(crate) async fn acquire(
    client: &Client,
    kind: &Arc<dyn LockKind>,
    field: &Arc<str>,
    lease_ms: u64,
    wait: Wait,
    queue_ms: u64,
) -> Result<Option<Acquired>> {
    let deadline = match wait {
        Wait::No => {
            let first = attempt_once(client, kind, field, lease_ms, None).await?;
            return Ok(first.ok());
        }
        Wait::Until(deadline) => deadline,
    };
    let give_up = GiveUp {
        client,
        kind,
        field,
        queue_ms,
        armed: true,
    };
    match wait_for_lock(client, kind, field, lease_ms, deadline, queue_ms).await {
        Ok(Some(acquired)) => {
            let mut g = give_up;
            g.armed = false;
            Ok(Some(acquired))
        }
        other => {
            give_up.run().await;
            other
        }
    }
}

async fn wait_for_lock(
    client: &Client,
    kind: &Arc<dyn LockKind>,
    field: &Arc<str>,
    lease_ms: u64,
    deadline: Option<Instant>,
    queue_ms: u64,
) -> Result<Option<Acquired>> {
    let queue = Some(queue_ms);
    let left = |now: Instant| deadline.map(|d| d.saturating_duration_since(now));
    let ttl = match attempt_once(client, kind, field, lease_ms, queue).await? {
        Ok(acquired) => return Ok(Some(acquired)),
        Err(ttl) => ttl,
    };
    if left(Instant::now()) == Some(Duration::ZERO) {
        return Ok(None);
    }
    let config = &client.inner.core.config;
    let channel = match kind.waiting(field) {
        Waiting::Channel(c) => c,
        Waiting::BackOff(mut backoff) => {
            let _ = ttl;
            loop {
                let step = backoff.next_delay();
                let sleep = left(Instant::now()).map_or(step, |r| r.min(step));
                tokio::time::sleep(sleep).await;
                match attempt_once(client, kind, field, lease_ms, queue).await? {
                    Ok(acquired) => return Ok(Some(acquired)),
                    Err(_) if left(Instant::now()) == Some(Duration::ZERO) => return Ok(None),
                    Err(_) => {}
                }
            }
        }
    };

    let subscription = client.inner.pubsub.subscribe(&channel);
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
        let ttl = match attempt_once(client, kind, field, lease_ms, queue).await? {
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
