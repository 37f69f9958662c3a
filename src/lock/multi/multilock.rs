//! [`MultiLock`]: all parts must be acquired (Redisson's `RedissonMultiLock`, protocol §11.1),
//! and its [`MultiGuard`].

use std::time::Duration;

use futures::future::join_all;
use tokio::time::Instant;

use super::part::{random_between, release_all};
use crate::{
    error::{Error, Result},
    lock::{front::LockPart, guard::AnyGuard},
    service::watchdog::HoldState,
    types::owner::Owner,
};

/// The worst of some states (lost before in doubt before held).
fn worst(states: impl Iterator<Item = HoldState>) -> HoldState {
    let mut out = HoldState::Held;
    for s in states {
        match s {
            HoldState::Held => {}
            HoldState::InDoubt => out = HoldState::InDoubt,
            _ => return HoldState::Lost,
        }
    }
    out
}

/// The held parts of a [`MultiLock`]; dropping it releases every part in the background.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// use redisson_lock::MultiLock;
/// let multi = MultiLock::new(vec![client.get_lock("a").into(), client.get_lock("b").into()])?;
/// let guard = multi.lock().await?;
/// assert_eq!(guard.parts().len(), 2);
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "dropping the guard releases every part at once"]
pub struct MultiGuard {
    parts: Vec<AnyGuard>,
}

impl MultiGuard {
    /// The guards of the parts, in the order of the lock's parts.
    pub fn parts(&self) -> &[AnyGuard] {
        &self.parts
    }

    /// `true` once any part is lost or in doubt (see [`state`](Self::state)).
    pub fn is_lost(&self) -> bool {
        self.parts.iter().any(AnyGuard::is_lost)
    }

    /// The worst state of the parts: [`Lost`](HoldState::Lost) if any part is lost, else
    /// [`InDoubt`](HoldState::InDoubt) if any is in doubt, else [`Held`](HoldState::Held).
    pub fn state(&self) -> HoldState {
        worst(self.parts.iter().map(AnyGuard::state))
    }

    /// Releases every part (all of them, even after an error) and returns the first error.
    ///
    /// # Errors
    /// The first part's error ([`NotHeld`](Error::NotHeld), a Redis or connection error).
    ///
    /// # Cancel safety
    /// If the future is dropped, the parts not yet released are released in the background.
    pub async fn unlock(self) -> Result<()> {
        let results = join_all(self.parts.into_iter().map(AnyGuard::unlock)).await;
        results
            .into_iter()
            .find_map(Result::err)
            .map_or(Ok(()), Err)
    }
}

/// Several locks taken as one: all parts or none (Redisson `RedissonMultiLock`).
///
/// A failed attempt releases every part it had taken, so no part stays locked. With a wait, the
/// attempt restarts from the first part until the wait is used up; each part may use the whole
/// remaining wait. With a lease, parts are taken with a lease of twice the wait (so the first
/// part cannot expire while the last is awaited) and set to the lease once all are held.
///
/// ```no_run
/// # async fn demo(a: redisson_lock::Client, b: redisson_lock::Client) -> redisson_lock::Result<()> {
/// use redisson_lock::MultiLock;
/// let multi = MultiLock::new(vec![a.get_lock("x").into(), b.get_lock("y").into()])?;
/// let guard = multi.lock().await?;
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct MultiLock {
    parts: Vec<LockPart>,
    /// The owner every part is taken as; `None` (every public constructor): each part's own
    /// (its lock handle's). The blocking facade sets the calling thread's at each call.
    owner: Option<Owner>,
}

/// Redisson's base wait per part for `lock()` retries.
const BASE_WAIT_PER_PART: Duration = Duration::from_millis(1500);

/// `true` for a wait that means "without limit": one that overflows the clock or exceeds
/// [`MAX_MILLIS`](crate::MAX_MILLIS) (`Duration::MAX` is the usual spelling).
fn is_unbounded(wait: Duration) -> bool {
    wait.as_millis() > u128::from(crate::types::millis::MAX_MILLIS)
        || Instant::now().checked_add(wait).is_none()
}

impl MultiLock {
    /// A multi-lock over `parts` (at least one).
    ///
    /// # Errors
    /// [`InvalidArgument`](Error::InvalidArgument) for an empty list.
    pub fn new(parts: Vec<LockPart>) -> Result<Self> {
        if parts.is_empty() {
            return Err(Error::InvalidArgument(
                "a MultiLock needs at least one lock".into(),
            ));
        }
        Ok(Self { parts, owner: None })
    }

    /// The same parts, each taken (and checked) as `owner` instead of its handle's owner: the
    /// blocking facade's multi-lock, built at each call for the calling thread.
    #[cfg_attr(not(feature = "blocking"), allow(dead_code))]
    pub(crate) fn as_owner(&self, owner: Owner) -> MultiLock {
        MultiLock {
            parts: self.parts.iter().map(LockPart::share).collect(),
            owner: Some(owner),
        }
    }

