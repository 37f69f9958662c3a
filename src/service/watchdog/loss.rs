//! What a holder watches: the [`LossSignal`] of its hold, and the deadline rule.
//!
//! Deadline rule: a hold is valid until the send time of its last successful acquire or renewal
//! plus the timeout minus a drift of `timeout × 0.01 + 2 ms`, on the monotonic clock. Redis
//! starts the TTL no earlier than the send time, so the holder always learns of a loss before
//! anybody else can take the lock (barring server clock jumps, restarts and failover).
//!
//! A signal is held, in doubt or lost ([`HoldState`]): beside its lost flag and deadline it
//! keeps the *epoch* of the connection doubt it is in (0: none). A doubt is raised to at least
//! the epoch of the event that raised it and cleared only by a renewal sent at or after that
//! epoch (`doubt.rs` says where epochs come from).

use std::{
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use parking_lot::Mutex;
use tokio::{sync::Notify, time::Instant};

/// Safety margin subtracted from a lease to get the holder-side deadline.
pub(crate) fn drift(lease: Duration) -> Duration {
    lease / 100 + Duration::from_millis(2)
}

/// The holder-side deadline of a hold whose acquire or renewal was sent at `sent_at` with a
/// TTL of `lease`.
pub(crate) fn valid_until(sent_at: Instant, lease: Duration) -> Instant {
    sent_at + lease.saturating_sub(drift(lease))
}

/// Where a hold stands, as its holder is told (see [`Guard::state`](crate::Guard::state)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HoldState {
    /// Held and confirmed: the last acquisition or renewal was acknowledged by the node, and
    /// the connection to the node has not failed since.
    Held,
    /// The connection to the lock's node dropped (or a command to it timed out, or the node
    /// left the cluster's routing) since the last confirmation: the node may have restarted
    /// without its data or failed over, so another client may hold the lock. Back to
    /// [`Held`](Self::Held) once a renewal sent after the doubt began confirms the owner (a
    /// leased hold: once the owner's field is found after the reconnect), [`Lost`](Self::Lost)
    /// if the field is gone or the deadline passes first.
    InDoubt,
    /// Lost for good: the owner's field was found gone, the lock was force-unlocked, or its
    /// deadline passed unrenewed. Never changes again.
    Lost,
}

/// Tells a holder that its lock is gone (or may be gone: its deadline passed unrenewed).
#[derive(Debug)]
pub(crate) struct LossSignal {
    lost: AtomicBool,
    /// The hold is known gone (renewal found its field absent after every acquisition of it
    /// was sent): releasing it would take a hold of a later acquisition of the same owner.
    gone: AtomicBool,
    times: Mutex<Times>,
    notify: Notify,
    /// The epoch of the connection doubt the hold is in (0: none); see `doubt`.
    doubt: AtomicU64,
}

#[derive(Debug)]
struct Times {
    deadline: Instant,
    /// When the latest call that shortened the deadline was answered: a renewal sent before
    /// then may have run before that call, so it extends nothing.
    shortened_at: Option<Instant>,
}

