//! [`RedLock`]: a quorum of independent masters, the published Redlock algorithm with drift
//! and validity; its [`RedLockOptions`] and [`RedLockGuard`].

use std::time::Duration;

use futures::future::join_all;
use tokio::time::Instant;

use super::part::{random_between, release_all};
use crate::{
    error::{Error, Result},
    lock::{front::LockPart, guard::AnyGuard},
    service::watchdog::{drift, HoldState},
    types::owner::Owner,
};

/// Options of a [`RedLock`].
///
/// ```
/// # fn demo(parts: Vec<redisson_lock::LockPart>) -> redisson_lock::Result<()> {
/// use std::time::Duration;
/// use redisson_lock::{RedLock, RedLockOptions};
/// let options = RedLockOptions::default().node_timeout(Duration::from_millis(20));
/// let red = RedLock::with_options(parts, options)?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RedLockOptions {
    /// Per-node attempt timeout; should be much smaller than the lease (distlock suggests
    /// 5–50 ms for a 10 s lease). Default: lease / 200, clamped to 5–50 ms.
    pub node_timeout: Option<Duration>,
    /// Random delay between failed rounds, drawn from this range. Default 50–200 ms.
    pub retry_delay: (Duration, Duration),
}

impl Default for RedLockOptions {
    fn default() -> Self {
        Self {
            node_timeout: None,
            retry_delay: (Duration::from_millis(50), Duration::from_millis(200)),
        }
    }
}

impl RedLockOptions {
    /// Sets [`node_timeout`](Self::node_timeout).
    #[must_use = "an options builder method returns the changed options"]
    pub fn node_timeout(mut self, timeout: Duration) -> Self {
        self.node_timeout = Some(timeout);
        self
    }

    /// Sets [`retry_delay`](Self::retry_delay): the delay between failed rounds is drawn from
    /// `min..=max`.
    #[must_use = "an options builder method returns the changed options"]
    pub fn retry_delay(mut self, min: Duration, max: Duration) -> Self {
        self.retry_delay = (min, max);
        self
    }
}

/// A lock over N independent Redis masters, held when a majority (N/2+1) accepted it within
/// its validity time: the published Redlock algorithm.
///
/// One round sends the attempt to every node at once, each bounded by the node timeout; it
/// succeeds if a quorum accepted and `validity = lease − elapsed − drift` (drift = lease × 1 % +
/// 2 ms) is positive. Otherwise every part it took is released (a part whose reply arrives after
/// its timeout is released when it arrives) and the next round starts after a random delay,
/// until the wait is used up. Each part is an ordinary [`RLock`](crate::RLock) on its node.
///
/// # Safety limits
/// Redlock's mutual exclusion holds only while the holder finishes within the validity it was
/// given, process pauses are shorter than that, node clocks do not jump, and a node that
/// restarts without its data stays out for at least one lease before rejoining. The last one is
/// enforced here: a node whose server `run_id` changed across a reconnect is not counted toward
/// a quorum until one lease has passed since it went down (nor while a reconnect is not yet
/// verified). The others cannot be checked from here. Where correctness (not just efficiency) matters, use a
/// [`FencedLock`](crate::FencedLock) and let the protected resource reject stale tokens.
///
/// ```no_run
/// # async fn demo(clients: Vec<redisson_lock::Client>) -> redisson_lock::Result<()> {
/// use std::time::Duration;
/// use redisson_lock::RedLock;
/// // One client per independent master.
/// let red = RedLock::new(clients.iter().map(|c| c.get_lock("job").into()).collect())?;
/// if let Some(guard) = red.try_lock_with_lease(Duration::from_secs(1), Duration::from_secs(10)).await? {
///     let budget = guard.validity();
///     guard.unlock().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct RedLock {
    parts: Vec<LockPart>,
    options: RedLockOptions,
    /// The owner every part is taken as; `None` (every public constructor): each part's own
    /// (its lock handle's). The blocking facade sets the calling thread's at each call.
    owner: Option<Owner>,
}

