//! Releases handed to the background (a dropped guard) are ordered before later acquisitions
//! of the same lock through the same client: an acquisition first waits, briefly, for the
//! pending background releases of that lock name to finish. So `drop(guard)` followed by
//! another owner's `try_lock()` in the same process finds the lock free.
//!
//! They also run here, at most [`IN_FLIGHT`] at a time ([`PendingReleases::spawn`]); the rest
//! wait in line, in the order they were handed over, each a small closure until its turn. A
//! release in flight holds its future (the release call, its retries, the hand-off question)
//! and its command; ten thousand guards dropped at once used to start ten thousand of them
//! together, about 13 KiB each, and the allocator kept the peak (freed, but not returned to the
//! system). In line they cost the closure (the claim), and the release rate stays what one
//! connection pipelines.

use std::{
    collections::VecDeque,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
};

use dashmap::DashMap;
use futures::future::BoxFuture;
use parking_lot::Mutex;
use tokio::{sync::Notify, time::Instant};

/// A release handed to the background, made into its future only when its turn comes.
pub(crate) type Job = Box<dyn FnOnce() -> BoxFuture<'static, ()> + Send>;

/// The most background releases in flight at once (more pipelined on one connection gain
/// nothing: the 64-owner bench row saturates the server).
pub(crate) const IN_FLIGHT: usize = 64;

#[derive(Default)]
struct Pending {
    count: AtomicUsize,
    done: Notify,
}

/// Background releases in flight, per raw lock name, and the line of those waiting to run.
#[derive(Default)]
pub(crate) struct PendingReleases {
    locks: DashMap<Arc<str>, Arc<Pending>>,
    /// Background releases in flight over every name: an acquisition skips the map lookup
    /// while there are none (the usual case).
    total: AtomicUsize,
    /// Told when `total` drops to zero.
    idle: Notify,
    backlog: Mutex<Backlog>,
}

/// The releases running (at most [`IN_FLIGHT`]) and those waiting for a turn.
#[derive(Default)]
struct Backlog {
    running: usize,
    waiting: VecDeque<Job>,
}

/// One of the tasks running background releases; dropped with its runtime while it still
/// counts as running, it frees its turn.
struct Worker {
    pending: Arc<PendingReleases>,
    running: bool,
}

impl Drop for Worker {
    fn drop(&mut self) {
        if self.running {
            self.pending.backlog.lock().running -= 1;
        }
    }
}

/// One background release in flight; dropping it marks the release finished.
pub(crate) struct InFlight {
    name: Arc<str>,
    pending: Arc<Pending>,
    owner: Arc<PendingReleases>,
}

impl PendingReleases {
    /// Records a background release of `name` that is about to start.
    pub(crate) fn begin(self: &Arc<Self>, name: &Arc<str>) -> InFlight {
        self.total.fetch_add(1, Ordering::AcqRel);
        // Counted while the map's shard is locked: the last release of the name, which removes
        // the entry under that lock when its count is zero, cannot remove it in between.
        let pending = {
            let entry = self.locks.entry(name.clone()).or_default();
            entry.count.fetch_add(1, Ordering::AcqRel);
            entry.clone()
        };
        InFlight {
            name: name.clone(),
            pending,
            owner: self.clone(),
        }
    }

    /// Runs `job` (a release begun with [`begin`](Self::begin)) on `runtime`: at once while
    /// fewer than [`IN_FLIGHT`] run, else after those handed over before it. Never blocks.
    pub(crate) fn spawn(self: &Arc<Self>, runtime: &tokio::runtime::Handle, job: Job) {
        {
            let mut backlog = self.backlog.lock();
            if backlog.running >= IN_FLIGHT {
                backlog.waiting.push_back(job);
                return;
            }
            backlog.running += 1;
        }
        let worker = Worker {
            pending: self.clone(),
            running: true,
        };
        drop(runtime.spawn(Self::work(worker, job)));
    }

