//! The local hand-off queue: when several owners in one client wait for the same lock, only the
//! first of them (the head) contends on Redis; the others wait here, first come first served.
//! When a local owner's release frees the lock, the head is woken at once instead of waiting for
//! the unlock message to come back through the server. Remote waiters (other processes, Java
//! peers) are still woken by that message: every release that frees a lock publishes, exactly
//! as before; nothing here changes the wire.
//!
//! Rules (the engine, `engine::wait_in_queue`, applies them):
//! * A waiting acquisition of a queueing kind makes one attempt of its own unless local waiters
//!   are already queued (then it joins behind them without trying: no barging past the queue),
//!   and joins the queue when that attempt finds the lock busy. An owner that may already hold
//!   the lock (the owner ledger has an entry for it) always tries first: a re-entry never
//!   waits behind its own hold.
//! * The head subscribes to the lock's channel once for the whole queue (the subscription lives
//!   as long as the queue has waiters) and waits for a local hand-over, an unlock message, or
//!   the lock's TTL, whichever comes first, as every waiter did before.
//! * While an owner of this queue holds the lock (the head that acquired it last), the next
//!   head makes no attempt until that owner's release hands over (or that hold's lease has run
//!   out): an unlock message within [`ECHO_WINDOW`] of that owner's acquisition is the previous
//!   release's echo. A later unlock message is news (a remote `force_unlock`, a Java peer's
//!   forced release): the head attempts at once, as any waiter would.
//! * No starvation: after [`RUN_LIMIT`] consecutive local hand-overs the next head first asks
//!   the server whether anyone else listens on the channel (`PUBSUB NUMSUB`/`SHARDNUMSUB`) and
//!   if so holds back for [`GRACE`], so a remote waiter woken by the release's message gets
//!   the lock; the run then starts again.
//! * A waiter leaves the queue when its acquisition ends (acquired, timed out, failed or
//!   dropped); a head that leaves passes the turn to the next waiter.
//!
//! Which kinds queue ([`Protocol::local_queue`](super::kind::Protocol::local_queue)): the
//! reentrant lock, the fenced lock and the write lock — one holder at a time and one channel
//! for every waiter. Not the read lock (readers share: queueing them one behind another would
//! serialise them), not the fair lock (its queue in Redis already orders every waiter of every
//! client and wakes one at a time on its own channel; a second, local order could contradict
//! it), and not the spin lock (no channel; its waiters poll with back-off by design).