/// A held [`RedLock`].
///
/// ```no_run
/// # async fn demo(red: redisson_lock::RedLock) -> redisson_lock::Result<()> {
/// use std::time::Duration;
/// let guard = red.lock_with_lease(Duration::from_secs(10)).await?;
/// if guard.validity() > Duration::from_secs(1) {
///     // the work, finished well within the validity
/// }
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "dropping the guard releases every part at once"]
pub struct RedLockGuard {
    parts: Vec<Option<AnyGuard>>,
    quorum: usize,
    lease: Option<Duration>,
    valid_until: Instant,
    /// The configured per-node timeout (`None`: derived from the lease).
    node_timeout: Option<Duration>,
}

impl RedLockGuard {
    /// The instant until which the lock is valid (monotonic clock). For a watchdog RedLock,
    /// the time until which a quorum of parts is known to be held.
    pub fn valid_until(&self) -> Instant {
        self.deadline()
            .unwrap_or(self.valid_until.min(Instant::now()))
    }

    /// `None` when fewer than a quorum of parts are still held.
    fn deadline(&self) -> Option<Instant> {
        match self.lease {
            Some(_) => Some(self.valid_until),
            None => quorum_deadline(&self.parts, self.quorum),
        }
    }

    /// Remaining validity (zero once passed).
    pub fn validity(&self) -> Duration {
        self.valid_until().saturating_duration_since(Instant::now())
    }

    /// Number of nodes that accepted the lock.
    pub fn acquired_parts(&self) -> usize {
        self.parts.iter().filter(|p| p.is_some()).count()
    }

    /// `true` once the lock is no longer valid (validity over, or fewer than a quorum of parts
    /// still held or in doubt). A part lost because its node restarted without the key does not
    /// by itself end a leased RedLock's validity: the delayed-restart rule keeps that node out
    /// of every quorum for one lease. See [`state`](Self::state) for parts in doubt.
    pub fn is_lost(&self) -> bool {
        match self.deadline() {
            Some(d) => Instant::now() >= d,
            None => true,
        }
    }

    /// [`Lost`](HoldState::Lost) when [`is_lost`](Self::is_lost);
    /// [`InDoubt`](HoldState::InDoubt) while fewer than a quorum of parts are confirmed held
    /// (the connection to some of their nodes dropped, or a node lost the key); else
    /// [`Held`](HoldState::Held).
    pub fn state(&self) -> HoldState {
        if self.is_lost() {
            return HoldState::Lost;
        }
        let held = self
            .parts
            .iter()
            .flatten()
            .filter(|g| g.state() == HoldState::Held)
            .count();
        if held >= self.quorum {
            HoldState::Held
        } else {
            HoldState::InDoubt
        }
    }

