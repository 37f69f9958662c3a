//! The guard of an acquired lock: one generic type for every kind.

use std::{marker::PhantomData, sync::Arc, time::Duration};

use tokio::time::Instant;

use super::{
    claim::{Acquired, Claim},
    protocol::{AnyKind, Kind, Release, UnlockOutcome},
};
use crate::{
    error::{Error, Result},
    service::watchdog::{HoldState, LossSignal, Watched},
    types::owner::Owner,
};

/// One hold of an acquired lock of kind `K`. The aliases name the usual ones:
/// [`LockGuard`](crate::LockGuard), [`FairGuard`](crate::FairGuard),
/// [`ReadGuard`](crate::ReadGuard), [`WriteGuard`](crate::WriteGuard),
/// [`FencedGuard`](crate::FencedGuard) (with its [`token`](Guard::<crate::Fenced>::token)),
/// [`SpinGuard`](crate::SpinGuard), and [`AnyGuard`] for guards of mixed kinds.
///
/// # Drop
/// Dropping the guard stops its watchdog renewal at once and hands the release to the client's
/// runtime: drop never blocks and never panics, and a failure is logged, not returned. The
/// release is sent after the drop returns, so another owner's acquisition that starts right
/// after the drop may still find the lock held for one round trip (it then waits for the
/// release's unlock message like any other waiter). Use [`unlock`](Self::unlock) to release
/// before going on and to see errors.
///
/// A guard is `Send + Sync + 'static`: it remembers its owner, so releasing it never depends on
/// the task or thread that drops it.
///
/// # Knowing when the lock is lost
/// [`state`](Self::state), [`is_lost`](Self::is_lost) and [`lost`](Self::lost). A hold is
/// *lost* for a watchdog lock when renewal finds the lock gone, or when the watchdog could not
/// renew it before its deadline (last successful acquire/renew send time + timeout − drift);
/// for a leased lock, when the lease (minus drift) has run out. Every guard of one owner's hold
/// of one lock (its re-entries, watchdog and leased alike) shares that hold's state and
/// deadline, as the key in Redis does: the hold lives as long as its longest part, is renewed
/// while a part without a lease remains, and a partial release sets the deadline to what the
/// parts left need (the guide's `docs/locks.md`, "One owner, two
/// lease modes"). A hold is *in doubt* from the moment the connection to the lock's
/// node drops or a command to it times out (the node may have restarted without its data, or
/// failed over), until a renewal sent on the new connection confirms the owner (a leased hold:
/// the owner's field is found after the reconnect). `lost()` fires and `is_lost()` answers
/// `true` in both cases.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// use std::time::Duration;
/// let guard = client.get_lock("report").lock().await?;
/// tokio::select! {
///     _ = guard.lost() => eprintln!("lock lost: stop writing"),
///     _ = tokio::time::sleep(Duration::from_secs(1)) => {} // the work
/// }
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping the guard releases the lock at once"]
pub struct Guard<K: Kind> {
    /// Boxed: a guard is moved through futures and tasks (every acquisition's output slot is a
    /// guard's size, a waiting task carries the slot) and kept in callers' collections; a
    /// pointer there, the hold once on the heap.
    held: Box<Held>,
    _kind: PhantomData<fn() -> K>,
}

/// A guard of any kind, e.g. a part of a [`MultiGuard`](crate::MultiGuard).
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// use redisson_lock::AnyGuard;
/// let guards: Vec<AnyGuard> = vec![
///     client.get_lock("a").lock().await?.erase(),
///     client.get_fenced_lock("b").lock().await?.erase(),
/// ];
/// assert!(guards[1].token().is_some());
/// # Ok(()) }
/// ```
pub type AnyGuard = Guard<AnyKind>;

/// What a guard holds, whatever its kind; releases on drop unless consumed.
pub(crate) struct Held {
    claim: Claim,
    owner: Owner,
    /// The guard's parts of its owner's hold, and the hold's loss signal (shared by every guard
    /// of that hold); followed (released on drop) until let go or kept.
    watched: Watched,
    token: Option<u64>,
    /// The owner's hold this guard is part of: its release sends nothing once the owner's hold
    /// is a later one.
    generation: u64,
    /// The kind's name and when the hold began, for observability.
    kind: &'static str,
    since: Instant,
}