    /// Waits without limit; watchdog mode on every part.
    ///
    /// # Errors
    /// The first non-transient error of a part (e.g. [`WrongType`](Error::WrongType),
    /// [`Shutdown`](Error::Shutdown)); transient errors restart the attempt.
    ///
    /// # Cancel safety
    /// Cancel safe: parts taken by a dropped attempt are released.
    pub async fn lock(&self) -> Result<MultiGuard> {
        let wait = BASE_WAIT_PER_PART * self.parts.len() as u32;
        loop {
            if let Some(g) = self.attempt(Some(wait), None).await? {
                return Ok(g);
            }
        }
    }

    /// Waits without limit; every part expires after `lease`.
    ///
    /// # Errors
    /// As [`lock`](Self::lock); a zero or overflowing lease is
    /// [`InvalidArgument`](Error::InvalidArgument).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn lock_with_lease(&self, lease: Duration) -> Result<MultiGuard> {
        crate::types::millis::lease_millis(lease)?;
        loop {
            let base = BASE_WAIT_PER_PART * self.parts.len() as u32;
            let wait = if lease <= base {
                random_between(lease / 2, lease)
            } else {
                random_between(base, lease)
            };
            if let Some(g) = self.attempt(Some(wait), Some(lease)).await? {
                return Ok(g);
            }
        }
    }

    /// One attempt on every part, no waiting.
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn try_lock(&self) -> Result<Option<MultiGuard>> {
        self.attempt(None, None).await
    }

    /// Waits at most `wait` in all; watchdog mode. `Duration::MAX` waits without limit (as
    /// [`lock`](Self::lock)).
    ///
    /// # Errors
    /// As [`lock`](Self::lock).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn try_lock_for(&self, wait: Duration) -> Result<Option<MultiGuard>> {
        if is_unbounded(wait) {
            return self.lock().await.map(Some);
        }
        self.attempt(Some(wait), None).await
    }

    /// Waits at most `wait` in all; every part expires after `lease`. `Duration::MAX` waits
    /// without limit (as [`lock_with_lease`](Self::lock_with_lease)).
    ///
    /// # Errors
    /// As [`lock_with_lease`](Self::lock_with_lease).
    ///
    /// # Cancel safety
    /// Cancel safe, as [`lock`](Self::lock).
    pub async fn try_lock_with_lease(
        &self,
        wait: Duration,
        lease: Duration,
    ) -> Result<Option<MultiGuard>> {
        crate::types::millis::lease_millis(lease)?;
        if is_unbounded(wait) {
            return self.lock_with_lease(lease).await.map(Some);
        }
        self.attempt(Some(wait), Some(lease)).await
    }

    /// `true` if every part is held by its handle's owner.
    ///
    /// # Errors
    /// A Redis or connection error of a part.
    ///
    /// # Cancel safety
    /// Cancel safe (reads).
    pub async fn is_held_by_current(&self) -> Result<bool> {
        for p in &self.parts {
            if !p.handle.is_held_as(p.owner_for(self.owner)).await? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    async fn attempt(
        &self,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Result<Option<MultiGuard>> {
        let wait = wait.filter(|w| !w.is_zero());
        let deadline = wait.and_then(|w| Instant::now().checked_add(w));
        let part_lease = match (lease, wait) {
            (None, _) => None,
            // Twice the wait, capped where a lease would overflow (the wait is bounded here).
            (Some(l), Some(w)) => Some(crate::types::millis::cap(w.saturating_mul(2)).max(l)),
            (Some(l), None) => Some(l),
        };
        'restart: loop {
            let mut held: Vec<AnyGuard> = Vec::with_capacity(self.parts.len());
            for part in &self.parts {
                let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
                let part_wait = match (wait, remaining) {
                    (None, _) => Duration::ZERO,
                    (_, Some(r)) => r,
                    (Some(w), None) => w,
                };
                let got = part
                    .acquire_as(part.owner_for(self.owner), part_lease, Some(part_wait))
                    .await;
                match got {
                    Ok(Some(g)) => held.push(g),
                    Ok(None) | Err(_) => {
                        if let Err(e) = &got {
                            if !e.is_transient() {
                                release_all(held).await;
                                return Err(e.clone());
                            }
                        }
                        release_all(held).await;
                        let out_of_time =
                            deadline.is_some_and(|d| Instant::now() >= d) || wait.is_none();
                        if out_of_time {
                            return Ok(None);
                        }
                        continue 'restart;
                    }
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    release_all(held).await;
                    return Ok(None);
                }
            }
            if let (Some(lease), Some(_)) = (lease, wait) {
                for g in &mut held {
                    g.rearm_lease(lease).await?;
                }
            }
            return Ok(Some(MultiGuard { parts: held }));
        }
    }
}