impl LossSignal {
    pub(crate) fn new(deadline: Instant) -> Arc<Self> {
        Arc::new(Self {
            lost: AtomicBool::new(false),
            gone: AtomicBool::new(false),
            times: Mutex::new(Times {
                deadline,
                shortened_at: None,
            }),
            notify: Notify::new(),
            doubt: AtomicU64::new(0),
        })
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire) || Instant::now() >= self.times.lock().deadline
    }

    pub(crate) fn deadline(&self) -> Instant {
        self.times.lock().deadline
    }

    pub(crate) fn mark_lost(&self) {
        self.lost.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Lost, and known to hold nothing any more (see [`is_gone`](Self::is_gone)).
    pub(crate) fn mark_gone(&self) {
        self.gone.store(true, Ordering::Release);
        self.mark_lost();
    }

    /// `true` when the hold is known gone from Redis: its guards release nothing (a release
    /// would take a hold its owner acquired since).
    pub(crate) fn is_gone(&self) -> bool {
        self.gone.load(Ordering::Acquire)
    }

    /// Moves the deadline forward to `to` after a successful renewal (or acquisition) sent at
    /// `sent_at`; a hold whose deadline has already passed stays lost, and a renewal sent
    /// before a call that shortened the deadline was answered changes nothing.
    pub(crate) fn extend(&self, sent_at: Instant, to: Instant) {
        let mut t = self.times.lock();
        if Instant::now() >= t.deadline {
            drop(t);
            self.mark_lost();
        } else if to > t.deadline && t.shortened_at.is_none_or(|at| sent_at >= at) {
            t.deadline = to;
        }
    }

    /// An owner-checked renewal of this very hold, answered at `at`, set the lock's TTL so that
    /// the hold lasts until `to`, later or sooner than before (a RedLock part's extension): the
    /// deadline is `to`, unless the hold is already lost.
    pub(crate) fn renewed_to(&self, at: Instant, to: Instant) {
        let mut t = self.times.lock();
        if Instant::now() >= t.deadline {
            drop(t);
            self.mark_lost();
            return;
        }
        t.shortened_at = Some(t.shortened_at.map_or(at, |s| s.max(at)));
        t.deadline = to;
        drop(t);
        self.notify.notify_waiters();
    }

    /// A call answered at `at` set the lock's TTL so that the hold lasts only until `to`: the
    /// deadline comes closer (never moves back) and waiters of [`wait_lost`](Self::wait_lost)
    /// look again.
    pub(crate) fn shorten(&self, at: Instant, to: Instant) {
        let mut t = self.times.lock();
        t.shortened_at = Some(t.shortened_at.map_or(at, |s| s.max(at)));
        if to < t.deadline {
            t.deadline = to;
            drop(t);
            self.notify.notify_waiters();
        }
    }

    /// Resolves once the hold is lost (for good: a doubt does not end this wait).
    #[allow(dead_code)] // guards wait with `wait_not_held` (see `doubt`)
    pub(crate) async fn wait_lost(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.lost.load(Ordering::Acquire) {
                return;
            }
            let deadline = self.deadline();
            if Instant::now() >= deadline {
                return;
            }
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    /// The state of the hold: lost (flag or deadline) first, then in doubt, else held.
    pub(crate) fn state(&self) -> HoldState {
        if self.is_lost() {
            HoldState::Lost
        } else if self.doubt.load(Ordering::Acquire) != 0 {
            HoldState::InDoubt
        } else {
            HoldState::Held
        }
    }

    /// Puts the hold in doubt as of `epoch` (raising an earlier doubt's epoch). Returns `true`
    /// when the hold was held until now (to report it once).
    pub(crate) fn doubt(&self, epoch: u64) -> bool {
        let before = self.doubt.fetch_max(epoch, Ordering::AcqRel);
        self.notify.notify_waiters();
        before == 0 && !self.is_lost()
    }

    /// A renewal sent at `sent_epoch` confirmed the owner: clears a doubt that began at or
    /// before that epoch. Returns `true` when it cleared one.
    pub(crate) fn confirm(&self, sent_epoch: u64) -> bool {
        let mut current = self.doubt.load(Ordering::Acquire);
        while current != 0 && current <= sent_epoch {
            match self
                .doubt
                .compare_exchange(current, 0, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    self.notify.notify_waiters();
                    return !self.is_lost();
                }
                Err(now) => current = now,
            }
        }
        false
    }

    /// Resolves once the hold is not in doubt (held, confirmed, or lost), with that state.
    pub(crate) async fn wait_settled(&self) -> HoldState {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let state = self.state();
            if state != HoldState::InDoubt {
                return state;
            }
            let deadline = self.deadline();
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    /// Resolves once the hold is no longer [`HoldState::Held`] (in doubt or lost).
    pub(crate) async fn wait_not_held(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.state() != HoldState::Held {
                return;
            }
            let deadline = self.deadline();
            tokio::select! {
                _ = &mut notified => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_deadline_is_send_time_plus_timeout_minus_drift() {
        let sent = Instant::now();
        let timeout = Duration::from_secs(30);
        // 30 s × 1 % + 2 ms = 302 ms.
        assert_eq!(
            valid_until(sent, timeout),
            sent + Duration::from_millis(29_698)
        );
        assert_eq!(
            valid_until(sent, Duration::from_millis(1)),
            sent,
            "a lease shorter than the drift is valid for no time at all"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_loss_signal_extends_until_its_deadline_passes_and_never_comes_back() {
        let start = Instant::now();
        let loss = LossSignal::new(start + Duration::from_secs(1));
        loss.extend(start, start + Duration::from_secs(2));
        assert_eq!(loss.deadline(), start + Duration::from_secs(2));
        loss.extend(start, start + Duration::from_millis(1500));
        assert_eq!(
            loss.deadline(),
            start + Duration::from_secs(2),
            "never back"
        );
        tokio::time::advance(Duration::from_millis(1999)).await;
        assert!(!loss.is_lost());
        tokio::time::advance(Duration::from_millis(1)).await;
        assert!(loss.is_lost(), "lost at the deadline");
        // A renewal that arrives after the deadline does not revive the hold.
        loss.extend(Instant::now(), Instant::now() + Duration::from_secs(10));
        assert!(loss.is_lost());
        assert!(loss.lost.load(Ordering::Acquire), "marked lost for good");
    }

    #[tokio::test(start_paused = true)]
    async fn wait_lost_resolves_at_the_deadline_or_on_mark_lost() {
        let start = Instant::now();
        let loss = LossSignal::new(start + Duration::from_secs(3));
        loss.wait_lost().await;
        assert_eq!(start.elapsed(), Duration::from_secs(3));

        let loss = LossSignal::new(Instant::now() + Duration::from_secs(60));
        let waiter = {
            let loss = loss.clone();
            tokio::spawn(async move { loss.wait_lost().await })
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!waiter.is_finished());
        loss.mark_lost();
        tokio::time::timeout(Duration::from_millis(1), waiter)
            .await
            .expect("woken by mark_lost")
            .unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_shortened_deadline_wakes_wait_lost_and_ignores_renewals_sent_before_it() {
        let start = Instant::now();
        let loss = LossSignal::new(start + Duration::from_secs(30));
        let waiter = {
            let loss = loss.clone();
            tokio::spawn(async move {
                loss.wait_lost().await;
                Instant::now()
            })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        // A call sent at 100 ms, answered at 110 ms, set a 1 s TTL.
        let sent = Instant::now();
        tokio::time::advance(Duration::from_millis(10)).await;
        loss.shorten(Instant::now(), sent + Duration::from_secs(1));
        assert_eq!(loss.deadline(), sent + Duration::from_secs(1));
        loss.shorten(Instant::now(), sent + Duration::from_secs(5));
        assert_eq!(loss.deadline(), sent + Duration::from_secs(1), "never back");
        // A renewal sent before the answer may have run before that call: it extends nothing.
        loss.extend(sent, sent + Duration::from_secs(30));
        assert_eq!(loss.deadline(), sent + Duration::from_secs(1));
        // One sent after it does.
        loss.extend(Instant::now(), Instant::now() + Duration::from_secs(30));
        assert_eq!(loss.deadline(), Instant::now() + Duration::from_secs(30));
        loss.shorten(Instant::now(), Instant::now() + Duration::from_millis(200));
        let at = waiter.await.unwrap();
        assert_eq!(
            at - start,
            Duration::from_millis(310),
            "wait_lost follows the shortened deadline"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn wait_not_held_resolves_on_doubt_and_wait_lost_does_not() {
        let loss = LossSignal::new(Instant::now() + Duration::from_secs(60));
        let not_held = {
            let loss = loss.clone();
            tokio::spawn(async move { loss.wait_not_held().await })
        };
        let lost = {
            let loss = loss.clone();
            tokio::spawn(async move { loss.wait_lost().await })
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!not_held.is_finished());
        loss.doubt(1);
        tokio::time::timeout(Duration::from_millis(1), not_held)
            .await
            .expect("woken by the doubt")
            .unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!lost.is_finished(), "a doubt is not a loss");
        loss.confirm(1);
        // Held again: a new wait waits again, until the deadline.
        let start = Instant::now();
        loss.wait_not_held().await;
        assert_eq!(Instant::now(), start + Duration::from_secs(58));
        lost.await.unwrap();
    }
}
