//! The local wait line: when several owners in one client wait for the same lock, only the
//! first of them (the head) contends on Redis; the others wait here, first come first served.
//! When a local owner's release frees the lock, the head is woken at once instead of waiting for
//! the unlock message to come back through the server. Remote waiters (other processes, Java
//! peers) are still woken by that message: every release that frees a lock publishes, exactly
//! as before; nothing here changes the wire.
//!
//! The line keeps the order, the wake-ups and the one subscription; what a release does (hand
//! the lock to the head, or contest it with other clients) and what the head does next are the
//! hand-off policy's ([`HandOff`], in `handoff`), which the line feeds with what happens. The
//! engine (`sleep::wait_in_line`) runs what they say:
//! * A waiting acquisition of a queueing kind makes one attempt of its own unless local waiters
//!   are already queued (then it joins behind them without trying: no barging past the queue),
//!   and joins the queue when that attempt finds the lock busy. An owner that may already hold
//!   the lock (the owner ledger has an entry for it) always tries first: a re-entry never
//!   waits behind its own hold.
//! * The head subscribes to the lock's channel once for the whole queue (the subscription lives
//!   as long as the queue has waiters) and waits for a local hand-over, an unlock message, or
//!   the lock's TTL, whichever comes first, as every waiter did before.
//! * A waiter leaves the queue when its acquisition ends (acquired, timed out, failed or
//!   dropped); a head that leaves passes the turn to the next waiter. The queue (and with it
//!   the run and the contest) lives while it has waiters or a local holder.
//!
//! Which kinds queue ([`Protocol::wait_line`](crate::lock::protocol::Protocol::wait_line)): the
//! reentrant lock, the fenced lock and the write lock — one holder at a time and one channel
//! for every waiter. Not the read lock (readers share: queueing them one behind another would
//! serialise them), not the fair lock (its queue in Redis already orders every waiter of every
//! client and wakes one at a time on its own channel; a second, local order could contradict
//! it), and not the spin lock (no channel; its waiters poll with back-off by design).

use std::{
    future::Future,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc,
    },
    task::{Context, Poll, Waker},
};

use parking_lot::Mutex;
use smallvec::SmallVec;
use tokio::time::Instant;

#[cfg(doc)]
use super::handoff::HandOff;
pub(crate) use super::handoff::Plan;
use super::handoff::{LineHandOff, Released};
use crate::{
    config::LocalHandOff,
    service::pubsub::{PubSub, Subscription},
    types::{
        line::WaitLine,
        table::{Keyed, Table},
    },
};

/// What a line keeps of its lock channel's subscription: the unlock messages it has seen, which
/// the hand-off policy reads. The registry's [`Subscription`] in a client; the fleet simulation
/// (`fleet.rs`, tests only) gives the production line one of its own.
pub(crate) trait Listening: Send + Sync + 'static {
    /// Messages (and wake-everyone events) the channel has seen since it was subscribed.
    fn messages(&self) -> u64;
}

impl Listening for Subscription {
    fn messages(&self) -> u64 {
        Subscription::messages(self)
    }
}

/// Every local wait line of one client, by [`WaitLine`] and raw lock name; `S`: what a line
/// keeps of its channel's subscription.
pub(crate) struct WaitLines<S: Listening = Subscription> {
    map: Mutex<Table<Line<S>>>,
    /// Number of queues, read without the lock on the uncontended path.
    live: AtomicUsize,
    policy: LocalHandOff,
    /// Releases that handed over locally, and releases that started or went on with a contest.
    hand_overs: AtomicU64,
    contests: AtomicU64,
}

impl<S: Listening> Default for WaitLines<S> {
    fn default() -> Self {
        Self {
            map: Mutex::default(),
            live: AtomicUsize::default(),
            policy: LocalHandOff::default(),
            hand_overs: AtomicU64::default(),
            contests: AtomicU64::default(),
        }
    }
}

/// A line's key: which line, of which lock.
#[derive(Debug)]
struct Key {
    line: WaitLine,
    name: Arc<str>,
}

