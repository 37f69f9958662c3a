//! The wake-up primitive: how a channel's messages wake its local waiters.
//!
//! How a message wakes is the channel's [`Reading`], fixed by its first subscriber: on a lock
//! channel a message `0` adds one permit (wakes one waiter), `1` wakes every waiter; on a
//! semaphore channel a message `v` wakes `v` waiters; on a count-down latch channel `0` wakes
//! every waiter (and `1`, "closed", wakes nobody). The permits of a channel's [`Wakeups`] are
//! capped at the number of its waiters, so a burst of messages cannot turn into a busy loop.

use std::{
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use tokio::sync::Semaphore;

/// How the messages of a channel wake its waiters (protocol §3.2, sync protocol §1.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reading {
    /// Lock channels: `0` wakes one waiter, `1` wakes them all.
    Lock,
    /// One owner's channel (the fair lock's channel per waiter): its waiters of this client are
    /// that owner's concurrent acquisitions. Every message wakes them all, and one leaving wakes
    /// the rest: the one that acquired leaves the lock's queue, so the others must try again
    /// (they re-enter, or queue anew).
    OwnLock,
    /// Semaphore channels (`redisson_sc:{N}`): a message `v` (the permits now available, or
    /// given back) wakes `min(v, waiters)` waiters; `v <= 0` wakes nobody.
    Permits,
    /// Count-down latch channels: `0` (the count reached zero) wakes every waiter; anything
    /// else (`1`: the count was set) wakes nobody.
    Opening,
}

impl Reading {
    /// How many waiters message `value` wakes: `None` for every one of them.
    pub(super) fn wakes(self, value: i64) -> Option<u64> {
        match (self, value) {
            (Reading::Lock, 0) => Some(1),
            (Reading::Lock, 1) | (Reading::Opening, 0) | (Reading::OwnLock, 0 | 1) => None,
            (Reading::Permits, v) if v > 0 => Some(v as u64),
            _ => Some(0),
        }
    }
}

/// The wake-ups of one channel: a semaphore whose permits are capped at the number of waiters.
///
/// A message `0` adds one permit (wakes one waiter), `1` (or a lag, or a reconnect) tops the
/// permits up to the number of waiters (wakes them all). A waiter takes one permit per wake-up.
#[derive(Debug)]
pub(crate) struct Wakeups {
    waiters: AtomicUsize,
    permits: Semaphore,
}

impl Wakeups {
    pub(crate) fn new(waiters: usize) -> Self {
        Self {
            waiters: AtomicUsize::new(waiters),
            permits: Semaphore::new(0),
        }
    }

    pub(super) fn join(&self) {
        self.waiters.fetch_add(1, Ordering::AcqRel);
    }

    /// One waiter leaves; returns how many are left.
    pub(super) fn leave(&self) -> usize {
        self.waiters.fetch_sub(1, Ordering::AcqRel) - 1
    }

    pub(crate) fn waiters(&self) -> usize {
        self.waiters.load(Ordering::Acquire)
    }

    /// Message `0`: wake one waiter (unless every waiter already has a permit).
    pub(crate) fn wake_one(&self) {
        self.wake(1);
    }

    /// Wakes `n` waiters, never more than there are waiters without a permit.
    pub(crate) fn wake(&self, n: u64) {
        let missing = self
            .waiters()
            .saturating_sub(self.permits.available_permits());
        let add = usize::try_from(n).unwrap_or(usize::MAX).min(missing);
        if add > 0 {
            self.permits.add_permits(add);
        }
    }

    /// Message `1`, a lagged stream or a reconnect: wake every waiter.
    pub(crate) fn wake_all(&self) {
        let waiters = self.waiters();
        let available = self.permits.available_permits();
        if available < waiters {
            self.permits.add_permits(waiters - available);
        }
    }