    /// Extends a leased RedLock to `lease` from now. Every node is asked at once, each bounded
    /// by the node timeout; it counts only if a quorum of nodes extended within the new
    /// validity, and returns whether it did (`false` leaves the validity unchanged).
    ///
    /// Parts that did not extend leave the guard, whatever the overall outcome: a part whose
    /// node no longer holds the lock is dropped, and a part whose node failed or did not answer
    /// in time is released (in the background, so a node that comes back does not keep a stale
    /// hold until its lease ends). [`acquired_parts`](Self::acquired_parts) counts what is left.
    ///
    /// # Errors
    /// [`InvalidArgument`](Error::InvalidArgument) for a zero or overflowing lease (nothing is
    /// sent then). Node failures are not errors: they count as parts that did not extend.
    ///
    /// # Cancel safety
    /// If the future is dropped, some nodes may have extended and others not; the guard keeps
    /// every part and its old validity.
    pub async fn extend(&mut self, lease: Duration) -> Result<bool> {
        crate::types::millis::lease_millis(lease)?;
        let node_timeout = node_timeout(self.node_timeout, lease);
        let started = Instant::now();
        let futures = self.parts.iter().map(|p| async move {
            let g = p.as_ref()?;
            Some(
                match tokio::time::timeout(node_timeout, g.renew(lease)).await {
                    Ok(renewed) => renewed,
                    Err(_) => Err(Error::Timeout("node did not answer in time".into())),
                },
            )
        });
        let results = join_all(futures).await;
        let elapsed = started.elapsed();
        let mut extended = 0;
        for (slot, result) in self.parts.iter_mut().zip(results) {
            match result {
                None => {}
                Some(Ok(true)) => extended += 1,
                Some(Ok(false)) => {
                    // The node no longer holds it: nothing to release.
                    if let Some(g) = slot.take() {
                        g.keep();
                    }
                }
                Some(Err(e)) => {
                    log::debug!("RedLock part not extended ({e:#}); releasing it");
                    // Dropping the guard hands its release to the client's runtime.
                    drop(slot.take());
                }
            }
        }
        let validity = lease.checked_sub(elapsed + drift(lease));
        match validity {
            Some(v) if extended >= self.quorum && !v.is_zero() => {
                self.valid_until = started + (lease - drift(lease));
                self.lease = Some(lease);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Releases every part. A RedLock is built to survive failed nodes, so a part that cannot
    /// be released (its node is down; it expires after its lease) is logged, not returned; the
    /// first error is returned only when no node confirmed the release.
    ///
    /// # Errors
    /// The first part's error, when no part was released.
    ///
    /// # Cancel safety
    /// If the future is dropped, the parts not yet released are released in the background.
    pub async fn unlock(self) -> Result<()> {
        let results = join_all(self.parts.into_iter().flatten().map(AnyGuard::unlock)).await;
        let mut first_error = None;
        let mut released = 0;
        for r in results {
            match r {
                Ok(_) => released += 1,
                Err(e) => {
                    log::warn!("RedLock part not released: {e:#}");
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) if released == 0 => Err(e),
            _ => Ok(()),
        }
    }
}

/// The per-node timeout: the configured one, else lease / 200 clamped to 5–50 ms.
fn node_timeout(configured: Option<Duration>, lease: Duration) -> Duration {
    configured
        .unwrap_or_else(|| (lease / 200).clamp(Duration::from_millis(5), Duration::from_millis(50)))
}

fn quorum_deadline(parts: &[Option<AnyGuard>], quorum: usize) -> Option<Instant> {
    let mut deadlines: Vec<Instant> = parts
        .iter()
        .flatten()
        .filter(|g| g.state() != HoldState::Lost)
        .map(AnyGuard::valid_until)
        .collect();
    deadlines.sort_unstable_by(|a, b| b.cmp(a));
    deadlines.get(quorum.saturating_sub(1)).copied()
}

impl RedLock {
    /// A RedLock over one lock per independent master (at least one; use an odd number ≥ 3).
    ///
    /// # Errors
    /// [`InvalidArgument`](Error::InvalidArgument) for an empty list.
    pub fn new(parts: Vec<LockPart>) -> Result<Self> {
        Self::with_options(parts, RedLockOptions::default())
    }

    /// A RedLock with explicit options.
    ///
    /// # Errors
    /// [`InvalidArgument`](Error::InvalidArgument) for an empty list or a reversed
    /// `retry_delay` range.
    pub fn with_options(parts: Vec<LockPart>, options: RedLockOptions) -> Result<Self> {
        if parts.is_empty() {
            return Err(Error::InvalidArgument(
                "a RedLock needs at least one lock".into(),
            ));
        }
        if options.retry_delay.0 > options.retry_delay.1 {
            return Err(Error::InvalidArgument(
                "retry_delay range is reversed".into(),
            ));
        }
        Ok(Self {
            parts,
            options,
            owner: None,
        })
    }

    /// The same parts and options, each part taken as `owner` instead of its handle's owner:
    /// the blocking facade's RedLock, built at each call for the calling thread.
    #[cfg_attr(not(feature = "blocking"), allow(dead_code))]
    pub(crate) fn as_owner(&self, owner: Owner) -> RedLock {
        RedLock {
            parts: self.parts.iter().map(LockPart::share).collect(),
            options: self.options.clone(),
            owner: Some(owner),
        }
    }

    /// Votes needed: N/2 + 1.
    pub fn quorum(&self) -> usize {
        self.parts.len() / 2 + 1
    }

    /// Acquires with a lease, waiting at most `wait` (zero: one round; `Duration::MAX`: without
    /// limit).
    ///
    /// # Errors
    /// [`InvalidArgument`](Error::InvalidArgument) for a zero or overflowing lease or a bad
    /// name, [`WrongType`](Error::WrongType) from a node; other node failures only cost votes.
    ///
    /// # Cancel safety
    /// Cancel safe: parts taken by a dropped attempt are released when their replies arrive.
    pub async fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<RedLockGuard>> {
        crate::types::millis::lease_millis(lease)?;
        self.run(wait, Some(lease)).await
    }

    /// Acquires in watchdog mode (each part renewed by its client's watchdog; the lock stays
    /// valid while a quorum of parts is), waiting at most `wait` (`Duration::MAX`: without
    /// limit).
    ///
    /// # Errors
    /// As [`try_lock_with_lease`](Self::try_lock_with_lease).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`try_lock_with_lease`](Self::try_lock_with_lease).
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<RedLockGuard>> {
        self.run(wait, None).await
    }

    /// Waits without limit; leased.
    ///
    /// # Errors
    /// As [`try_lock_with_lease`](Self::try_lock_with_lease).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`try_lock_with_lease`](Self::try_lock_with_lease).
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<RedLockGuard> {
        crate::types::millis::lease_millis(lease)?;
        self.run(Duration::MAX, Some(lease))
            .await
            .map(|g| g.expect("an unbounded wait only ends by acquiring"))
    }

    async fn run(&self, wait: Duration, lease: Option<Duration>) -> Result<Option<RedLockGuard>> {
        let deadline = Instant::now().checked_add(wait);
        loop {
            if let Some(g) = self.round(lease).await? {
                return Ok(Some(g));
            }
            let now = Instant::now();
            if wait.is_zero() || deadline.is_some_and(|d| now >= d) {
                return Ok(None);
            }
            let (lo, hi) = self.options.retry_delay;
            let pause = random_between(lo, hi);
            let pause = deadline.map_or(pause, |d| pause.min(d - now));
            tokio::time::sleep(pause).await;
        }
    }

    /// One round: all nodes at once, each bounded by the node timeout.
    async fn round(&self, lease: Option<Duration>) -> Result<Option<RedLockGuard>> {
        let effective =
            lease.unwrap_or_else(|| self.parts[0].handle.client().config().lock_watchdog_timeout);
        let node_timeout = node_timeout(self.options.node_timeout, effective);
        let started = Instant::now();
        let attempts = self.parts.iter().map(|p| async move {
            // The delayed-restart rule: a node that restarted less than a lease ago (or whose
            // restart cannot be ruled out yet) may have lost a lock another holder counts on it.
            if !p.handle.client().restarts().may_vote(effective) {
                return Err(Error::Timeout(
                    "node restarted less than one lease ago; not counted".into(),
                ));
            }
            let attempt = p.acquire_as(p.owner_for(self.owner), lease, Some(Duration::ZERO));
            match tokio::time::timeout(node_timeout, attempt).await {
                Ok(Ok(g)) => Ok(g),
                Ok(Err(e)) => Err(e),
                Err(_) => Err(Error::Timeout("node did not answer in time".into())),
            }
        });
        let results = join_all(attempts).await;
        let elapsed = started.elapsed();
        let mut parts = Vec::with_capacity(results.len());
        let mut fatal = None;
        for r in results {
            match r {
                Ok(g) => parts.push(g),
                Err(e) => {
                    if matches!(e, Error::InvalidArgument(_) | Error::WrongType { .. }) {
                        fatal = Some(e);
                    }
                    parts.push(None);
                }
            }
        }
        let acquired = parts.iter().filter(|p| p.is_some()).count();
        let validity = effective.checked_sub(elapsed + drift(effective));
        let quorum = self.quorum();
        match validity {
            Some(v) if fatal.is_none() && acquired >= quorum && !v.is_zero() => {
                Ok(Some(RedLockGuard {
                    parts,
                    quorum,
                    lease,
                    valid_until: started + (effective - drift(effective)),
                    node_timeout: self.options.node_timeout,
                }))
            }
            _ => {
                release_all(parts.into_iter().flatten().collect()).await;
                match fatal {
                    Some(e) => Err(e),
                    None => Ok(None),
                }
            }
        }
    }
}
