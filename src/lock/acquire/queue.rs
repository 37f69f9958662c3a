//! The local hand-off queue: when several owners in one client wait for the same lock, only the
//! first of them (the head) contends on Redis; the others wait here, first come first served.
//! When a local owner's release frees the lock, the head is woken at once instead of waiting for
//! the unlock message to come back through the server. Remote waiters (other processes, Java
//! peers) are still woken by that message: every release that frees a lock publishes, exactly
//! as before; nothing here changes the wire.
//!
//! Rules, decided here ([`LocalQueues::attempts_first`], [`Ticket::next`]); the engine
//! (`engine::wait_in_queue`) runs what they say:
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
//!   release's echo, and so is one that comes while that owner's own release is under way
//!   (the release's end wakes the head). Any other unlock message is news (a remote
//!   `force_unlock`, a Java peer's forced release): the head attempts at once, as any waiter
//!   would.
//!
//! The hand-off policy ([`LocalHandOff`], `Config::local_hand_off`) — bounded in time while
//! another client waits, never in count:
//! * A *run* is a sequence of local hand-overs; it starts with a local acquisition that was not
//!   a hand-over (the head's own attempt won). It is this client's *turn*.
//! * `Bounded(budget)` (the default, 10 ms): a local release hands over while the run has
//!   lasted less than its length: the budget, or the other clients' last turn when that was
//!   longer, at most [`TURN_MAX`] (2 s). The other clients' turn is measured from the head's
//!   first attempt that found the lock busy with no local holder to this client's next
//!   acquisition; it is forgotten once nobody else listens. Once the run has lasted its
//!   length, the release asks whether another client listens on the lock's channel
//!   (`PUBSUB NUMSUB`/`SHARDNUMSUB`, sent together with the release script, so no round trip
//!   of its own; the answer is kept for one budget, so at most one question per budget).
//!   Nobody: the hand-over happens and a new run starts. Someone, or the server cannot tell
//!   (classic pub/sub on a cluster): the run ends and the queue enters a *contest* that lasts
//!   until another client's owner has had the lock (the head's attempt finds the lock busy
//!   with no local holder).
//! * Why the other clients' turn: a Redisson client does not hand over, but its releasing
//!   thread calls `lock()` again at once and races the waiters its unlock message wakes, with
//!   the reply ahead of the message, so it keeps the lock for turns of many holds (two Java
//!   clients on one hot lock take turns of 10–30 holds of 100 ms in the bench). A client that
//!   gave way after each budget would get a small share beside it (14 % measured). Turns as
//!   long as the other side's, and no longer, give each side about half.
//! * In a contest a release does not hand over. The head attempts as soon as the release has
//!   ended (as a Java client's releasing thread does), racing every other client's waiter woken
//!   by the release's unlock message. After [`CONTEST_WINS`] races won in a row it stands back:
//!   it attempts only [`STAND_BACK`] after that message (a remote waiter woken by it has sent
//!   its attempt by then), so another client gets the lock. If nobody takes it meanwhile (the
//!   listener was no waiter, or the server could not tell), the client takes itself for alone
//!   for [`QUIET_START`], doubling up to [`QUIET_MAX`] while that goes on.
//! * Worst case, `Bounded(b)` with holds of `h`, for a waiter of another client that is
//!   already subscribed: the hold in progress, the rest of the run (holds that start within
//!   its length of its start, plus those that start within one budget of its subscribing,
//!   while the last answer was still "nobody"), and then at most [`CONTEST_WINS`] holds won in
//!   races. When the other clients' last turn was no longer than `b` (a waiter that takes one
//!   hold per turn, with `h >= b`): at most 1 + 1 + 2 = 4 local holds in a row; with short
//!   holds, about `2b + 3h` of local holds. After a longer turn of theirs, `t`: the holds that
//!   start within `min(t, TURN_MAX)`, plus 2 — as long a turn as they took, at most 2 s and
//!   two holds.
//! * `Off`: every local release is a contest without standing back (Redisson's behaviour: the
//!   head races at once like a Java client's releasing thread). `Unbounded`: every local
//!   release hands over, nobody is asked.
//! * A waiter leaves the queue when its acquisition ends (acquired, timed out, failed or
//!   dropped); a head that leaves passes the turn to the next waiter. The queue (and with it
//!   the run and the contest) lives while it has waiters or a local holder.
//!
//! Which kinds queue ([`Protocol::local_queue`](crate::lock::kind::Protocol::local_queue)): the
//! reentrant lock, the fenced lock and the write lock — one holder at a time and one channel
//! for every waiter. Not the read lock (readers share: queueing them one behind another would
//! serialise them), not the fair lock (its queue in Redis already orders every waiter of every
//! client and wakes one at a time on its own channel; a second, local order could contradict
//! it), and not the spin lock (no channel; its waiters poll with back-off by design).