    /// A worker: runs `job`, then the next waiting one, until none waits.
    async fn work(mut worker: Worker, mut job: Job) {
        loop {
            job().await;
            let next = {
                let mut backlog = worker.pending.backlog.lock();
                let next = backlog.waiting.pop_front();
                if next.is_none() {
                    // Counted down under the lock: a release handed over from now on starts a
                    // worker of its own.
                    backlog.running -= 1;
                }
                next
            };
            match next {
                Some(next) => job = next,
                None => {
                    worker.running = false;
                    return;
                }
            }
        }
    }

    /// Background releases begun and not finished (running or waiting for a turn).
    pub(crate) fn in_flight(&self) -> usize {
        self.total.load(Ordering::Acquire)
    }

    /// Waits until no background release is in flight (running or waiting for a turn), or
    /// until `until`; how many are left.
    pub(crate) async fn drained(&self, until: Instant) -> usize {
        loop {
            let idle = self.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            let left = self.total.load(Ordering::Acquire);
            if left == 0 || tokio::time::timeout_at(until, idle).await.is_err() {
                return self.total.load(Ordering::Acquire);
            }
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
        if self.owner.total.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.owner.idle.notify_waiters();
        }
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
                    drop(pending.begin(&"n".into()));
                }
            })
        };
        let mut lost = 0;
        for _ in 0..rounds {
            let release = pending.begin(&"n".into());
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

        let release = pending.begin(&"n".into());
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
        let _stuck = pending.begin(&"n".into());
        let t = Instant::now();
        pending.settle("n", t + Duration::from_millis(100)).await;
        assert_eq!(t.elapsed(), Duration::from_millis(100));
        // Other names are not held up.
        pending.settle("other", t + Duration::from_secs(5)).await;
        assert_eq!(t.elapsed(), Duration::from_millis(100));
    }

    /// Three times `IN_FLIGHT` releases handed over at once: never more than `IN_FLIGHT` run
    /// together, one waiting for its turn is not made into its future before the turn comes,
    /// the rest start in the order they were handed over, every one runs, and the counts go
    /// back to zero (no worker is left counted).
    #[tokio::test(start_paused = true)]
    async fn background_releases_run_at_most_in_flight_at_once_in_order() {
        use std::sync::atomic::AtomicUsize;
        let pending = Arc::new(PendingReleases::default());
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let started = Arc::new(parking_lot::Mutex::new(Vec::new()));
        let made = Arc::new(AtomicUsize::new(0));
        let n = IN_FLIGHT * 3;
        for i in 0..n {
            let in_flight = pending.begin(&format!("n{i}").into());
            let (running, most, started) = (running.clone(), most.clone(), started.clone());
            let made = made.clone();
            pending.spawn(
                &tokio::runtime::Handle::current(),
                Box::new(move || {
                    made.fetch_add(1, Ordering::SeqCst);
                    Box::pin(async move {
                        started.lock().push(i);
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        running.fetch_sub(1, Ordering::SeqCst);
                        drop(in_flight);
                    })
                }),
            );
        }
        assert_eq!(pending.in_flight(), n, "begun, not finished");
        // The workers run their first releases, which sleep: only theirs are made.
        for _ in 0..10_000 {
            if started.lock().len() >= IN_FLIGHT {
                break;
            }
            tokio::task::yield_now().await;
        }
        assert_eq!(
            started.lock().len(),
            IN_FLIGHT,
            "the first releases started"
        );
        assert_eq!(
            made.load(Ordering::SeqCst),
            IN_FLIGHT,
            "a release waiting for its turn is not made yet"
        );
        let start = Instant::now();
        while pending.in_flight() > 0 {
            assert!(start.elapsed() < Duration::from_secs(5), "never finished");
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        assert_eq!(most.load(Ordering::SeqCst), IN_FLIGHT);
        let order = started.lock().clone();
        assert_eq!(order.len(), n, "every release ran once");
        assert_eq!(made.load(Ordering::SeqCst), n, "and was made once");
        assert!(
            order[IN_FLIGHT..].windows(2).all(|w| w[0] < w[1]),
            "the waiting ones start in the order they were handed over"
        );
        assert_eq!(pending.backlog.lock().running, 0);
        assert!(pending.locks.is_empty());
    }
}