impl<S: Listening> Keyed for Line<S> {
    type Key<'a> = (WaitLine, &'a str);

    fn key(&self) -> (WaitLine, &str) {
        (self.key.line, &self.key.name)
    }

    fn has_key(&self, key: (WaitLine, &str)) -> bool {
        self.key() == key
    }
}

struct Line<S: Listening> {
    key: Key,
    /// Shared with the subscription registry's entry for it.
    channel: Arc<str>,
    state: Mutex<State<S>>,
}

/// One waiter's place in a line, and its wake-up: a turn handed to it (`turn`) and the task to
/// wake for it. Kept in the line itself: a waiter has no allocation of its own for its wake-up
/// (ten thousand waiters on ten thousand locks).
struct Place {
    id: u64,
    /// A turn was handed to the waiter and it has not seen it yet (a permit: handed before the
    /// waiter looks, it is kept until it does).
    turn: bool,
    waker: Option<Waker>,
}

impl Place {
    /// Hands the waiter a turn; the task to wake, once the line's locks are let go.
    fn hand_turn(&mut self) -> Option<Waker> {
        self.turn = true;
        self.waker.take()
    }
}

struct State<S: Listening> {
    /// Front: the head. Most lines have one waiter (ten thousand tasks on ten thousand locks):
    /// it is kept in the line, a second one moves them all to an allocation of their own.
    waiters: SmallVec<[Place; 1]>,
    next_id: u64,
    /// The queue's one subscription to the lock's channel.
    subscription: Option<Arc<S>>,
    /// The hand-off policy's state for this lock.
    hand_off: LineHandOff,
}

impl<S: Listening> State<S> {
    fn new(policy: LocalHandOff) -> Self {
        Self {
            waiters: SmallVec::new(),
            next_id: 0,
            subscription: None,
            hand_off: LineHandOff::new(policy),
        }
    }

    /// The unlock messages the queue's subscription has seen (`None`: not subscribed yet).
    fn messages(&self) -> Option<u64> {
        self.subscription.as_ref().map(|s| s.messages())
    }
}

impl<S: Listening> WaitLines<S> {
    /// The queues of a client with this hand-off policy.
    pub(crate) fn new(policy: LocalHandOff) -> Self {
        Self {
            policy,
            ..Self::default()
        }
    }

    fn get(&self, line: WaitLine, name: &str) -> Option<Arc<Line<S>>> {
        if self.live.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.map.lock().get((line, name)).cloned()
    }

    /// `true` when local waiters are queued for the lock.
    pub(crate) fn has_waiters(&self, line: WaitLine, name: &str) -> bool {
        self.get(line, name)
            .is_some_and(|q| !q.state.lock().waiters.is_empty())
    }

    /// Whether a waiting acquisition of the lock makes an attempt of its own before it joins
    /// the queue: not while local waiters are queued (first come, first served; no barging
    /// past the queue), unless the owner may hold the lock already (`owner_may_hold`, from the
    /// owner ledger): a re-entry never waits behind its own hold.
    pub(crate) fn attempts_first(
        &self,
        line: WaitLine,
        name: &str,
        owner_may_hold: impl FnOnce() -> bool,
    ) -> bool {
        // Asked only while waiters are queued: the ledger's lookup hashes the hold's key, not
        // worth it on every uncontended acquisition.
        !self.has_waiters(line, name) || owner_may_hold()
    }

    /// Joins the queue of the lock at its tail.
    pub(crate) fn join(
        self: &Arc<Self>,
        line: WaitLine,
        name: Arc<str>,
        channel: String,
    ) -> Ticket<S> {
        let mut map = self.map.lock();
        let queue = map
            .get_or_insert_with((line, &name), || {
                self.live.fetch_add(1, Ordering::AcqRel);
                Line {
                    key: Key {
                        line,
                        name: name.clone(),
                    },
                    channel: channel.into(),
                    state: Mutex::new(State::new(self.policy)),
                }
            })
            .clone();
        let id = {
            let mut st = queue.state.lock();
            let id = st.next_id;
            st.next_id += 1;
            st.waiters.push(Place {
                id,
                turn: false,
                waker: None,
            });
            id
        };
        Ticket {
            queues: self.clone(),
            queue,
            id,
        }
    }