use std::{
    collections::{HashMap, VecDeque},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use parking_lot::Mutex;
use tokio::{
    sync::{futures::Notified, Notify},
    time::Instant,
};

use crate::pubsub::{PubSub, Subscription};

/// Consecutive local hand-overs after which the next head gives other clients their chance.
pub(crate) const RUN_LIMIT: u32 = 8;
/// How long a yielding head holds back when someone else listens on the lock's channel: long
/// enough for a remote waiter woken by the release's message to send its attempt.
pub(crate) const GRACE: Duration = Duration::from_millis(5);

/// See [`Ticket::held_for`]: an unlock message this soon after a local hand-over is that
/// hand-over's own echo (the release published it before the head's attempt was even sent).
pub(crate) const ECHO_WINDOW: Duration = Duration::from_millis(50);

/// Every local queue of one client, by kind tag and raw lock name.
#[derive(Default)]
pub(crate) struct LocalQueues {
    map: Mutex<HashMap<String, Arc<Queue>>>,
    /// Number of queues, read without the lock on the uncontended path.
    live: AtomicUsize,
}

struct Queue {
    key: String,
    channel: String,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Front: the head.
    waiters: VecDeque<(u64, Arc<Notify>)>,
    next_id: u64,
    /// The owner of this queue that holds the lock, and until when its hold lasts at least
    /// (send time + lease; a watchdog renewal may extend it).
    holder: Option<(Arc<str>, Instant)>,
    /// When that owner acquired it (see [`Ticket::held_for`]).
    holder_since: Option<Instant>,
    /// Consecutive local hand-overs.
    run: u32,
    /// The next head holds back first (the run reached its limit).
    yield_next: bool,
    /// The queue's one subscription to the lock's channel.
    subscription: Option<Arc<Subscription>>,
}

fn key(tag: &str, name: &str) -> String {
    let mut k = String::with_capacity(tag.len() + 1 + name.len());
    k.push_str(tag);
    k.push('\0');
    k.push_str(name);
    k
}

impl LocalQueues {
    /// `true` when local waiters are queued for the lock.
    pub(crate) fn has_waiters(&self, tag: &str, name: &str) -> bool {
        if self.live.load(Ordering::Acquire) == 0 {
            return false;
        }
        self.map.lock().contains_key(&key(tag, name))
    }

    /// Joins the queue of the lock at its tail.
    pub(crate) fn join(self: &Arc<Self>, tag: &str, name: &str, channel: &str) -> Ticket {
        let mut map = self.map.lock();
        let queue = map
            .entry(key(tag, name))
            .or_insert_with_key(|k| {
                self.live.fetch_add(1, Ordering::AcqRel);
                Arc::new(Queue {
                    key: k.clone(),
                    channel: channel.to_owned(),
                    state: Mutex::default(),
                })
            })
            .clone();
        let notify = Arc::new(Notify::new());
        let id = {
            let mut st = queue.state.lock();
            let id = st.next_id;
            st.next_id += 1;
            st.waiters.push_back((id, notify.clone()));
            id
        };
        Ticket {
            queues: self.clone(),
            queue,
            id,
            notify,
        }
    }

    /// A local release of the lock; `freed`: the lock may be free now (released, not held, or
    /// an error). Hands the turn to the head at once.
    pub(crate) fn released(&self, tag: &str, name: &str, freed: bool) {
        if !freed || self.live.load(Ordering::Acquire) == 0 {
            return;
        }
        let Some(queue) = self.map.lock().get(&key(tag, name)).cloned() else {
            return;
        };
        let mut st = queue.state.lock();
        // Whoever freed it, no owner of this queue holds it now.
        st.holder = None;
        let Some((_, head)) = st.waiters.front() else {
            return;
        };
        let head = head.clone();
        st.run += 1;
        if st.run >= RUN_LIMIT {
            st.run = 0;
            st.yield_next = true;
        }
        drop(st);
        head.notify_one();
    }

    /// Local waiters queued per channel, beyond the one subscription each queue holds (which
    /// the subscription registry already counts as one waiter).
    pub(crate) fn queued_beyond_subscriptions(&self) -> Vec<(String, usize)> {
        let queues: Vec<Arc<Queue>> = self.map.lock().values().cloned().collect();
        queues
            .iter()
            .filter_map(|q| {
                let st = q.state.lock();
                let counted = usize::from(st.subscription.is_some());
                let extra = st.waiters.len().saturating_sub(counted);
                (extra > 0).then(|| (q.channel.clone(), extra))
            })
            .collect()
    }

    /// Number of queues (for tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.map.lock().len()
    }
}

/// What the head does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Attempt now.
    Attempt,
    /// Give others their chance first (if anyone else listens), then attempt.
    Yield,
    /// An owner of this queue holds the lock for at least this long: wait for its hand-over.
    Wait(Duration),
}

/// One waiter's place in a queue; dropping it leaves the queue (passing the turn on if it was
/// the head).
pub(crate) struct Ticket {
    queues: Arc<LocalQueues>,
    queue: Arc<Queue>,
    id: u64,
    notify: Arc<Notify>,
}

impl Ticket {
    fn is_head(&self) -> bool {
        self.queue
            .state
            .lock()
            .waiters
            .front()
            .is_some_and(|(id, _)| *id == self.id)
    }