    /// Sleeps until a wake-up or `max` passes (`None`: no bound). `true` when woken.
    ///
    /// The timeout wraps the semaphore's own future, nothing around them both: every parked
    /// waiter carries this future (an `async fn` here kept its arguments and the acquisition
    /// beside the timeout that holds it).
    pub(crate) fn wait(
        &self,
        max: Option<Duration>,
    ) -> impl std::future::Future<Output = bool> + Send + '_ {
        use futures::{future::Either, FutureExt};
        let woken = |permit: Result<tokio::sync::SemaphorePermit<'_>, _>| match permit {
            Ok(p) => {
                p.forget();
                true
            }
            // Closed: never, the semaphore lives as long as the channel.
            Err(tokio::sync::AcquireError { .. }) => false,
        };
        let acquire = self.permits.acquire();
        match max {
            Some(d) => Either::Left(tokio::time::timeout(d, acquire).map(move |r| match r {
                Ok(permit) => woken(permit),
                Err(_) => false,
            })),
            None => Either::Right(acquire.map(woken)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn permits_are_capped_at_the_number_of_waiters() {
        let wakeups = Wakeups::new(2);
        for _ in 0..10 {
            wakeups.wake_one();
        }
        assert_eq!(
            wakeups.permits.available_permits(),
            2,
            "a burst wakes at most everyone"
        );
        wakeups.wake_all();
        assert_eq!(wakeups.permits.available_permits(), 2);
        assert!(wakeups.wait(Some(Duration::ZERO)).await);
        assert!(wakeups.wait(Some(Duration::ZERO)).await);
        assert!(
            !wakeups.wait(Some(Duration::from_millis(5))).await,
            "no permit left"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn message_zero_wakes_one_waiter_and_one_wakes_all() {
        let wakeups = Arc::new(Wakeups::new(3));
        let sleepers: Vec<_> = (0..3)
            .map(|_| {
                let l = wakeups.clone();
                tokio::spawn(async move { l.wait(Some(Duration::from_secs(60))).await })
            })
            .collect();
        tokio::task::yield_now().await;
        wakeups.wake_one();
        tokio::time::sleep(Duration::from_millis(1)).await;
        let woken = sleepers.iter().filter(|s| s.is_finished()).count();
        assert_eq!(woken, 1, "message 0 wakes exactly one waiter");
        wakeups.wake_all();
        for s in sleepers {
            assert!(tokio::time::timeout(Duration::from_millis(1), s)
                .await
                .expect("woken by message 1")
                .unwrap());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_without_a_message_sleeps_its_whole_bound() {
        let wakeups = Wakeups::new(1);
        let start = tokio::time::Instant::now();
        assert!(!wakeups.wait(Some(Duration::from_millis(250))).await);
        assert_eq!(start.elapsed(), Duration::from_millis(250));
    }

    #[test]
    fn each_reading_wakes_as_its_object_does() {
        assert_eq!(Reading::Lock.wakes(0), Some(1));
        assert_eq!(Reading::Lock.wakes(1), None);
        assert_eq!(Reading::Lock.wakes(7), Some(0));
        assert_eq!(Reading::Permits.wakes(3), Some(3));
        assert_eq!(Reading::Permits.wakes(1), Some(1));
        assert_eq!(Reading::Permits.wakes(0), Some(0));
        assert_eq!(Reading::Permits.wakes(-2), Some(0));
        assert_eq!(Reading::Opening.wakes(0), None);
        assert_eq!(Reading::Opening.wakes(1), Some(0));
        assert_eq!(Reading::OwnLock.wakes(0), None);
        assert_eq!(Reading::OwnLock.wakes(1), None);
        assert_eq!(Reading::OwnLock.wakes(7), Some(0));
    }

    #[tokio::test(start_paused = true)]
    async fn a_permits_message_wakes_as_many_waiters_as_it_names_capped_at_the_waiters() {
        let wakeups = Wakeups::new(4);
        wakeups.wake(3);
        assert_eq!(wakeups.permits.available_permits(), 3);
        wakeups.wake(3);
        assert_eq!(
            wakeups.permits.available_permits(),
            4,
            "capped at the waiters"
        );
        wakeups.wake(u64::MAX);
        assert_eq!(wakeups.permits.available_permits(), 4);
    }

    #[test]
    fn leaving_counts_down_and_caps_follow_the_waiters() {
        let wakeups = Wakeups::new(1);
        wakeups.join();
        assert_eq!(wakeups.waiters(), 2);
        assert_eq!(wakeups.leave(), 1);
        wakeups.wake_all();
        wakeups.wake_all();
        assert_eq!(wakeups.permits.available_permits(), 1);
    }
}