    /// A local owner is about to send a release that may free the lock. Returns the channel to
    /// ask `PUBSUB NUMSUB` about (together with the release) when the policy wants a fresh
    /// answer (see [`HandOff::releasing`]).
    pub(crate) fn releasing(&self, line: WaitLine, name: &str) -> Option<Arc<str>> {
        let queue = self.get(line, name)?;
        let mut st = queue.state.lock();
        let (messages, waiters) = (st.messages(), !st.waiters.is_empty());
        let ask = st.hand_off.releasing(Instant::now(), messages, waiters);
        ask.then(|| queue.channel.clone())
    }

    /// A local release of the lock; `freed`: the lock may be free now (released, not held, or
    /// an error); `others`: the answer to "how many other clients listen?" asked with it. Wakes
    /// the head when the policy hands the lock over or contests it; ends a queue nobody waits
    /// in any more.
    pub(crate) fn released(&self, line: WaitLine, name: &str, freed: bool, others: Option<u32>) {
        if self.live.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut map = self.map.lock();
        let Some(queue) = map.get((line, name)).cloned() else {
            return;
        };
        let mut st = queue.state.lock();
        let has_head = !st.waiters.is_empty();
        match st
            .hand_off
            .released(Instant::now(), freed, others, has_head)
        {
            Released::Kept => return,
            // Nobody waits and nobody holds: the queue ends.
            Released::Idle => {
                self.remove(&mut map, &queue);
                return;
            }
            Released::HandedOver => self.hand_overs.fetch_add(1, Ordering::Relaxed),
            Released::Contested => self.contests.fetch_add(1, Ordering::Relaxed),
        };
        let woken = st.waiters.first_mut().and_then(Place::hand_turn);
        drop(st);
        drop(map);
        if let Some(waker) = woken {
            waker.wake();
        }
    }

    /// A local owner's release of the lock, one that frees it if its count was right, has been
    /// handed to the connection (a command sent later on the same connection runs after it).
    /// When the policy would hand the lock to the head ([`HandOff::hands_over`]), the head is
    /// told now rather than when the release's reply is back: its attempt then follows the
    /// release on the connection, one round trip per hand-over instead of two. An attempt that
    /// overtakes the release anyway only finds the lock busy and waits for the unlock message,
    /// as any waiter. `true`: handed over; this was the release's [`released`](Self::released),
    /// which must not be reported again.
    pub(crate) fn hand_over_early(&self, line: WaitLine, name: &str) -> bool {
        if self.live.load(Ordering::Acquire) == 0 {
            return false;
        }
        let map = self.map.lock();
        let Some(queue) = map.get((line, name)).cloned() else {
            return false;
        };
        let mut st = queue.state.lock();
        if st.waiters.is_empty() {
            return false;
        }
        let now = Instant::now();
        if !st.hand_off.hands_over(now) {
            return false;
        }
        let outcome = st.hand_off.released(now, true, None, true);
        debug_assert!(matches!(outcome, Released::HandedOver));
        self.hand_overs.fetch_add(1, Ordering::Relaxed);
        let woken = st.waiters.first_mut().and_then(Place::hand_turn);
        drop(st);
        drop(map);
        if let Some(waker) = woken {
            waker.wake();
        }
        true
    }

    /// Releases that handed the lock over locally so far.
    pub(crate) fn hand_overs(&self) -> u64 {
        self.hand_overs.load(Ordering::Relaxed)
    }

    /// Releases that started or went on with a contest so far.
    pub(crate) fn contests(&self) -> u64 {
        self.contests.load(Ordering::Relaxed)
    }

