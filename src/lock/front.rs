//! The generic front end: [`Lock<K>`] for every kind, written once, over a non-generic
//! [`Handle`] that the blocking facade and the multi-locks share.

use std::{
    future::Future,
    marker::PhantomData,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use futures::{future::Either, FutureExt};

use super::{
    claim::Claim,
    guard::{Guard, Held},
    protocol::{every_key, Kind, Protocol, Query, Release, SleepRule, UnlockOutcome},
};
use crate::{
    client::Client,
    conn::core::flag,
    engine::{self, Observed, Wait},
    error::{Error, Result},
    service::watchdog::HoldKey,
    types::millis::{clamp_millis, lease_millis},
    types::owner::Owner,
    types::ttl::Ttl,
};

/// One lock, whatever its kind, acting for its callers or for one bound owner.
pub(crate) struct Handle {
    client: Client,
    proto: Arc<dyn Protocol>,
    /// What few handles have (a mapped name, a refusal), kept aside: a handle is made per lock
    /// and kept by every waiting acquisition (ten thousand handles, a slot each otherwise).
    rare: Option<Box<Rare>>,
    /// The owner bound to the handle (`get_*_with_owner`, the blocking facade's thread);
    /// `None`: each call acts for its caller ([`Owner::current`]).
    bound: Option<Owner>,
    /// What names a hold of the owner this handle last acted for: the raw name
    /// (`proto.name()`), the owner's field and a group multi-lock's set of values
    /// (`RenewalShape::values`; empty for other kinds), made and hashed once per owner and
    /// shared by every hold that owner makes through this handle.
    key: parking_lot::Mutex<(Owner, HoldKey)>,
    /// Redisson's `internalLockLeaseTime`: the lease of the latest leased acquisition through
    /// this handle, else the watchdog timeout. Re-armed by a partial `unlock()`.
    internal_lease_ms: AtomicU64,
    /// The kind's name ([`Kind::NAME`]), for logs, spans and metrics.
    kind: &'static str,
}

/// What few handles have.
#[derive(Debug, Default)]
struct Rare {
    /// The user-facing name when a name mapper made the raw name another (else the raw name
    /// is it, and no copy is kept).
    user_name: Option<Box<str>>,
    invalid: Option<Invalid>,
}

/// Why a handle refuses every operation before sending anything.
#[derive(Debug, Clone)]
enum Invalid {
    EmptyName,
    CrossSlot,
    /// The kind's own reason (`Protocol::invalid`).
    Argument(String),
}

impl Handle {
    /// `make` receives the raw (mapped) name.
    /// `bound`: the handle's own owner; `None`: it acts for each caller.
    pub(crate) fn new(
        client: Client,
        name: &str,
        bound: Option<Owner>,
        make: impl FnOnce(String) -> Arc<dyn Protocol>,
    ) -> Self {
        let raw = client.map_name(name);
        let proto = make(raw);
        let owner = bound.unwrap_or_else(Owner::current);
        let field: Arc<str> = proto.owner_field(client.owner_field(owner)).into();
        let invalid = if name.is_empty() || proto.name().is_empty() {
            Some(Invalid::EmptyName)
        } else if let Some(why) = proto.invalid() {
            Some(Invalid::Argument(why))
        } else if client.core().is_clustered()
            && !crate::conn::cluster::one_slot(&every_key(proto.as_ref(), &field))
        {
            Some(Invalid::CrossSlot)
        } else {
            None
        };
        let internal_lease_ms = AtomicU64::new(client.watchdog_ms());
        let key = HoldKey::new(proto.shared_name(), field, proto.renewal_values());
        let user_name = (name != proto.name()).then(|| name.into());
        let rare = (user_name.is_some() || invalid.is_some())
            .then(|| Box::new(Rare { user_name, invalid }));
        Self {
            client,
            proto,
            rare,
            bound,
            key: parking_lot::Mutex::new((owner, key)),
            internal_lease_ms,
            kind: "unknown",
        }
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }
    /// Who a call made now acts for: the bound owner, else the caller ([`Owner::current`]).
    pub(crate) fn owner(&self) -> Owner {
        self.bound.unwrap_or_else(Owner::current)
    }
    pub(crate) fn raw_name(&self) -> &str {
        self.proto.name()
    }
    pub(crate) fn kind(&self) -> &'static str {
        self.kind
    }

    pub(crate) fn check(&self) -> Result<()> {
        match self.rare.as_ref().and_then(|r| r.invalid.as_ref()) {
            Some(Invalid::EmptyName) => Err(Error::InvalidArgument(
                "lock name must not be empty".to_owned(),
            )),
            Some(Invalid::Argument(why)) => Err(Error::InvalidArgument(why.clone())),
            Some(Invalid::CrossSlot) => Err(Error::CrossSlot {
                lock: self.raw_name().to_owned(),
            }),
            None => Ok(()),
        }
    }

    fn field_for(&self, owner: Owner) -> Arc<str> {
        self.key_for(owner).field.clone()
    }

    /// What names `owner`'s hold through this handle (made once per owner the handle acts
    /// for in a row: the last one is kept).
    fn key_for(&self, owner: Owner) -> HoldKey {
        let mut last = self.key.lock();
        if last.0 != owner {
            let field = self
                .proto
                .owner_field(self.client.owner_field(owner))
                .into();
            let key = HoldKey::new(last.1.name.clone(), field, last.1.values.clone());
            *last = (owner, key);
        }
        last.1.clone()
    }

    /// The claim of `owner` to this handle's lock, with `lease_ms` as its TTL, renewed by the
    /// watchdog or not.
    fn claim(&self, owner: Owner, lease_ms: u64, renewed: bool) -> Claim {
        let key = self.key_for(owner);
        Claim {
            client: self.client.clone(),
            proto: self.proto.clone(),
            key,
            lease_ms,
            renewed,
            queue_ms: 0,
        }
    }

    /// Acquires as `owner`. `wait`: `None` without limit, zero = one attempt.
    pub(crate) fn acquire_as(
        &self,
        owner: Owner,
        lease: Option<Duration>,
        wait: Option<Duration>,
    ) -> impl Future<Output = Result<Option<Held>>> + Send + '_ {
        Self::acquire_for(self, owner, lease, None, wait)
    }

    /// The acquisition: its claim made before the future (a plain function returning an
    /// `async` block keeps one copy of what it captures; an `async fn` keeps its arguments and
    /// their moved copies both, for as long as the acquisition waits). Through a borrowed
    /// handle or an owned one (`Lock`'s `'static` futures: no block around this one keeps a
    /// second copy of the arguments).
    fn acquire_for<'a, H>(
        this: H,
        owner: Owner,
        lease: Option<Duration>,
        at_least: Option<Duration>,
        wait: Option<Duration>,
    ) -> impl Future<Output = Result<Option<Held>>> + Send + 'a
    where
        H: std::ops::Deref<Target = Handle> + Send + Sync + 'a,
    {
        // A refused claim is a ready error; the block keeps the claim itself, not the result
        // (an error's slot), and reads the handle through its own capture (no reference to
        // it, or to the claim, kept beside the wait).
        let claim = match this.acquisition_claim(owner, lease, at_least, wait) {
            Ok(claim) => claim,
            Err(e) => return Either::Left(futures::future::ready(Err(e))),
        };
        // The lease is the claim's TTL when there is one (its milliseconds: all the
        // observation reads of it).
        let leased = lease.is_some();
        Either::Right(async move {
            let seen = Observed {
                kind: this.kind,
                owner: &claim.key.field,
                wait,
                lease: leased.then(|| Duration::from_millis(claim.lease_ms)),
            };
            let acquired = engine::acquire(&claim, Wait::at_most(wait), seen).await;
            Ok(acquired?.map(|a| {
                if leased {
                    this.internal_lease_ms
                        .store(claim.lease_ms, Ordering::Relaxed);
                }
                Held::new(a.take(), owner, this.kind)
            }))
        })
    }

    /// The claim an acquisition as `owner` makes: its TTL (the lease, else the watchdog
    /// timeout raised to `at_least`) and, for a queueing kind, how long it waits in line.
    fn acquisition_claim(
        &self,
        owner: Owner,
        lease: Option<Duration>,
        at_least: Option<Duration>,
        wait: Option<Duration>,
    ) -> Result<Claim> {
        self.check()?;
        let lease_ms = match lease {
            Some(l) => lease_millis(l)?,
            None => match at_least {
                Some(floor) => clamp_millis(floor).max(self.client.watchdog_ms()),
                None => self.client.watchdog_ms(),
            },
        };
        // A queueing kind waits in line for the caller's wait time, else the configured
        // per-waiter timeout (Redisson's threadWaitTime).
        let queue_ms = match wait {
            Some(w) if !w.is_zero() => clamp_millis(w),
            _ => self.client.config().fair_wait_ms(),
        };
        Ok(Claim {
            queue_ms,
            ..self.claim(owner, lease_ms, lease.is_none())
        })
    }

    /// Releases one hold of `owner` (the Java style, without a guard).
    pub(crate) async fn unlock_as(&self, owner: Owner) -> Result<UnlockOutcome> {
        self.check()?;
        let key = self.key_for(owner);
        // The part let go says which lease mode this release is of (nothing registered: the
        // handle's lease says it, as Redisson's `internalLockLeaseTime`).
        let lease_ms = self.internal_lease_ms.load(Ordering::Relaxed);
        // The registration whose part this unlock takes: if the release leaves the owner
        // nothing, its guards (which may include the one whose part was taken) hold nothing.
        let registration = self.client.watchdog().loss_of(&key);
        let renewed = self
            .client
            .watchdog()
            .let_go(&key, None)
            .map_or(lease_ms == self.client.watchdog_ms(), |parts| parts.renewed);
        let claim = self.claim(owner, lease_ms, renewed);
        let released = claim.release(None).await?;
        if matches!(released, Release::Released | Release::NotHeld) {
            if let Some(loss) = registration {
                loss.mark_gone();
            }
        }
        let outcome = released.outcome(claim.name(), &claim.key.field)?;
        if outcome == UnlockOutcome::Released {
            self.internal_lease_ms
                .store(self.client.watchdog_ms(), Ordering::Relaxed);
        }
        Ok(outcome)
    }

    pub(crate) async fn hold_count_as(&self, owner: Owner) -> Result<u64> {
        self.check()?;
        self.claim(owner, 0, false).count().await
    }

    pub(crate) async fn is_held_as(&self, owner: Owner) -> Result<bool> {
        self.check()?;
        let field = self.field_for(owner);
        if self.proto.hold_count(&field).is_some() {
            return Ok(self.claim(owner, 0, false).count().await? > 0);
        }
        self.client.core().has_field(self.raw_name(), &field).await
    }

    pub(crate) async fn force_unlock(&self) -> Result<bool> {
        self.check()?;
        self.client.watchdog().remove_lock(self.raw_name());
        let call = self
            .proto
            .force_unlock(self.client.core().messaging().publish_command());
        let reply = self.client.core().run(call, self.raw_name()).await?;
        self.internal_lease_ms
            .store(self.client.watchdog_ms(), Ordering::Relaxed);
        if let Some(tag) = self.proto.wait_line() {
            // A local holder no longer holds it: the local queue's head tries at once.
            self.client
                .wait_lines()
                .released(tag, self.raw_name(), true, None);
        }
        flag(&reply, self.raw_name())
    }

    pub(crate) async fn is_locked(&self) -> Result<bool> {
        self.check()?;
        let core = self.client.core();
        match self.proto.is_locked() {
            Query::Exists(key) => core.exists(&key, self.raw_name()).await,
            Query::Script(call) => flag(&core.run(call, self.raw_name()).await?, self.raw_name()),
        }
    }

    /// Local waiters of this lock (any owner).
    pub(crate) fn local_waiters(&self) -> usize {
        match self.proto.sleep() {
            SleepRule::Channel(channel) => self.client.stats().channel_waiters(&channel),
            // One channel per waiter (`<prefix><owner field>`, an owner field holding a ':').
            SleepRule::OwnChannel { prefix } => self
                .client
                .stats()
                .channels
                .iter()
                .filter(|(channel, _)| {
                    channel
                        .strip_prefix(prefix.as_str())
                        .is_some_and(|field| field.contains(':'))
                })
                .map(|(_, n)| n)
                .sum(),
            SleepRule::BackOff(_) => 0,
        }
    }

    pub(crate) async fn remaining_ttl(&self) -> Result<Ttl> {
        self.check()?;
        self.client.core().ttl(self.raw_name()).await
    }
}