impl Held {
    /// The hold an acquisition made (registered with the watchdog when it concluded).
    pub(crate) fn new(acquired: Acquired, owner: Owner, kind: &'static str) -> Self {
        let Acquired {
            claim,
            token,
            generation,
            watched,
            ..
        } = acquired;
        crate::observe::guard_opened(kind);
        Self {
            claim,
            owner,
            watched,
            token,
            generation,
            kind,
            since: Instant::now(),
        }
    }

    /// Lets this guard's parts go and returns the hold for a release the caller makes.
    fn take(&mut self) -> Claim {
        self.disarm();
        self.claim.clone()
    }

    /// Lets this guard's parts go without a release (idempotent).
    fn disarm(&mut self) {
        self.watched.let_go(self.claim.client.watchdog());
    }

    fn loss(&self) -> &Arc<LossSignal> {
        self.watched.loss()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        crate::observe::guard_closed(self.kind, self.since.elapsed());
        if self.watched.is_followed() {
            let claim = self.take();
            // A hold known gone is not released: the owner's count in Redis is that of a later
            // acquisition now.
            if self.loss().is_gone() {
                claim.released_nothing();
            } else {
                claim.release_in_background(Some(self.generation));
            }
        }
    }
}

impl<K: Kind> std::fmt::Debug for Guard<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard")
            .field("kind", &K::NAME)
            .field("lock", &self.held.claim.name())
            .field("owner", &self.held.claim.key.field)
            .field("watchdog", &self.held.claim.renewed)
            .finish()
    }
}

impl<K: Kind> Guard<K> {
    pub(crate) fn new(held: Held) -> Self {
        Self {
            held: Box::new(held),
            _kind: PhantomData,
        }
    }

    /// The raw lock name in Redis.
    pub fn name(&self) -> &str {
        self.held.claim.name()
    }

    /// The owner that holds this hold.
    pub fn owner(&self) -> Owner {
        self.held.owner
    }

    /// The hash field of the owner: `<client uuid>:<owner id>` (plus `:write` for a write lock).
    pub fn owner_field(&self) -> &str {
        &self.held.claim.key.field
    }

    /// `true` when the lock is kept alive by the watchdog (taken without a lease).
    pub fn is_watchdog(&self) -> bool {
        self.held.claim.renewed
    }

    /// `true` unless the hold is [`Held`](HoldState::Held): `true` while it is
    /// [`InDoubt`](HoldState::InDoubt) (the connection to its node dropped or timed out, so
    /// another client may hold the lock) and once it is [`Lost`](HoldState::Lost). A hold in
    /// doubt that a renewal confirms turns back to `false`; a lost one never does.
    pub fn is_lost(&self) -> bool {
        self.state() != HoldState::Held
    }

    /// Where the hold stands: [`Held`](HoldState::Held), [`InDoubt`](HoldState::InDoubt)
    /// from the moment the connection to the lock's node drops (or a command to it times out)
    /// until a renewal sent on the new connection confirms the owner, or
    /// [`Lost`](HoldState::Lost) for good (the owner's field was found gone, the lock was
    /// force-unlocked, or the deadline passed unrenewed).
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// use redisson_lock::HoldState;
    /// let guard = client.get_lock("report").lock().await?;
    /// match guard.state() {
    ///     HoldState::Held => { /* write */ }
    ///     HoldState::InDoubt => { /* pause writes until it is confirmed or lost */ }
    ///     _ => return Ok(()), // lost: stop
    /// }
    /// # Ok(()) }
    /// ```
    pub fn state(&self) -> HoldState {
        self.held.loss().state()
    }

    /// The instant (monotonic clock) until which the lock is known to be held, unless lost
    /// earlier. The watchdog moves it forward at every renewal.
    pub fn valid_until(&self) -> Instant {
        self.held.loss().deadline()
    }

    /// Resolves when the lock is lost or in doubt (when [`is_lost`](Self::is_lost) turns
    /// `true`). Use it with `select!` to abort work that must not continue without the lock.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future has no effect on the lock.
    pub async fn lost(&self) {
        self.held.loss().wait_not_held().await
    }

    /// Resolves once the hold is not [`InDoubt`](HoldState::InDoubt), with its state:
    /// [`Held`](HoldState::Held) (confirmed, or never in doubt) or [`Lost`](HoldState::Lost).
    /// A holder that paused its work when the hold went in doubt waits here to resume or to
    /// give up.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future has no effect on the lock.
    pub async fn settled(&self) -> HoldState {
        self.held.loss().wait_settled().await
    }

