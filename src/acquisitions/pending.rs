//! Releases handed to the background (a dropped guard) are ordered before later acquisitions
//! of the same lock through the same client: an acquisition first waits, briefly, for the
//! pending background releases of that lock name to finish. So `drop(guard)` followed by
//! another owner's `try_lock()` in the same process finds the lock free.

use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Arc,
};

use dashmap::DashMap;
use tokio::{sync::Notify, time::Instant};

#[derive(Default)]
struct Pending {
    count: AtomicUsize,
    done: Notify,
}

/// Background releases in flight, per raw lock name.
#[derive(Default)]
pub(crate) struct PendingReleases {
    locks: DashMap<String, Arc<Pending>>,
    /// Background releases in flight over every name: an acquisition skips the map lookup
    /// while there are none (the usual case).
    total: AtomicUsize,
}

/// One background release in flight; dropping it marks the release finished.
pub(crate) struct InFlight {
    name: String,
    pending: Arc<Pending>,
    owner: Arc<PendingReleases>,
}

impl PendingReleases {
    /// Records a background release of `name` that is about to start.
    pub(crate) fn begin(self: &Arc<Self>, name: &str) -> InFlight {
        self.total.fetch_add(1, Ordering::AcqRel);
        // Counted while the map's shard is locked: the last release of the name, which removes
        // the entry under that lock when its count is zero, cannot remove it in between.
        let pending = {
            let entry = self.locks.entry(name.to_owned()).or_default();
            entry.count.fetch_add(1, Ordering::AcqRel);
            entry.clone()
        };
        InFlight {
            name: name.to_owned(),
            pending,
            owner: self.clone(),
        }
    }

    /// Waits until no background release of `name` is in flight, or until `until`.
    pub(crate) async fn settle(&self, name: &str, until: Instant) {
        if self.total.load(Ordering::Acquire) == 0 {
            return;
        }
        let Some(pending) = self.locks.get(name).map(|p| p.clone()) else {
            return;
        };
        loop {
            let notified = pending.done.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if pending.count.load(Ordering::Acquire) == 0 {
                return;
            }
            if tokio::time::timeout_at(until, notified).await.is_err() {
                return;
            }
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let last = self.pending.count.fetch_sub(1, Ordering::AcqRel) == 1;
        if last {
            self.owner
                .locks
                .remove_if(&self.name, |_, p| p.count.load(Ordering::Acquire) == 0);
            self.pending.done.notify_waiters();
        }
        self.owner.total.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    /// A release begun while the last one of the same lock ends stays visible to `settle`: its
    /// entry is never removed while it is counted.
    #[test]
    fn a_release_begun_while_the_last_one_ends_stays_in_the_map() {
        let pending = Arc::new(PendingReleases::default());
        let rounds = 400_000;
        let churn = {
            let pending = pending.clone();
            std::thread::spawn(move || {
                for _ in 0..rounds {
                    drop(pending.begin("n"));
                }
            })
        };
        let mut lost = 0;
        for _ in 0..rounds {
            let release = pending.begin("n");
            let seen = pending
                .locks
                .get("n")
                .is_some_and(|p| Arc::ptr_eq(&*p, &release.pending));
            lost += usize::from(!seen);
            drop(release);
        }
        churn.join().unwrap();
        assert_eq!(lost, 0, "releases in flight whose entry was removed");
        assert!(pending.locks.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn an_acquisition_waits_for_the_release_in_flight_and_no_longer() {
        let pending = Arc::new(PendingReleases::default());
        let start = Instant::now();
        // Nothing in flight: no wait.
        pending.settle("n", start + Duration::from_secs(5)).await;
        assert_eq!(start.elapsed(), Duration::ZERO);

        let release = pending.begin("n");
        let finisher = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            drop(release);
        });
        pending.settle("n", start + Duration::from_secs(5)).await;
        assert_eq!(
            start.elapsed(),
            Duration::from_millis(30),
            "until the release finished"
        );
        finisher.await.unwrap();
        assert!(
            pending.locks.is_empty(),
            "the entry goes with the last release"
        );

        // A release that never finishes holds an acquisition up only until its bound.
        let _stuck = pending.begin("n");
        let t = Instant::now();
        pending.settle("n", t + Duration::from_millis(100)).await;
        assert_eq!(t.elapsed(), Duration::from_millis(100));
        // Other names are not held up.
        pending.settle("other", t + Duration::from_secs(5)).await;
        assert_eq!(t.elapsed(), Duration::from_millis(100));
    }
}