/// A distributed lock of kind `K`, bound to one [`Owner`]. The aliases name the kinds:
/// [`RLock`](crate::RLock), [`FairLock`](crate::FairLock), [`ReadLock`](crate::ReadLock) and
/// [`WriteLock`](crate::WriteLock) (the halves of a [`ReadWriteLock`](crate::ReadWriteLock)),
/// [`FencedLock`](crate::FencedLock), [`SpinLock`](crate::SpinLock). Every kind has the methods
/// below; kind-specific ones (e.g. [`FencedLock::token`](Lock::<crate::Fenced>::token)) are on
/// that kind.
///
/// # Owners
/// A handle made by a `Client::get_*` method acts for its caller: each acquisition is made by
/// the calling task ([`Owner::current`]; outside a task, the calling thread), as Redisson's by
/// the calling thread. Tasks sharing a handle (a clone, an `Arc`) exclude each other; a task
/// that locks again re-enters, through this handle or another of the same client and name.
/// Branches of one task (`join!`, `select!`) are one owner. A handle made with
/// `get_*_with_owner` is bound to that owner whichever task calls it (sharing on purpose).
///
/// # Owned futures
/// The acquisition methods (`lock*`, `try_lock*`) return `'static` futures that hold their own
/// reference to the handle, so they can be spawned directly: `tokio::spawn(lock.lock())`. The
/// owner is taken when the method is called: the spawned acquisition acts for the task that
/// called `lock()`.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// use std::time::Duration;
/// let lock = client.get_lock("invoice:42");
/// if let Some(guard) = lock.try_lock_for(Duration::from_secs(2)).await? {
///     assert_eq!(lock.hold_count().await?, 1);
///     let again = lock.lock().await?; // same owner: re-entry
///     assert_eq!(lock.hold_count().await?, 2);
///     drop(again);
///     guard.unlock().await?;
/// }
/// // The acquisition future owns what it needs: spawn it.
/// let task = tokio::spawn(lock.lock());
/// let guard = task.await.expect("task")?;
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
pub struct Lock<K: Kind> {
    pub(crate) handle: Arc<Handle>,
    _kind: PhantomData<fn() -> K>,
}