    /// Releases this hold and reports the outcome. Watchdog renewal for this hold stops
    /// whatever the outcome.
    ///
    /// # Errors
    /// [`NotHeld`](Error::NotHeld) if the owner no longer holds the lock (it expired or was
    /// force-unlocked), or without a call when the watchdog already found this hold gone (a
    /// release would then take a hold its owner acquired since); a Redis or connection error
    /// after the configured retries.
    ///
    /// # Cancel safety
    /// If the future is dropped, the release may or may not have reached Redis; the hold is
    /// no longer renewed either way, so it ends at the latest when its TTL runs out.
    pub async fn unlock(mut self) -> Result<UnlockOutcome> {
        let claim = self.held.take();
        let outcome = if self.held.loss().is_gone() {
            // Renewal found this hold gone: a release would take a later hold of its owner.
            claim.released_nothing();
            Release::NotHeld
        } else {
            claim.release(Some(self.held.generation)).await?
        };
        outcome.outcome(claim.name(), &claim.key.field)
    }

    /// Gives up the guard without releasing the hold: the lock stays held (and renewed, in
    /// watchdog mode) until the owner releases it through its lock handle
    /// ([`Lock::unlock`](crate::Lock::unlock)) or it is force-unlocked. This is the Java style of
    /// `lock()` … `unlock()`.
    pub fn keep(mut self) {
        // Its parts stay registered: a part without a lease is renewed, a leased one counts
        // until its end.
        self.held.watched.keep(self.held.claim.client.watchdog());
    }

    /// The same guard, type-erased (to keep guards of several kinds together).
    pub fn erase(self) -> AnyGuard {
        Guard {
            held: self.held,
            _kind: PhantomData,
        }
    }

    /// Sets a held lock's TTL to `lease` from now (owner-checked) and moves its deadline
    /// accordingly. Used by the multi-lock after taking its parts with a longer lease.
    ///
    /// The hold keeps its loss signal (as [`renew`](Self::renew) does): a part in doubt (a
    /// connection drop, a Sentinel failover under way) stays in doubt until it is checked,
    /// and a lost one stays lost. A fresh signal here made a part taken during a failover
    /// `Held` while a plain leased guard taken at the same moment was `InDoubt` (issue 29).
    pub(crate) async fn rearm_lease(&mut self, lease: Duration) -> Result<()> {
        if !self.renew(lease).await? {
            self.held.loss().mark_lost();
            return Err(Error::LockLost {
                lock: self.name().to_owned(),
            });
        }
        self.held.claim.lease_ms = lease.as_millis() as u64;
        Ok(())
    }

    /// Owner-checked set of the lock's TTL to exactly `lease` from now (a RedLock's extension,
    /// a multi-lock part set to its lease): every guard of the owner's hold follows it, and this
    /// guard's leased part now ends then.
    pub(crate) async fn renew(&self, lease: Duration) -> Result<bool> {
        self.held
            .claim
            .set_ttl(lease, self.held.watched.lease_part())
            .await
    }

    pub(crate) fn token_value(&self) -> Option<u64> {
        self.held.token
    }

    /// The hold's loss signal, for code that watches the hold without owning the guard (the
    /// recipes' [`HoldWatch`](crate::HoldWatch)).
    pub(crate) fn loss_signal(&self) -> Arc<LossSignal> {
        self.held.loss().clone()
    }

    /// Ends the guard without releasing the hold, keeping it until `until` (a run-once job's
    /// `at_least`, taken with a TTL that covers it): its renewal stops, and the key's TTL is
    /// set (owner-checked) to what is left until then, so the lock frees at `until` rather than
    /// at the last renewal's end. Returns at once without a call when the hold is known gone
    /// or `until` has passed (then the hold is released).
    ///
    /// Whatever happens to the call (an error, the future dropped), the hold is no longer
    /// renewed and nothing releases it: the key's TTL set by the acquisition covers `until`
    /// (renewals only ever raise a TTL), so the lock is free at `until` or, when the last
    /// renewal reached further, at that renewal's end.
    pub(crate) async fn keep_until(mut self, until: Instant) -> Result<bool> {
        let left = until.saturating_duration_since(Instant::now());
        if left < Duration::from_millis(1) {
            return self.unlock().await.map(|_| true);
        }
        let claim = self.held.claim.clone();
        let part = self.held.watched.lease_part();
        self.held.disarm();
        if self.held.loss().is_gone() {
            return Ok(false);
        }
        claim.set_ttl(left, part).await
    }
}

impl AnyGuard {
    /// The fencing token of this acquisition if the lock is a fenced lock.
    pub fn token(&self) -> Option<u64> {
        self.token_value()
    }
}