    /// Removes `queue` from the map if it is still the queue of its key.
    fn remove(&self, map: &mut Table<Line<S>>, queue: &Arc<Line<S>>) {
        if map.remove(queue) {
            self.live.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Local waiters queued per channel, beyond the one subscription each queue holds (which
    /// the subscription registry already counts as one waiter).
    pub(crate) fn queued_beyond_subscriptions(&self) -> Vec<(String, usize)> {
        let queues: Vec<Arc<Line<S>>> = self.map.lock().values().cloned().collect();
        queues
            .iter()
            .filter_map(|q| {
                let st = q.state.lock();
                let counted = usize::from(st.subscription.is_some());
                let extra = st.waiters.len().saturating_sub(counted);
                (extra > 0).then(|| (q.channel.to_string(), extra))
            })
            .collect()
    }

    /// Local wait lines alive (with waiters, or a local holder of a lock that had some).
    pub(crate) fn len(&self) -> usize {
        self.map.lock().len()
    }
}

/// One waiter's place in a queue; dropping it leaves the queue (passing the turn on if it was
/// the head).
pub(crate) struct Ticket<S: Listening = Subscription> {
    queues: Arc<WaitLines<S>>,
    queue: Arc<Line<S>>,
    id: u64,
}

impl<S: Listening> Ticket<S> {
    fn is_head(&self) -> bool {
        self.queue
            .state
            .lock()
            .waiters
            .first()
            .is_some_and(|p| p.id == self.id)
    }

    /// Takes a turn handed to this waiter, if one was: `Ready` then, else the task is woken
    /// when one is (see [`Place`]).
    fn poll_turn(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut st = self.queue.state.lock();
        let Some(place) = st.waiters.iter_mut().find(|p| p.id == self.id) else {
            // Not in the line (never while the ticket lives): nothing will hand it a turn.
            return Poll::Ready(());
        };
        if std::mem::take(&mut place.turn) {
            return Poll::Ready(());
        }
        match &mut place.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            slot => *slot = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// `true` when this waiter is the head now (a turn handed to it with the headship is
    /// taken: it does not read as a hand-over later).
    pub(crate) fn head_now(&self) -> bool {
        let head = self.is_head();
        if head {
            let _ = futures::FutureExt::now_or_never(self.notified());
        }
        head
    }

    /// Waits until this waiter is the head (`true`) or the deadline passes (`false`).
    pub(crate) async fn wait_head(&self, deadline: Option<Instant>) -> bool {
        loop {
            if self.head_now() {
                return true;
            }
            let notified = self.notified();
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

    /// A turn handed to this waiter (head promotion, a local hand-over or a contest's start).
    /// Cancel safe: a turn is taken only when this returns `Ready`; one handed while it is
    /// dropped stays for the next look.
    pub(crate) fn notified(&self) -> impl Future<Output = ()> + Send + '_ {
        std::future::poll_fn(move |cx| self.poll_turn(cx))
    }

    /// What the head does next (see [`HandOff::next`]), `by_message` telling whether its last
    /// wake-up was an unlock message.
    pub(crate) fn next(&self, by_message: bool) -> Plan {
        let mut st = self.queue.state.lock();
        let messages = st.messages();
        st.hand_off.next(Instant::now(), by_message, messages)
    }

    /// What the head does next, messages aside.
    #[cfg(test)]
    fn plan(&self) -> Plan {
        self.next(false)
    }

    /// Whether the head is to say who holds the lock when its attempt finds it busy (see
    /// [`HandOff::asks_holder`]).
    pub(crate) fn asks_holder(&self) -> bool {
        self.queue.state.lock().hand_off.asks_holder()
    }

    /// The head's attempt found the lock busy; `holder`: the holding client's id, when known
    /// (see [`HandOff::busy`]), `own`: this client's. A hold of this client's own (an owner of
    /// this line past its `until`, or another local owner) is no other client's turn.
    pub(crate) fn busy(&self, holder: Option<&str>, own: &str) {
        if holder == Some(own) {
            return;
        }
        let holder = holder.map(|id| {
            let mut h = std::hash::DefaultHasher::new();
            std::hash::Hash::hash(id, &mut h);
            std::hash::Hasher::finish(&h)
        });
        let mut st = self.queue.state.lock();
        let messages = st.messages();
        st.hand_off.busy(Instant::now(), holder, messages);
    }

    /// The head acquired the lock, its hold lasting at least until `until`; it leaves the
    /// queue and the next waiter becomes head (see [`HandOff::acquired`]).
    pub(crate) fn acquired(self, until: Instant) {
        self.queue
            .state
            .lock()
            .hand_off
            .acquired(Instant::now(), until);
    }

    /// The queue's subscription to the lock's channel, made (by `subscribe`, from the channel's
    /// name) by the first head that needs it.
    pub(crate) fn subscription_with(&self, subscribe: impl FnOnce(&Arc<str>) -> S) -> Arc<S> {
        let mut st = self.queue.state.lock();
        st.subscription
            .get_or_insert_with(|| Arc::new(subscribe(&self.queue.channel)))
            .clone()
    }
}

impl Ticket<Subscription> {
    /// The queue's subscription to the lock's channel, made by the first head that needs it.
    pub(crate) fn subscription(&self, pubsub: &PubSub) -> Arc<Subscription> {
        self.subscription_with(|channel| pubsub.subscribe_shared(channel))
    }
}

impl<S: Listening> Drop for Ticket<S> {
    fn drop(&mut self) {
        let mut map = self.queues.map.lock();
        let mut st = self.queue.state.lock();
        let was_head = st.waiters.first().is_some_and(|p| p.id == self.id);
        st.waiters.retain(|p| p.id != self.id);
        let mut subscription = None;
        let mut woken = None;
        if st.waiters.is_empty() {
            // Nobody left to listen. The queue (its run, its contest) lives on while one of its
            // owners holds the lock: that owner's release ends it.
            subscription = st.subscription.take();
            st.hand_off.line_emptied();
            if !st.hand_off.holds() {
                self.queues.remove(&mut map, &self.queue);
            }
        } else if was_head {
            woken = st.waiters.first_mut().and_then(Place::hand_turn);
        }
        drop(st);
        drop(map);
        if let Some(waker) = woken {
            waker.wake();
        }
        // Leaving the channel takes the registry's lock: not under ours.
        drop(subscription);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const LOCK: WaitLine = WaitLine::Lock;

    fn queues() -> Arc<WaitLines> {
        Arc::new(WaitLines::default())
    }

    /// A waiter's wake-up lives in its place: a turn handed while it is not looking is kept
    /// until it looks, and taken once; a waiter parked on its turn is woken by the hand-over.
    #[tokio::test(start_paused = true)]
    async fn a_turn_handed_while_nobody_looks_is_kept_until_the_waiter_looks() {
        use futures::FutureExt;
        let q = queues();
        let a = q.join(LOCK, "n".into(), "ch".into());
        let b = q.join(LOCK, "n".into(), "ch".into());
        assert!(b.notified().now_or_never().is_none(), "no turn yet");
        drop(a);
        assert!(b.notified().now_or_never().is_some(), "the turn kept");
        assert!(b.notified().now_or_never().is_none(), "and taken once");
        let c = q.join(LOCK, "n".into(), "ch".into());
        let parked = tokio::spawn(async move { c.wait_head(None).await });
        tokio::task::yield_now().await;
        assert!(!parked.is_finished(), "c waits behind b");
        drop(b);
        let woken = tokio::time::timeout(Duration::from_secs(1), parked).await;
        assert!(
            matches!(woken, Ok(Ok(true))),
            "the hand-over woke c: {woken:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn waiters_become_head_in_arrival_order() {
        let q = queues();
        let a = q.join(LOCK, "n".into(), "ch".into());
        let b = q.join(LOCK, "n".into(), "ch".into());
        let c = q.join(LOCK, "n".into(), "ch".into());
        assert!(q.has_waiters(LOCK, "n"));
        assert!(
            !q.has_waiters(WaitLine::Write, "n"),
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
                t.acquired(Instant::now() + 30_000 * MS);
            })
        };
        let (hc, hb) = (spawn(c, "c"), spawn(b, "b"));
        tokio::time::sleep(MS).await;
        a.acquired(Instant::now() + 30_000 * MS);
        hb.await.unwrap();
        hc.await.unwrap();
        assert_eq!(*order.lock(), vec!["b", "c"]);
        assert!(!q.has_waiters(LOCK, "n"));
        assert_eq!(q.len(), 1, "the queue lives while its last owner holds");
        q.released(LOCK, "n", true, None);
        assert_eq!(q.len(), 0, "an empty queue is removed");
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_or_timed_out_waiter_leaves_and_a_leaving_head_passes_the_turn() {
        let q = queues();
        let head = q.join(LOCK, "n".into(), "ch".into());
        let second = q.join(LOCK, "n".into(), "ch".into());
        let third = q.join(LOCK, "n".into(), "ch".into());
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
        let first = q.join(LOCK, "n".into(), "ch".into());
        let second = q.join(LOCK, "n".into(), "ch".into());
        assert_eq!(first.plan(), Plan::Attempt);
        first.acquired(Instant::now() + 1_000 * MS);
        assert!(second.wait_head(Some(Instant::now())).await);
        assert_eq!(second.plan(), Plan::Wait(1_000 * MS));
        let woken = tokio::spawn(async move {
            second.notified().await;
            second.plan()
        });
        // A 1 ms hold: another as long ends well within the 10 ms budget.
        tokio::time::sleep(MS).await;
        q.released(LOCK, "n", false, None);
        tokio::task::yield_now().await;
        assert!(!woken.is_finished(), "a partial release hands nothing over");
        q.released(LOCK, "n", true, None);
        assert_eq!(woken.await.unwrap(), Plan::Attempt);
    }

    #[test]
    fn a_waiter_attempts_first_unless_others_are_queued_and_it_may_not_hold() {
        let q = queues();
        assert!(q.attempts_first(LOCK, "n", || false), "nobody queued");
        let _queued = q.join(LOCK, "n".into(), "ch".into());
        assert!(
            !q.attempts_first(LOCK, "n", || false),
            "no barging past the queue"
        );
        assert!(
            q.attempts_first(LOCK, "n", || true),
            "a re-entry never waits behind itself"
        );
        assert!(
            q.attempts_first(WaitLine::Write, "n", || false),
            "another kind's queue"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn the_line_asks_with_the_channel_counts_and_wakes_the_head_as_the_policy_decides() {
        let q: Arc<WaitLines> = Arc::new(WaitLines::new(LocalHandOff::Bounded(10 * MS)));
        let first = q.join(LOCK, "n".into(), "ch".into());
        let second = q.join(LOCK, "n".into(), "ch".into());
        first.acquired(Instant::now() + 30_000 * MS);
        assert!(second.wait_head(Some(Instant::now())).await);
        // Within the budget: a hand-over, no question.
        assert_eq!(q.releasing(LOCK, "n"), None);
        q.released(LOCK, "n", true, None);
        assert_eq!((q.hand_overs(), q.contests()), (1, 0));
        let third = q.join(LOCK, "n".into(), "ch".into());
        second.acquired(Instant::now() + 30_000 * MS);
        assert!(third.wait_head(Some(Instant::now())).await);
        // Past it: the question goes with the release, on the queue's channel; someone
        // listens, so a contest wakes the head, which stands back for the other client.
        tokio::time::sleep(20 * MS).await;
        assert_eq!(q.releasing(LOCK, "n").as_deref(), Some("ch"));
        let woken = tokio::spawn(async move {
            third.notified().await;
            third.plan()
        });
        tokio::task::yield_now().await;
        q.released(LOCK, "n", true, Some(1));
        assert_eq!(
            woken.await.unwrap(),
            Plan::Defer(crate::acquisitions::handoff::STAND_BACK)
        );
        assert_eq!((q.hand_overs(), q.contests()), (1, 1));
    }

    #[tokio::test(start_paused = true)]
    async fn the_queue_outlives_its_last_waiter_while_an_owner_holds() {
        let q = queues();
        let t = q.join(LOCK, "n".into(), "ch".into());
        t.acquired(Instant::now() + 30_000 * MS);
        assert_eq!(q.len(), 1, "the holder's queue keeps its run");
        assert!(!q.has_waiters(LOCK, "n"));
        q.released(LOCK, "n", true, None);
        assert_eq!(q.len(), 0, "its release ends it");
    }
}