/// A clone is the same handle: same lock, same [`Owner`] (acquisitions through either re-enter).
/// Cloning is cheap (one reference count).
impl<K: Kind> Clone for Lock<K> {
    fn clone(&self) -> Self {
        Self {
            handle: self.handle.clone(),
            _kind: PhantomData,
        }
    }
}

impl<K: Kind> std::fmt::Debug for Lock<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lock")
            .field("kind", &K::NAME)
            .field("name", &self.raw_name())
            .field("owner", &self.owner_field())
            .finish()
    }
}

impl<K: Kind> Lock<K> {
    /// The lock `name` of kind `K` (through the name mapper), acting for `owner` (`None`: for
    /// each caller), with the protocol `protocol` makes of the raw name: what every
    /// `Client::get_*` factory returns.
    pub(crate) fn new<P: Protocol>(
        client: &Client,
        name: &str,
        owner: Option<Owner>,
        protocol: impl FnOnce(String) -> P,
    ) -> Self {
        let mut handle = Handle::new(client.clone(), name, owner, |raw| Arc::new(protocol(raw)));
        handle.kind = K::NAME;
        Self {
            handle: Arc::new(handle),
            _kind: PhantomData,
        }
    }

    /// The acquisition future of every `lock*`/`try_lock*` method: it owns a reference to the
    /// handle, so it is `'static` and can be spawned.
    fn acquisition(
        &self,
        lease: Option<Duration>,
        wait: Option<Duration>,
    ) -> impl Future<Output = Result<Option<Guard<K>>>> + Send + 'static {
        let owner = self.handle.owner();
        // Boxed: the acquisition's state machine is under a KiB (728 bytes in a release build,
        // far more in debug builds), and a caller that awaits several kinds in one function (a
        // match over lock kinds) would otherwise carry a slot for each on its stack: a
        // debug-built `lock-peer` overflowed its worker thread's 2 MiB. One allocation per
        // acquisition.
        Box::pin(
            Handle::acquire_for(self.handle.clone(), owner, lease, None, wait)
                .map(|held| Ok(held?.map(Guard::new))),
        )
    }

    /// One attempt in watchdog mode with a TTL of at least `at_least` from the start (a
    /// run-once job's): renewed while its guard lasts, and held until `at_least` even if
    /// nothing renews it (renewals only ever raise a TTL; see [`Handle::acquisition_claim`]).
    pub(crate) fn try_lock_at_least(
        &self,
        at_least: Duration,
    ) -> impl Future<Output = Result<Option<Guard<K>>>> + Send + 'static {
        let owner = self.handle.owner();
        let once = Some(Duration::ZERO);
        Box::pin(
            Handle::acquire_for(self.handle.clone(), owner, None, Some(at_least), once)
                .map(|held| Ok(held?.map(Guard::new))),
        )
    }

    /// The user-facing name (before the name mapper).
    pub fn name(&self) -> &str {
        self.handle
            .rare
            .as_ref()
            .and_then(|r| r.user_name.as_deref())
            .unwrap_or_else(|| self.handle.raw_name())
    }

    /// The raw name in Redis (after the name mapper).
    pub fn raw_name(&self) -> &str {
        self.handle.raw_name()
    }

    /// The owner a call made now acts for: the owner bound to the handle
    /// (`get_*_with_owner`), else the calling task's ([`Owner::current`]).
    pub fn owner(&self) -> Owner {
        self.handle.owner()
    }

    /// The hash field [`owner`](Self::owner) writes (`<client uuid>:<owner id>`, plus `:write`
    /// for a write lock).
    pub fn owner_field(&self) -> String {
        self.handle.key_for(self.handle.owner()).field.to_string()
    }

    /// Waits without limit and acquires in watchdog mode: the key's TTL is the watchdog
    /// timeout and the watchdog renews it until the guard is released.
    ///
    /// # Errors
    /// [`InvalidArgument`](Error::InvalidArgument) for an empty name,
    /// [`WrongType`](Error::WrongType) if the key holds another type, a Redis or connection
    /// error, [`Shutdown`](Error::Shutdown) after the client was shut down,
    /// [`NotReplicated`](Error::NotReplicated) when replica sync is on and no replica
    /// acknowledged the acquisition (it was undone; a waiting call has tried again
    /// [`retry_attempts`](crate::Config::retry_attempts) times first, a single try has not).
    ///
    /// # Cancel safety
    /// Cancel safe: if the future is dropped, no subscription, queue entry, watchdog
    /// registration or hold is left behind (an acquisition that completes after the drop is
    /// released at once).
    pub fn lock(&self) -> impl Future<Output = Result<Guard<K>>> + Send + 'static {
        let acquire = self.acquisition(None, None);
        async move { acquire.await.map(unbounded) }
    }

    /// Waits without limit and acquires with a fixed lease: the lock expires after `lease`
    /// unless released earlier; no watchdog.
    ///
    /// # Errors
    /// As [`lock`](Self::lock); a zero or overflowing lease is
    /// [`InvalidArgument`](Error::InvalidArgument).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`lock`](Self::lock).
    pub fn lock_with_lease(
        &self,
        lease: Duration,
    ) -> impl Future<Output = Result<Guard<K>>> + Send + 'static {
        let acquire = self.acquisition(Some(lease), None);
        async move { acquire.await.map(unbounded) }
    }

    /// One attempt, no waiting: `Ok(None)` if another owner holds the lock. Watchdog mode.
    ///
    /// Returns `Result<Option<_>>` rather than tokio's `Result<_, TryLockError>` because here a
    /// busy lock and a Redis failure are different things: `?` propagates the failure and the
    /// `Option` says whether the lock was free.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`lock`](Self::lock).
    pub fn try_lock(&self) -> impl Future<Output = Result<Option<Guard<K>>>> + Send + 'static {
        self.acquisition(None, Some(Duration::ZERO))
    }

    /// Waits at most `wait` (zero: one attempt; `Duration::MAX`: without limit). Watchdog
    /// mode.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`lock`](Self::lock).
    pub fn try_lock_for(
        &self,
        wait: Duration,
    ) -> impl Future<Output = Result<Option<Guard<K>>>> + Send + 'static {
        self.acquisition(None, Some(wait))
    }

    /// Waits at most `wait`, then holds for at most `lease` (no watchdog).
    ///
    /// # Errors
    /// As [`lock_with_lease`](Self::lock_with_lease).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`lock`](Self::lock).
    pub fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> impl Future<Output = Result<Option<Guard<K>>>> + Send + 'static {
        self.acquisition(Some(lease), Some(wait))
    }

    /// Releases one hold of this handle's owner (the Java style; guards do this on drop): a
    /// hold whose guard was [kept](crate::Guard::keep) first, in the order kept, so a guard
    /// that still follows its own hold keeps it. A partial release re-arms the TTL to the
    /// latest lease used through this handle.
    ///
    /// # Errors
    /// [`NotHeld`](Error::NotHeld) if the owner does not hold the lock; a Redis or connection
    /// error after the configured retries.
    ///
    /// # Cancel safety
    /// If the future is dropped, the release may or may not have reached Redis (a later
    /// `unlock` then finds the count one lower); watchdog renewal of this hold has stopped.
    pub async fn unlock(&self) -> Result<UnlockOutcome> {
        self.handle.unlock_as(self.handle.owner()).await
    }

    /// Deletes the lock whoever holds it and wakes waiters; `true` if it was locked. Holders in
    /// this client are told their lock is lost; others learn it at their next renewal.
    ///
    /// # Errors
    /// A Redis or connection error; [`WrongType`](Error::WrongType) for a key of another type
    /// (nothing is deleted then).
    ///
    /// # Cancel safety
    /// If the future is dropped the deletion may or may not have happened.
    pub async fn force_unlock(&self) -> Result<bool> {
        self.handle.force_unlock().await
    }

    /// `true` if any owner holds the lock.
    ///
    /// # Errors
    /// A Redis or connection error.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn is_locked(&self) -> Result<bool> {
        self.handle.is_locked().await
    }

    /// `true` if this handle's owner holds the lock.
    ///
    /// # Errors
    /// A Redis or connection error.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn is_held_by_current(&self) -> Result<bool> {
        self.handle.is_held_as(self.handle.owner()).await
    }

    /// This handle's owner's hold count (0 if not held).
    ///
    /// # Errors
    /// A Redis or connection error.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn hold_count(&self) -> Result<u64> {
        self.handle.hold_count_as(self.handle.owner()).await
    }

    /// Remaining time to live of the lock key.
    ///
    /// # Errors
    /// A Redis or connection error.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn remaining_ttl(&self) -> Result<Ttl> {
        self.handle.remaining_ttl().await
    }

    /// Number of acquisitions of this lock (by any owner) waiting in this client, asleep on the
    /// lock's channel or queued behind its first waiter: a local count, no Redis call. The spin lock, which polls, always has 0. For
    /// the client as a whole see [`Client::stats`](crate::Client::stats).
    pub fn local_waiters(&self) -> usize {
        self.handle.local_waiters()
    }
}

fn unbounded<T>(acquired: Option<T>) -> T {
    acquired.expect("an unbounded wait only ends by acquiring")
}

/// One part of a [`MultiLock`](crate::MultiLock) or [`RedLock`](crate::RedLock): a lock of any
/// kind, converted with `.into()`.
///
/// ```no_run
/// # fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// use redisson_lock::{LockPart, MultiLock};
/// let rw = client.get_read_write_lock("catalog");
/// let parts: Vec<LockPart> = vec![client.get_lock("a").into(), rw.into_write_lock().into()];
/// let multi = MultiLock::new(parts)?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct LockPart {
    pub(crate) handle: Arc<Handle>,
}

impl<K: Kind> From<Lock<K>> for LockPart {
    fn from(lock: Lock<K>) -> Self {
        LockPart {
            handle: lock.handle,
        }
    }
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("kind", &self.kind())
            .field("name", &self.raw_name())
            .field("owner", &self.bound)
            .finish()
    }
}