use std::{
    collections::{HashMap, VecDeque},
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use parking_lot::Mutex;
use tokio::{
    sync::{futures::Notified, Notify},
    time::Instant,
};

use crate::{
    config::LocalHandOff,
    service::pubsub::{PubSub, Subscription},
};

/// Races a contest's head may win in a row before it stands back for another client.
pub(crate) const CONTEST_WINS: u32 = 2;
/// How long a head that stands back waits after the release's unlock message before its own
/// attempt: long enough for a waiter of another client woken by that message to have sent its
/// attempt (a loopback round trip is well under 1 ms; this leaves room for a loaded machine).
pub(crate) const STAND_BACK: Duration = Duration::from_millis(50);
/// How long a contest's head that stands back waits for the release's own unlock message before
/// it counts [`STAND_BACK`] from then anyway (the message is never lost silently: a lag or a
/// reconnect counts as a message too).
pub(crate) const MESSAGE_WAIT: Duration = Duration::from_millis(100);
/// After a head stood back and nobody took the lock (the listener was no waiter, or the server
/// cannot tell who listens), the client takes itself for alone this long, doubling up to
/// [`QUIET_MAX`] while that goes on; an attempt that finds another client's owner holding
/// starts over.
pub(crate) const QUIET_START: Duration = Duration::from_millis(100);
/// See [`QUIET_START`].
pub(crate) const QUIET_MAX: Duration = Duration::from_secs(1);
/// The longest the other clients' last turn lengthens this client's run while another client
/// waits (see [`State::turn`]).
pub(crate) const TURN_MAX: Duration = Duration::from_secs(2);

/// See [`Ticket::held_for`]: an unlock message this soon after a local hand-over is that
/// hand-over's own echo (the release published it before the head's attempt was even sent).
pub(crate) const ECHO_WINDOW: Duration = Duration::from_millis(50);

/// Every local queue of one client, by kind tag and raw lock name.
#[derive(Default)]
pub(crate) struct LocalQueues {
    map: Mutex<HashMap<String, Arc<Queue>>>,
    /// Number of queues, read without the lock on the uncontended path.
    live: AtomicUsize,
    policy: LocalHandOff,
    /// Releases that handed over locally, and releases that started or went on with a contest.
    hand_overs: AtomicU64,
    contests: AtomicU64,
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
    /// When the current run of local hand-overs started (`None`: no run).
    run_since: Option<Instant>,
    /// The last release handed over: the head's next acquisition continues the run.
    handed: bool,
    /// The last answer to "does another client listen on the lock's channel?", and until
    /// when it holds.
    others: Option<(bool, Instant)>,
    /// How long the next "nobody came" holds (see [`QUIET_START`]); zero: not set yet.
    quiet: Duration,
    /// The queue subscription's message count when the last local release began, and when it
    /// began (the run's age is judged then: the question, if any, was decided then).
    release_mark: Option<u64>,
    release_began: Option<Instant>,
    /// The contest, while one is on.
    contest: Option<Contest>,
    /// Since when another client's owners have had the lock (the head's first attempt that
    /// found it busy with no local holder; `None`: not since this client last had it).
    away_since: Option<Instant>,
    /// How long the other clients' last turn lasted (from `away_since` to this client's next
    /// acquisition; zero once nobody else listens): see [`State::turn`].
    owed: Duration,
    /// The queue's one subscription to the lock's channel.
    subscription: Option<Arc<Subscription>>,
}

impl State {
    /// How long a run hands over locally, with `budget` the policy's: the budget, or the other
    /// clients' last turn (at most [`TURN_MAX`]) when that was longer. A client whose waiters
    /// race as Redisson's do (every release a race, the releasing thread's next attempt first)
    /// keeps the lock for long turns; this client takes turns as long, no longer.
    fn turn(&self, budget: Duration) -> Duration {
        budget.max(self.owed.min(TURN_MAX))
    }
}

/// The run ended while another client waits: the head races like everyone else until another
/// client's owner has had the lock.
#[derive(Debug, Clone, Copy)]
struct Contest {
    /// A head that stands back counts from the message after this one in the subscription's
    /// count (the last local release's own message; `None`: unknown, count from now).
    after: Option<u64>,
    /// When that release was seen (bounds the wait for its message).
    began: Instant,
    /// Races the head won in a row.
    wins: u32,
    /// When the head, standing back, first saw the release's message.
    seen: Option<Instant>,
}

fn key(tag: &str, name: &str) -> String {
    let mut k = String::with_capacity(tag.len() + 1 + name.len());
    k.push_str(tag);
    k.push('\0');
    k.push_str(name);
    k
}

impl LocalQueues {
    /// The queues of a client with this hand-off policy.
    pub(crate) fn new(policy: LocalHandOff) -> Self {
        Self {
            policy,
            ..Self::default()
        }
    }

    fn get(&self, tag: &str, name: &str) -> Option<Arc<Queue>> {
        if self.live.load(Ordering::Acquire) == 0 {
            return None;
        }
        self.map.lock().get(&key(tag, name)).cloned()
    }

    /// `true` when local waiters are queued for the lock.
    pub(crate) fn has_waiters(&self, tag: &str, name: &str) -> bool {
        self.get(tag, name)
            .is_some_and(|q| !q.state.lock().waiters.is_empty())
    }

    /// Whether a waiting acquisition of the lock makes an attempt of its own before it joins
    /// the queue: not while local waiters are queued (first come, first served; no barging
    /// past the queue), unless the owner may hold the lock already (`owner_may_hold`, from the
    /// owner ledger): a re-entry never waits behind its own hold.
    pub(crate) fn attempts_first(&self, tag: &str, name: &str, owner_may_hold: bool) -> bool {
        owner_may_hold || !self.has_waiters(tag, name)
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

    /// A local owner is about to send a release that may free the lock. Marks where the
    /// release's own unlock message will be in the subscription's count, and returns the
    /// channel to ask `PUBSUB NUMSUB` about (together with the release) when the policy needs a
    /// fresh answer: the run has lasted its budget and the last answer is older than that.
    pub(crate) fn releasing(&self, tag: &str, name: &str) -> Option<String> {
        let queue = self.get(tag, name)?;
        let mut st = queue.state.lock();
        st.release_mark = st.subscription.as_ref().map(|s| s.messages());
        let now = Instant::now();
        st.release_began = Some(now);
        let LocalHandOff::Bounded(budget) = self.policy else {
            return None;
        };
        let budget = st.turn(budget);
        if st.waiters.is_empty() || st.contest.is_some() {
            return None;
        }
        let spent = st
            .run_since
            .is_some_and(|since| now.saturating_duration_since(since) >= budget);
        let fresh = st.others.is_some_and(|(_, until)| until > now);
        (spent && !fresh).then(|| queue.channel.clone())
    }

    /// A local release of the lock; `freed`: the lock may be free now (released, not held, or
    /// an error); `others`: the answer to "does another client listen?" asked with it. Hands the
    /// lock to the head at once, or starts (or goes on with) a contest, as the policy says.
    pub(crate) fn released(&self, tag: &str, name: &str, freed: bool, others: Option<bool>) {
        if self.live.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut map = self.map.lock();
        let Some(queue) = map.get(&key(tag, name)).cloned() else {
            return;
        };
        let mut st = queue.state.lock();
        if !freed {
            st.release_began = None;
            return;
        }
        // Whoever freed it, no owner of this queue holds it now.
        st.holder = None;
        let now = Instant::now();
        if let (Some(answer), LocalHandOff::Bounded(budget)) = (others, self.policy) {
            st.others = Some((answer, now.checked_add(budget).unwrap_or(now)));
        }
        let mark = st.release_mark.take();
        let began = st.release_began.take().unwrap_or(now);
        let Some((_, head)) = st.waiters.front() else {
            // Nobody waits and nobody holds: the queue ends.
            self.remove(&mut map, &queue);
            return;
        };
        let head = head.clone();
        let hand_over = match self.policy {
            LocalHandOff::Unbounded => true,
            LocalHandOff::Off => false,
            LocalHandOff::Bounded(budget) => {
                let turn = st.turn(budget);
                let within = |at: Instant| began.saturating_duration_since(at) < turn;
                if st.contest.is_some() {
                    false
                } else if st.run_since.is_none_or(within) {
                    true
                } else if matches!(st.others, Some((false, until)) if until > began) {
                    // Nobody else listens: a new run starts with the next acquisition, and
                    // nothing is owed.
                    st.run_since = None;
                    st.owed = Duration::ZERO;
                    true
                } else {
                    false
                }
            }
        };
        st.handed = hand_over;
        if hand_over {
            self.hand_overs.fetch_add(1, Ordering::Relaxed);
        } else {
            self.contests.fetch_add(1, Ordering::Relaxed);
            let wins = st.contest.map_or(0, |c| c.wins);
            st.contest = Some(Contest {
                after: mark,
                began: now,
                wins,
                seen: None,
            });
        }
        drop(st);
        drop(map);
        head.notify_one();
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
    fn remove(&self, map: &mut HashMap<String, Arc<Queue>>, queue: &Arc<Queue>) {
        if map.get(&queue.key).is_some_and(|q| Arc::ptr_eq(q, queue)) {
            map.remove(&queue.key);
            self.live.fetch_sub(1, Ordering::AcqRel);
        }
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
    /// A contest: no attempt yet; wait at most this long for a message or a hand-over, then
    /// ask again.
    Defer(Duration),
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

    /// A turn handed to this waiter (head promotion, a local hand-over or a contest's start).
    pub(crate) fn notified(&self) -> Notified<'_> {
        self.notify.notified()
    }

    /// What the head does next, `by_message` telling whether its last wake-up was an unlock
    /// message: while an owner of this queue holds the lock the head waits for its hand-over,
    /// unless the message is news (it came later than [`ECHO_WINDOW`] after that owner's
    /// acquisition and outside its release: a remote forced unlock, say), when it attempts.
    pub(crate) fn next(&self, by_message: bool) -> Plan {
        match self.plan() {
            Plan::Wait(_)
                if by_message && self.held_for().is_some_and(|held| held >= ECHO_WINDOW) =>
            {
                Plan::Attempt
            }
            plan => plan,
        }
    }

    /// What the head does next, messages aside (see [`next`](Self::next)).
    fn plan(&self) -> Plan {
        let mut st = self.queue.state.lock();
        let now = Instant::now();
        if let Some((_, until)) = &st.holder {
            if *until > now {
                return Plan::Wait(*until - now);
            }
        }
        let messages = st.subscription.as_ref().map(|s| s.messages());
        let policy_stands_back = matches!(self.queues.policy, LocalHandOff::Bounded(_));
        let Some(contest) = st.contest.as_mut() else {
            return Plan::Attempt;
        };
        if !(policy_stands_back && contest.wins >= CONTEST_WINS) {
            // A race, at once: the local release has ended, as a Java client's releasing
            // thread, whose next `lock()` follows its `unlock()`'s reply, races at once.
            return Plan::Attempt;
        }
        // Standing back: not before the release's own message (a waiter of another client
        // woken by it has sent its attempt by [`STAND_BACK`] after it).
        let waited = now.saturating_duration_since(contest.began);
        if let (Some(after), Some(count)) = (contest.after, messages) {
            if count <= after && waited < MESSAGE_WAIT {
                return Plan::Defer(MESSAGE_WAIT - waited);
            }
        }
        let until = *contest.seen.get_or_insert(now) + STAND_BACK;
        if until > now {
            return Plan::Defer(until - now);
        }
        Plan::Attempt
    }

    /// The head's attempt found the lock busy while no owner of this queue holds it: another
    /// client's owner has it, so a contest is over and no run goes on.
    pub(crate) fn busy(&self) {
        let mut st = self.queue.state.lock();
        st.away_since.get_or_insert_with(Instant::now);
        st.handed = false;
        st.contest = None;
        st.run_since = None;
        st.quiet = Duration::ZERO;
    }

    /// The head acquired the lock as `field`, its hold lasting at least until `until`; it leaves
    /// the queue and the next waiter becomes head. A hand-over goes on with the run; an
    /// acquisition of the head's own starts a run, or counts as a race won in a contest.
    pub(crate) fn acquired(self, field: Arc<str>, until: Instant) {
        let mut st = self.queue.state.lock();
        let now = Instant::now();
        st.holder = Some((field, until));
        st.holder_since = Some(now);
        if let Some(since) = st.away_since.take() {
            st.owed = now.saturating_duration_since(since);
        }
        if std::mem::take(&mut st.handed) {
            st.run_since.get_or_insert(now);
        } else if let Some(contest) = &mut st.contest {
            if contest.seen.is_none() {
                contest.wins += 1;
            } else {
                // The head stood back and nobody took the lock: whoever listens does not wait
                // for it. Alone for a while, then ask again.
                let quiet = st.quiet.max(QUIET_START);
                st.quiet = (quiet * 2).min(QUIET_MAX);
                st.others = Some((false, now + quiet));
                st.owed = Duration::ZERO;
                st.contest = None;
                st.run_since = Some(now);
            }
        } else {
            st.run_since = Some(now);
        }
    }

    /// How long the owner of this queue that holds the lock has held it (`None`: none does).
    /// An unlock message that reaches a waiting head within [`ECHO_WINDOW`] of that owner's
    /// acquisition is the echo of the release that handed over; a later one is news (a remote
    /// forced unlock, say), and the head then attempts although a local owner seems to hold.
    fn held_for(&self) -> Option<Duration> {
        let st = self.queue.state.lock();
        st.holder.as_ref()?;
        if st.release_began.is_some() {
            // That owner's release is under way: a message now is its own, no news, and the
            // release's end (`released`) wakes the head.
            return None;
        }
        st.holder_since.map(|since| since.elapsed())
    }

    /// The queue's subscription to the lock's channel, made by the first head that needs it.
    pub(crate) fn subscription(&self, pubsub: &PubSub) -> Arc<Subscription> {
        let mut st = self.queue.state.lock();
        st.subscription
            .get_or_insert_with(|| Arc::new(pubsub.subscribe(&self.queue.channel)))
            .clone()
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
            // Nobody left to listen. The queue (its run, its contest) lives on while one of its
            // owners holds the lock: that owner's release ends it.
            subscription = st.subscription.take();
            st.release_mark = None;
            if st.holder.is_none() {
                self.queues.remove(&mut map, &self.queue);
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
        assert!(!q.has_waiters("lock", "n"));
        assert_eq!(q.len(), 1, "the queue lives while its last owner holds");
        q.released("lock", "n", true, None);
        assert_eq!(q.len(), 0, "an empty queue is removed");
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
        q.released("lock", "n", false, None);
        tokio::task::yield_now().await;
        assert!(!woken.is_finished(), "a partial release hands nothing over");
        q.released("lock", "n", true, None);
        assert_eq!(woken.await.unwrap(), Plan::Attempt);
    }

    #[tokio::test(start_paused = true)]
    async fn an_unlock_message_is_news_only_after_the_echo_window_and_outside_the_release() {
        let q = queues();
        let first = q.join("lock", "n", "ch");
        let second = q.join("lock", "n", "ch");
        first.acquired("u:1".into(), Instant::now() + 10_000 * MS);
        assert!(second.wait_head(Some(Instant::now())).await);
        // Without a message, and with one within the echo window: wait for the hand-over.
        assert_eq!(second.next(false), Plan::Wait(10_000 * MS));
        tokio::time::sleep(ECHO_WINDOW - MS).await;
        assert!(matches!(second.next(true), Plan::Wait(_)), "an echo");
        tokio::time::sleep(MS).await;
        assert!(
            matches!(second.next(false), Plan::Wait(_)),
            "no message, no news"
        );
        assert_eq!(second.next(true), Plan::Attempt, "a later message is news");
        // While the local holder's own release is under way, its message is no news.
        let _ = q.releasing("lock", "n");
        assert!(
            matches!(second.next(true), Plan::Wait(_)),
            "the release's own message"
        );
    }

    #[test]
    fn a_waiter_attempts_first_unless_others_are_queued_and_it_may_not_hold() {
        let q = queues();
        assert!(q.attempts_first("lock", "n", false), "nobody queued");
        let _queued = q.join("lock", "n", "ch");
        assert!(
            !q.attempts_first("lock", "n", false),
            "no barging past the queue"
        );
        assert!(
            q.attempts_first("lock", "n", true),
            "a re-entry never waits behind itself"
        );
        assert!(
            q.attempts_first("write", "n", false),
            "another kind's queue"
        );
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

    fn with(policy: LocalHandOff) -> Arc<LocalQueues> {
        Arc::new(LocalQueues::new(policy))
    }

    fn contest(q: &LocalQueues) -> Option<Contest> {
        q.map.lock().get(&key("lock", "n"))?.state.lock().contest
    }

    /// `current` (the head) acquires with one more owner queued behind, `hold` passes, the
    /// release begins (`asked`: the queue wanted the question sent with it) and ends (`others`:
    /// the answer), and the next owner becomes head. Returns it, its plan and whether the
    /// release handed over.
    struct Round {
        next: Ticket,
        plan: Plan,
        handed: bool,
        asked: bool,
    }

    async fn hold_and_release(
        q: &Arc<LocalQueues>,
        current: Ticket,
        hold: Duration,
        others: Option<bool>,
    ) -> Round {
        let next = q.join("lock", "n", "ch");
        assert!(current.wait_head(Some(Instant::now())).await);
        assert_ne!(
            current.plan(),
            Plan::Wait(30_000 * MS),
            "nobody local holds"
        );
        current.acquired("u:1".into(), Instant::now() + 30_000 * MS);
        tokio::time::sleep(hold).await;
        let asked = q.releasing("lock", "n").is_some();
        q.released("lock", "n", true, others);
        assert!(next.wait_head(Some(Instant::now())).await);
        let handed = next.queue.state.lock().handed;
        let plan = next.plan();
        Round {
            next,
            plan,
            handed,
            asked,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_run_hands_over_within_its_budget_and_asks_once_it_is_spent() {
        let q = with(LocalHandOff::Bounded(10 * MS));
        let mut t = q.join("lock", "n", "ch");
        // 1 ms holds: hand-overs, no question, while the run lasts less than 10 ms.
        let mut asked_at = None;
        for i in 0..30 {
            let r = hold_and_release(&q, t, MS, None).await;
            t = r.next;
            if r.asked {
                asked_at = Some(i);
                assert!(!r.handed, "no answer: a contest rather than a hand-over");
                break;
            }
            assert!(r.handed, "round {i}: within the budget, a hand-over");
            assert_eq!(r.plan, Plan::Attempt);
        }
        assert_eq!(
            asked_at,
            Some(9),
            "asked once the run lasted 10 ms, not before"
        );
        // A race won (the head's own attempt), then the answer "nobody else": a new run of
        // hand-overs, and no question for another budget.
        t.busy();
        let r = hold_and_release(&q, t, 20 * MS, Some(false)).await;
        assert!(r.asked && r.handed);
        assert!(contest(&q).is_none());
        let r = hold_and_release(&q, r.next, MS, None).await;
        assert!(!r.asked, "the answer is fresh for one budget");
        assert!(r.handed);
    }

    #[tokio::test(start_paused = true)]
    async fn while_another_client_listens_a_spent_run_turns_into_a_contest_that_stands_back() {
        let q = with(LocalHandOff::Bounded(10 * MS));
        let t = q.join("lock", "n", "ch");
        // A 100 ms hold spends the run at once; someone else listens.
        let r = hold_and_release(&q, t, 100 * MS, Some(true)).await;
        assert!(r.asked);
        assert!(
            !r.handed,
            "no hand-over while another client waits past the budget"
        );
        assert_eq!(
            r.plan,
            Plan::Attempt,
            "a race (no message to wait for without a channel)"
        );
        assert_eq!(contest(&q).unwrap().wins, 0);
        // Races won: the contest goes on, with no question asked.
        let r = hold_and_release(&q, r.next, 100 * MS, None).await;
        assert!(!r.asked && !r.handed);
        assert_eq!(contest(&q).unwrap().wins, 1);
        let r = hold_and_release(&q, r.next, 100 * MS, None).await;
        assert!(!r.handed);
        assert_eq!(contest(&q).unwrap().wins, CONTEST_WINS);
        // Now the head stands back before its attempt.
        assert_eq!(r.plan, Plan::Defer(STAND_BACK));
        tokio::time::sleep(STAND_BACK).await;
        assert_eq!(r.next.plan(), Plan::Attempt);
        // Its attempt finds the lock busy: another client has it; the contest is over and the
        // next acquisition of the head's own starts a new run.
        r.next.busy();
        assert!(contest(&q).is_none());
        let r = hold_and_release(&q, r.next, MS, None).await;
        assert!(r.handed, "a new run hands over within its budget");
    }

    #[tokio::test(start_paused = true)]
    async fn when_nobody_takes_the_lock_from_a_head_standing_back_the_client_is_alone_a_while() {
        let q = with(LocalHandOff::Bounded(10 * MS));
        let mut r = hold_and_release(&q, q.join("lock", "n", "ch"), 100 * MS, Some(true)).await;
        for _ in 0..CONTEST_WINS {
            r = hold_and_release(&q, r.next, 100 * MS, None).await;
        }
        assert_eq!(r.plan, Plan::Defer(STAND_BACK));
        tokio::time::sleep(STAND_BACK).await;
        assert_eq!(r.next.plan(), Plan::Attempt);
        // Its attempt wins: the listener was no waiter. Hand-overs without a question for
        // QUIET_START, then the question again.
        let r = hold_and_release(&q, r.next, 60 * MS, None).await;
        assert!(contest(&q).is_none());
        assert!(!r.asked && r.handed, "alone for a while");
        let r = hold_and_release(&q, r.next, 60 * MS, None).await;
        assert!(r.asked, "asked again after {QUIET_START:?}");
        // The next stand-back without a taker keeps the client alone twice as long.
        assert_eq!(
            q.map
                .lock()
                .get(&key("lock", "n"))
                .unwrap()
                .state
                .lock()
                .quiet,
            2 * QUIET_START
        );
    }

    /// Holds of `hold` from `t` on until a release asks who else listens (answered `others`);
    /// returns the hand-overs before it, and the next round.
    async fn hand_overs_until_asked(
        q: &Arc<LocalQueues>,
        mut t: Ticket,
        hold: Duration,
        others: Option<bool>,
    ) -> (usize, Round) {
        let mut handed = 0;
        loop {
            let r = hold_and_release(q, t, hold, others).await;
            if r.asked {
                return (handed, r);
            }
            assert!(r.handed, "no question, a hand-over");
            handed += 1;
            t = r.next;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn after_another_clients_long_turn_the_run_lasts_as_long_and_no_longer() {
        let q = with(LocalHandOff::Bounded(10 * MS));
        // A spent run while someone else listens: a contest; the head's race finds the lock
        // busy (another client's owner has it) and it keeps it 500 ms.
        let r = hold_and_release(&q, q.join("lock", "n", "ch"), 100 * MS, Some(true)).await;
        assert_eq!(r.plan, Plan::Attempt);
        r.next.busy();
        tokio::time::sleep(500 * MS).await;
        // This client's turn then hands over for as long (holds starting before 500 ms), and
        // asks at the first release past it.
        let (handed, r) = hand_overs_until_asked(&q, r.next, 100 * MS, Some(true)).await;
        assert_eq!(
            handed, 4,
            "releases at 100..400 ms hand over, the one at 500 ms asks"
        );
        assert!(!r.handed, "someone else listens: a contest");
        // The contest's races come at once (the release has ended, as a Java client's
        // releasing thread races at once), two of them before the head stands back.
        assert_eq!(r.plan, Plan::Attempt);
        let r = hold_and_release(&q, r.next, 100 * MS, None).await;
        assert_eq!(r.plan, Plan::Attempt);
        let r = hold_and_release(&q, r.next, 100 * MS, None).await;
        assert_eq!(r.plan, Plan::Defer(STAND_BACK));
        // A turn of 5 s elsewhere lengthens this client's run to TURN_MAX, no more.
        tokio::time::sleep(STAND_BACK).await;
        r.next.busy();
        tokio::time::sleep(5_000 * MS).await;
        let (handed, r) = hand_overs_until_asked(&q, r.next, 100 * MS, Some(false)).await;
        assert_eq!(handed, 19, "holds starting within {TURN_MAX:?}");
        // Nobody else listens any more: nothing is owed, runs are the budget's again.
        assert!(r.handed);
        let (handed, _) = hand_overs_until_asked(&q, r.next, 2 * MS, None).await;
        assert!(
            (4..=5).contains(&handed),
            "{handed}: back to a 10 ms run once the answer went stale"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn without_an_answer_a_spent_run_contests_rather_than_risk_starving_others() {
        let q = with(LocalHandOff::Bounded(10 * MS));
        let t = q.join("lock", "n", "ch");
        let r = hold_and_release(&q, t, 20 * MS, None).await;
        assert!(r.asked && !r.handed);
        assert!(contest(&q).is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn unbounded_always_hands_over_and_off_never_does() {
        let q = with(LocalHandOff::Unbounded);
        let mut t = q.join("lock", "n", "ch");
        for i in 0..5 {
            let r = hold_and_release(&q, t, 100 * MS, None).await;
            assert!(!r.asked, "round {i}: nobody is asked");
            assert!(r.handed);
            t = r.next;
        }
        drop(t);
        let q = with(LocalHandOff::Off);
        let mut t = q.join("lock", "n", "ch");
        for i in 0..5 {
            let r = hold_and_release(&q, t, MS, None).await;
            assert!(!r.asked, "round {i}: nobody is asked");
            assert!(!r.handed, "round {i}");
            assert_eq!(r.plan, Plan::Attempt, "round {i}: Off never stands back");
            t = r.next;
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_queue_outlives_its_last_waiter_while_an_owner_holds() {
        let q = queues();
        let t = q.join("lock", "n", "ch");
        t.acquired("u:1".into(), Instant::now() + 30_000 * MS);
        assert_eq!(q.len(), 1, "the holder's queue keeps its run");
        assert!(!q.has_waiters("lock", "n"));
        q.released("lock", "n", true, None);
        assert_eq!(q.len(), 0, "its release ends it");
    }
}