    /// Waits until this waiter is the head (`true`) or the deadline passes (`false`).
    pub(crate) async fn wait_head(&self, deadline: Option<Instant>) -> bool {
        loop {
            if self.is_head() {
                // The turn may have been handed over with a wake-up this call did not need:
                // take it, so it does not read as a hand-over later.
                let _ = futures::FutureExt::now_or_never(self.notify.notified());
                return true;
            }
            let notified = self.notify.notified();
            match deadline {
                None => notified.await,
                Some(d) => {
                    if tokio::time::timeout_at(d, notified).await.is_err() {
                        return self.is_head();
                    }
                }
            }
        }
    }

    /// A turn handed to this waiter (head promotion or a local hand-over).
    pub(crate) fn notified(&self) -> Notified<'_> {
        self.notify.notified()
    }

    /// What the head does next.
    pub(crate) fn plan(&self) -> Plan {
        let mut st = self.queue.state.lock();
        if let Some((_, until)) = &st.holder {
            let now = Instant::now();
            if *until > now {
                return Plan::Wait(*until - now);
            }
        }
        if std::mem::take(&mut st.yield_next) {
            Plan::Yield
        } else {
            Plan::Attempt
        }
    }

    /// The head's attempt found the lock busy: someone outside the run got it, so the run (and
    /// a pending yield) starts again.
    pub(crate) fn busy(&self) {
        let mut st = self.queue.state.lock();
        st.run = 0;
        st.yield_next = false;
    }

    /// The head acquired the lock as `field`, its hold lasting at least until `until`; it leaves
    /// the queue and the next waiter becomes head.
    pub(crate) fn acquired(self, field: Arc<str>, until: Instant) {
        let mut st = self.queue.state.lock();
        st.holder = Some((field, until));
        st.holder_since = Some(Instant::now());
    }

    /// How long the owner of this queue that holds the lock has held it (`None`: none does).
    /// An unlock message that reaches a waiting head within [`ECHO_WINDOW`] of that owner's
    /// acquisition is the echo of the release that handed over; a later one is news (a remote
    /// forced unlock, say), and the head then attempts although a local owner seems to hold.
    pub(crate) fn held_for(&self) -> Option<Duration> {
        let st = self.queue.state.lock();
        st.holder.as_ref()?;
        st.holder_since.map(|since| since.elapsed())
    }

    /// The queue's subscription to the lock's channel, made by the first head that needs it.
    pub(crate) fn subscription(&self, pubsub: &PubSub) -> Arc<Subscription> {
        let mut st = self.queue.state.lock();
        st.subscription
            .get_or_insert_with(|| Arc::new(pubsub.subscribe(&self.queue.channel)))
            .clone()
    }

    /// The channel the queue listens on.
    pub(crate) fn channel(&self) -> &str {
        &self.queue.channel
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut map = self.queues.map.lock();
        let mut st = self.queue.state.lock();
        let was_head = st.waiters.front().is_some_and(|(id, _)| *id == self.id);
        st.waiters.retain(|(id, _)| *id != self.id);
        let mut subscription = None;
        if st.waiters.is_empty() {
            subscription = st.subscription.take();
            if map
                .get(&self.queue.key)
                .is_some_and(|q| Arc::ptr_eq(q, &self.queue))
            {
                map.remove(&self.queue.key);
                self.queues.live.fetch_sub(1, Ordering::AcqRel);
            }
        } else if was_head {
            if let Some((_, next)) = st.waiters.front() {
                next.notify_one();
            }
        }
        drop(st);
        drop(map);
        // Leaving the channel takes the registry's lock: not under ours.
        drop(subscription);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn queues() -> Arc<LocalQueues> {
        Arc::new(LocalQueues::default())
    }

    #[tokio::test(start_paused = true)]
    async fn waiters_become_head_in_arrival_order() {
        let q = queues();
        let a = q.join("lock", "n", "ch");
        let b = q.join("lock", "n", "ch");
        let c = q.join("lock", "n", "ch");
        assert!(q.has_waiters("lock", "n"));
        assert!(
            !q.has_waiters("write", "n"),
            "kinds have queues of their own"
        );
        assert!(a.wait_head(Some(Instant::now())).await);
        assert!(!b.wait_head(Some(Instant::now() + 10 * MS)).await);
        let order = Arc::new(Mutex::new(Vec::new()));
        let spawn = |t: Ticket, name: &'static str| {
            let order = order.clone();
            tokio::spawn(async move {
                assert!(t.wait_head(None).await);
                order.lock().push(name);
                tokio::time::sleep(5 * MS).await;
                t.acquired("f".into(), Instant::now() + 30_000 * MS);
            })
        };
        let (hc, hb) = (spawn(c, "c"), spawn(b, "b"));
        tokio::time::sleep(MS).await;
        a.acquired("f".into(), Instant::now() + 30_000 * MS);
        hb.await.unwrap();
        hc.await.unwrap();
        assert_eq!(*order.lock(), vec!["b", "c"]);
        assert_eq!(q.len(), 0, "an empty queue is removed");
        assert!(!q.has_waiters("lock", "n"));
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_or_timed_out_waiter_leaves_and_a_leaving_head_passes_the_turn() {
        let q = queues();
        let head = q.join("lock", "n", "ch");
        let second = q.join("lock", "n", "ch");
        let third = q.join("lock", "n", "ch");
        let start = Instant::now();
        assert!(!second.wait_head(Some(start + 50 * MS)).await);
        assert_eq!(
            start.elapsed(),
            50 * MS,
            "a bounded wait ends at its deadline"
        );
        drop(second);
        assert_eq!(q.queued_beyond_subscriptions(), vec![("ch".to_owned(), 2)]);
        let waiting = tokio::spawn(async move {
            let ok = third.wait_head(None).await;
            (ok, Instant::now())
        });
        tokio::time::sleep(20 * MS).await;
        drop(head);
        let (ok, at) = waiting.await.unwrap();
        assert!(ok);
        assert_eq!(at - start, 70 * MS, "the next waiter became head at once");
        assert_eq!(q.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_local_holder_makes_the_head_wait_and_its_release_hands_over() {
        let q = queues();
        let first = q.join("lock", "n", "ch");
        let second = q.join("lock", "n", "ch");
        assert_eq!(first.plan(), Plan::Attempt);
        first.acquired("u:1".into(), Instant::now() + 1_000 * MS);
        assert!(second.wait_head(Some(Instant::now())).await);
        assert_eq!(second.plan(), Plan::Wait(1_000 * MS));
        let woken = tokio::spawn(async move {
            second.notified().await;
            second.plan()
        });
        tokio::time::sleep(10 * MS).await;
        q.released("lock", "n", false);
        tokio::task::yield_now().await;
        assert!(!woken.is_finished(), "a partial release hands nothing over");
        q.released("lock", "n", true);
        assert_eq!(woken.await.unwrap(), Plan::Attempt);
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_past_its_lease_no_longer_holds_the_head_back() {
        let q = queues();
        let first = q.join("lock", "n", "ch");
        let second = q.join("lock", "n", "ch");
        first.acquired("u:1".into(), Instant::now() + 100 * MS);
        tokio::time::sleep(100 * MS).await;
        assert_eq!(second.plan(), Plan::Attempt);
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_run_of_local_hand_overs_yields_once_then_starts_again() {
        let q = queues();
        let mut plans = Vec::new();
        let mut current = q.join("lock", "n", "ch");
        for i in 0..(2 * RUN_LIMIT) {
            let next = q.join("lock", "n", "ch");
            plans.push(current.plan());
            current.acquired("u:1".into(), Instant::now() + 1_000 * MS);
            q.released("lock", "n", true);
            assert!(next.wait_head(Some(Instant::now())).await, "round {i}");
            current = next;
        }
        let yields: Vec<usize> = plans
            .iter()
            .enumerate()
            .filter(|(_, p)| **p == Plan::Yield)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(yields, vec![RUN_LIMIT as usize], "one yield per run");
        // A busy attempt (someone else got in) starts a new run.
        current.busy();
        assert_eq!(current.plan(), Plan::Attempt);
    }
}
