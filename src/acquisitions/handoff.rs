//! The local hand-off policy ([`LocalHandOff`], `Config::local_hand_off`) of one lock's local
//! wait line, as a pure state machine: no I/O, no clock, no wake-ups. Its inputs are events
//! with the time they happened ([`HandOff::releasing`], [`HandOff::released`],
//! [`HandOff::acquired`], [`HandOff::busy`]) and the questions of the line's head
//! ([`HandOff::plan`], [`HandOff::next`]); its outputs are decisions (ask who else listens,
//! hand over or contest, and the head's [`Plan`]). The wait line (`queue`) feeds it and does
//! what it says.
//!
//! Bounded in time while another client waits, never in count:
//! * A *run* is a sequence of local hand-overs; it starts with a local acquisition that was not
//!   a hand-over (the head's own attempt won). It is this client's *turn*.
//! * `Bounded(budget)` (the default, 10 ms): a local release hands over while another hold as
//!   long as the one ending would end within the run's length: the budget, or the other
//!   clients' last turn when that was longer, at most [`TURN_MAX`] (2 s). (Judged by when the
//!   next hold would end, not when it starts: beside a client that takes one hold per turn,
//!   a run that went on while it had lasted less than one hold took two.) The other clients' turn is measured from the head's
//!   release that started a contest (or the head's first attempt that found the lock busy
//!   with no local holder, when there was no contest) to this client's next acquisition; it is forgotten once nobody else listens. Once the run has lasted its
//!   length, the release asks whether another client listens on the lock's channel
//!   (`PUBSUB NUMSUB`/`SHARDNUMSUB`, sent together with the release script, so no round trip
//!   of its own; the answer is kept for one budget, so at most one question per budget).
//!   "Lasted its length" is the same judgement: the next hold would end past it.
//!   Nobody: the hand-over happens and a new run starts. Someone, or the server cannot tell
//!   (classic pub/sub on a cluster): the run ends and the line enters a *contest* that lasts
//!   until another client's owner has had the lock (the head's attempt finds the lock busy
//!   with no local holder).
//! * Why the other clients' turn: a Redisson client does not hand over, but its releasing
//!   thread calls `lock()` again at once and races the waiters its unlock message wakes, with
//!   the reply ahead of the message, so it keeps the lock for turns of many holds (two Java
//!   clients on one hot lock take turns of 10–30 holds of 100 ms in the bench). A client that
//!   gave way after each budget would get a small share beside it (14 % measured). Turns as
//!   long as the other side's, and no longer, give each side about half.
//! * In a contest a release does not hand over, and the head stands back at once
//!   ([`CONTEST_WINS`] is 0: it used to race twice first, and a Java waiter woken through
//!   netty and the semaphore Redisson's lock entry waits on loses every race on the release's
//!   own message to it, so those races were two more local holds per Java hold, `ABBB`
//!   cycles, Java's share about a quarter): it attempts only [`STAND_BACK`] after that
//!   message (a remote waiter woken by it has sent its attempt by then), so another client
//!   gets the lock. An unlock message after the release's own, while the head stands back,
//!   is another client's release: it took the lock and gave it up, its turn is over, and the
//!   head's attempt after the stand-back ends the contest (among several others, whose
//!   holders it cannot name then, the contest goes on, the stand-back not lengthened). If
//!   nobody takes it
//!   meanwhile, the next stand-back is twice as long, up to [`STAND_BACK_MAX`] (a JVM's
//!   waiting thread does not always attempt within 50 ms); the length is kept while other
//!   clients take their turns. If nobody takes it even then (the listener was no waiter, or
//!   the server could not tell), the client takes itself for alone for [`QUIET_START`],
//!   doubling up to [`QUIET_MAX`] while that goes on.
//! * Among several other clients (the answer to "who else listens" counts them), a contest
//!   lasts until each of them has had the lock since this client's turn ended, not only the
//!   first: each attempt of the head that finds the lock busy asks who holds it (`HKEYS`: the
//!   holder's client id, in the field's name; a read, after the attempt, only then), and the
//!   head stands back again after the next unlock message until every listener was seen
//!   holding. Else two crate processes would take turns with each other and leave a JVM
//!   nothing (each reacts to an unlock message faster than a JVM's waiting thread, and its
//!   contest ended as soon as the other crate process had the lock). The contest also ends
//!   when a holder has the lock a second time after another (the listener not seen does not
//!   wait), when one holder has had it twice as long as this client's turn (two clients each
//!   standing back for the other would leave it to a third), when the holder is unknown, or
//!   after [`TURN_MAX`]. The time away is then shared among the others: this client's next
//!   turn is as long as one of theirs, not all of them together.
//!   `fleet.rs` simulates fleets of crate and Java processes under this policy.
//! * Worst case, `Bounded(b)` with holds of `h`, for a waiter of another client that is
//!   already subscribed: the hold in progress, the rest of the run (holds that start within
//!   its length of its start, plus those that start within one budget of its subscribing,
//!   while the last answer was still "nobody"), and then at most [`CONTEST_WINS`] holds won in
//!   races, plus one hold per stand-back that found no taker (a remote waiter slower than
//!   it: at most four, 50 to 400 ms, before the client takes itself for alone). When the
//!   other clients' last turn was no longer than `b` (a waiter that takes one hold per turn,
//!   with `h >= b`): 1 or 2 local holds in a row; with short holds, about `2b + h` of local
//!   holds. After a longer turn of theirs, `t`: the holds that end within `min(t,
//!   TURN_MAX)` — as long a turn as they took, at most 2 s.
//! * `Off`: every local release is a contest without standing back (Redisson's behaviour: the
//!   head races at once like a Java client's releasing thread). `Unbounded`: every local
//!   release hands over, nobody is asked.
//! * While an owner of this line holds the lock (the head that acquired it last), the next
//!   head makes no attempt until that owner's release hands over (or that hold's lease has run
//!   out): an unlock message within [`ECHO_WINDOW`] of that owner's acquisition is the previous
//!   release's echo, and so is one that comes while that owner's own release is under way
//!   (the release's end wakes the head). Any other unlock message is news (a remote
//!   `force_unlock`, a Java peer's forced release): the head attempts at once, as any waiter
//!   would.

use std::time::Duration;

use tokio::time::Instant;

use crate::config::LocalHandOff;

/// Races a contest's head may win in a row before it stands back for another client.
pub(crate) const CONTEST_WINS: u32 = 0;
/// How long a head that stands back waits after the release's unlock message before its own
/// attempt: long enough for a waiter of another client woken by that message to have sent its
/// attempt (a loopback round trip is well under 1 ms; this leaves room for a loaded machine).
pub(crate) const STAND_BACK: Duration = Duration::from_millis(50);
/// The longest stand-back: one that found no taker doubles (up to this) before the client
/// takes itself for alone (see [`QUIET_START`]). A JVM's waiting thread, woken through netty
/// and the semaphore Redisson's lock entry waits on, does not always attempt within
/// [`STAND_BACK`] of the message; taking that for "nobody waits" gave the crate runs of 2, 4,
/// 8, 16 holds beside real Java.
pub(crate) const STAND_BACK_MAX: Duration = Duration::from_millis(400);
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
/// waits (see [`HandOff::turn`]).
pub(crate) const TURN_MAX: Duration = Duration::from_secs(2);
/// An unlock message this soon after a local hand-over is that hand-over's own echo (the
/// release published it before the head's attempt was even sent): see [`HandOff::next`].
pub(crate) const ECHO_WINDOW: Duration = Duration::from_millis(50);

/// What the head does next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Attempt now.
    Attempt,
    /// A contest: no attempt yet; wait at most this long for a message or a hand-over, then
    /// ask again.
    Defer(Duration),
    /// An owner of this line holds the lock for at least this long: wait for its hand-over.
    Wait(Duration),
}

/// What a local release that ended decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Released {
    /// The lock is still held (a partial release): nothing changes for the head.
    Kept,
    /// The lock may be free and nobody waits: the line may end.
    Idle,
    /// The lock is handed to the head, which attempts at once.
    HandedOver,
    /// A contest starts or goes on: the head is woken to race (or stand back).
    Contested,
}

/// The run ended while another client waits: the head stands back until every other client
/// that listens has had the lock (or one had it twice, or [`TURN_MAX`] passed).
#[derive(Debug, Clone)]
struct Contest {
    /// A head that stands back counts from the message after this one in the subscription's
    /// count (the last local release's own message, or the last message before the head's
    /// attempt found another client holding; `None`: unknown, count from now).
    after: Option<u64>,
    /// When that release was seen (this client's turn ended then: the other clients' turn
    /// counts from it).
    began: Instant,
    /// Since when the head waits for that message (bounds the wait: [`MESSAGE_WAIT`]).
    waiting: Instant,
    /// When the contest first began (bounds it: [`TURN_MAX`]).
    opened: Instant,
    /// Races the head won in a row.
    wins: u32,
    /// When the head, standing back, first saw the message it waited for.
    seen: Option<Instant>,
    /// The subscription's count of the last message the head, standing back, has accounted
    /// for (the one it waited for, then each later one): a later message is another client's
    /// release, so another client took the lock (and gave it up) meanwhile.
    heard: Option<u64>,
    /// Whether another client took the lock while the head stood back this time (a later
    /// unlock message came): the head's attempt after it then wins, but somebody did take it.
    taken: bool,
    /// How many other clients listened on the lock's channel when it began (at least 1).
    others: u32,
    /// The other clients seen holding the lock since it began (first seen first), the last
    /// one seen, and since when it has been seen holding (its turn: from the sample that
    /// first saw it, or from the contest's start for the first one).
    held: Vec<u64>,
    last: Option<u64>,
    streak: Instant,
    /// How long this client's turn that ended the contest lasted: one holder seen holding
    /// twice as long has had its turn (two clients each waiting for the other, standing
    /// back, would otherwise leave the lock to a third until [`TURN_MAX`]).
    mine: Duration,
}

impl Contest {
    /// Whether every other client that listened has been seen holding since the contest
    /// began.
    fn everyone_held(&self) -> bool {
        self.held.len() >= self.others as usize
    }

    /// Among how many other clients the time away is shared (see [`HandOff`]'s `sharing`).
    fn sharing(&self) -> u32 {
        self.others
            .max(u32::try_from(self.held.len()).unwrap_or(u32::MAX))
            .max(1)
    }
}

/// The hand-off state of one lock's wait line. `messages` arguments are the count of unlock
/// messages the line's subscription has seen so far (`None`: no subscription yet).
#[derive(Debug)]
pub(crate) struct HandOff {
    policy: LocalHandOff,
    /// Until when the hold of the line's owner that holds the lock lasts at least (send time +
    /// lease; a watchdog renewal may extend it), and when that owner acquired it.
    holder: Option<(Instant, Instant)>,
    /// When the current run of local hand-overs started (`None`: no run).
    run_since: Option<Instant>,
    /// How long the hold whose release is under way lasted (from its acquisition to the start
    /// of its release): a run goes on only while the next hold, as long, would end within the
    /// turn (see [`HandOff::turn`]).
    last_hold: Duration,
    /// The last release handed over: the head's next acquisition continues the run.
    handed: bool,
    /// The last answer to "how many other clients listen on the lock's channel?", and until
    /// when it holds.
    others: Option<(u32, Instant)>,
    /// How long the next "nobody came" holds (see [`QUIET_START`]); zero: not set yet.
    quiet: Duration,
    /// How long the head stands back in a contest: [`STAND_BACK`], doubled up to
    /// [`STAND_BACK_MAX`] each time it found no taker; kept while other clients take their
    /// turns, back to [`STAND_BACK`] once nobody else listens.
    stand_back: Duration,
    /// The subscription's message count when the last local release began, and when it began
    /// (the run's age is judged then: the question, if any, was decided then).
    release_mark: Option<u64>,
    release_began: Option<Instant>,
    /// The contest, while one is on. Boxed: a line exists for every lock a task of this
    /// client waits on (ten thousand waiters on distinct locks, ten thousand lines), a contest
    /// only where other clients want the same lock.
    contest: Option<Box<Contest>>,
    /// Since when another client's owners have had the lock (the head's first attempt that
    /// found it busy with no local holder; `None`: not since this client last had it).
    away_since: Option<Instant>,
    /// How long the other clients' last turn lasted (from `away_since` to this client's next
    /// acquisition, shared among `sharing`; zero once nobody else listens): see
    /// [`HandOff::turn`].
    owed: Duration,
    /// Among how many other clients the time away is shared: the most of the other clients
    /// that listened and of those seen holding in the last contest (1 without one).
    sharing: u32,
}

/// A line's hand-off state, small while it is a fresh one's: a line exists for every lock a
/// task of this client waits on (ten thousand waiters on ten thousand locks another client
/// holds, ten thousand lines), and such a line's state stays [`HandOff::new`]'s but for when
/// the other clients' turn began (its head's attempts found the lock busy). Only a line where
/// more happens (a local holder, a run, a contest) keeps the whole state, boxed.
///
/// Every operation runs [`HandOff`]'s own on the state (a fresh one made on the stack when the
/// line has none): what the line does is exactly what a [`HandOff`] kept whole would do.
#[derive(Debug)]
pub(crate) enum LineHandOff {
    /// [`HandOff::new`]`(policy)` with `away_since` (see [`HandOff`]'s field).
    Fresh {
        policy: LocalHandOff,
        away_since: Option<Instant>,
    },
    /// Anything else.
    Whole(Box<HandOff>),
}

impl LineHandOff {
    /// A line's state with no holder, no run and no contest, under `policy`.
    pub(crate) fn new(policy: LocalHandOff) -> Self {
        Self::Fresh {
            policy,
            away_since: None,
        }
    }

    /// Runs `f` on the state; a fresh state that `f` leaves fresh stays small.
    fn with<R>(&mut self, f: impl FnOnce(&mut HandOff) -> R) -> R {
        match self {
            Self::Whole(h) => f(h),
            Self::Fresh { policy, away_since } => {
                let mut h = HandOff {
                    away_since: *away_since,
                    ..HandOff::new(*policy)
                };
                let out = f(&mut h);
                match h.fresh_but_away() {
                    Some(away) => *away_since = away,
                    None => *self = Self::Whole(Box::new(h)),
                }
                out
            }
        }
    }

    /// Reads the state.
    fn view<R>(&self, f: impl FnOnce(&HandOff) -> R) -> R {
        match self {
            Self::Whole(h) => f(h),
            Self::Fresh { policy, away_since } => f(&HandOff {
                away_since: *away_since,
                ..HandOff::new(*policy)
            }),
        }
    }

    /// See [`HandOff::holds`].
    pub(crate) fn holds(&self) -> bool {
        self.view(HandOff::holds)
    }

    /// See [`HandOff::releasing`].
    pub(crate) fn releasing(&mut self, now: Instant, messages: Option<u64>, waiters: bool) -> bool {
        self.with(|h| h.releasing(now, messages, waiters))
    }

    /// See [`HandOff::released`].
    pub(crate) fn released(
        &mut self,
        now: Instant,
        freed: bool,
        others: Option<u32>,
        head: bool,
    ) -> Released {
        self.with(|h| h.released(now, freed, others, head))
    }

    /// See [`HandOff::hands_over`].
    pub(crate) fn hands_over(&self, now: Instant) -> bool {
        self.view(|h| h.hands_over(now))
    }

    /// See [`HandOff::line_emptied`].
    pub(crate) fn line_emptied(&mut self) {
        self.with(HandOff::line_emptied);
    }

    /// See [`HandOff::next`].
    pub(crate) fn next(&mut self, now: Instant, by_message: bool, messages: Option<u64>) -> Plan {
        self.with(|h| h.next(now, by_message, messages))
    }

    /// See [`HandOff::asks_holder`].
    pub(crate) fn asks_holder(&self) -> bool {
        self.view(HandOff::asks_holder)
    }

    /// See [`HandOff::busy`].
    pub(crate) fn busy(&mut self, now: Instant, holder: Option<u64>, messages: Option<u64>) {
        self.with(|h| h.busy(now, holder, messages));
    }

    /// See [`HandOff::acquired`].
    pub(crate) fn acquired(&mut self, now: Instant, until: Instant) {
        self.with(|h| h.acquired(now, until));
    }
}

/// What a release that freed the lock does while someone waits in line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// The run goes on: the lock goes to the head.
    HandOver,
    /// The run has lasted its length but nobody else listens: a new run starts, the lock
    /// goes to the head.
    NewRun,
    /// The local owners contest the lock with the other clients.
    Contest,
}

impl HandOff {
    /// A line with no holder, no run and no contest, under `policy`.
    pub(crate) fn new(policy: LocalHandOff) -> Self {
        Self {
            policy,
            holder: None,
            run_since: None,
            last_hold: Duration::ZERO,
            handed: false,
            others: None,
            quiet: Duration::ZERO,
            stand_back: STAND_BACK,
            release_mark: None,
            release_began: None,
            contest: None,
            away_since: None,
            owed: Duration::ZERO,
            sharing: 1,
        }
    }

    /// `Some(away_since)` when the state is [`HandOff::new`]'s but for `away_since` (see
    /// [`LineHandOff`]).
    fn fresh_but_away(&self) -> Option<Option<Instant>> {
        // Every field named: a field added later must say here whether a fresh state has it.
        let HandOff {
            policy: _,
            holder,
            run_since,
            last_hold,
            handed,
            others,
            quiet,
            stand_back,
            release_mark,
            release_began,
            contest,
            away_since,
            owed,
            sharing,
        } = self;
        let fresh = holder.is_none()
            && run_since.is_none()
            && last_hold.is_zero()
            && !handed
            && others.is_none()
            && quiet.is_zero()
            && *stand_back == STAND_BACK
            && release_mark.is_none()
            && release_began.is_none()
            && contest.is_none()
            && owed.is_zero()
            && *sharing == 1;
        fresh.then_some(*away_since)
    }

    /// `true` while an owner of this line holds the lock (the line lives on for its release).
    pub(crate) fn holds(&self) -> bool {
        self.holder.is_some()
    }

    /// How long a run hands over locally, with `budget` the policy's: the budget, or the other
    /// clients' last turn (at most [`TURN_MAX`]) when that was longer. A client whose waiters
    /// race as Redisson's do (every release a race, the releasing thread's next attempt first)
    /// keeps the lock for long turns; this client takes turns as long, no longer.
    fn turn(&self, budget: Duration) -> Duration {
        budget.max(self.owed.min(TURN_MAX))
    }

    /// A local owner is about to send a release that may free the lock (`waiters`: someone is
    /// in line). Marks where the release's own unlock message will be in the subscription's
    /// count; `true` when the policy wants a fresh answer to "does another client listen?",
    /// asked together with the release: the run has lasted its length and the last answer is
    /// older than one budget.
    pub(crate) fn releasing(&mut self, now: Instant, messages: Option<u64>, waiters: bool) -> bool {
        self.release_mark = messages;
        self.release_began = Some(now);
        self.last_hold = self.holder.map_or(Duration::ZERO, |(_, since)| {
            now.saturating_duration_since(since)
        });
        let LocalHandOff::Bounded(budget) = self.policy else {
            return false;
        };
        let budget = self.turn(budget);
        if !waiters || self.contest.is_some() {
            return false;
        }
        let spent = self
            .run_since
            .is_some_and(|since| now.saturating_duration_since(since) + self.last_hold >= budget);
        let fresh = self.others.is_some_and(|(_, until)| until > now);
        spent && !fresh
    }

    /// A local release ended; `freed`: the lock may be free now (released, not held, or an
    /// error); `others`: the answer to "how many other clients listen?" asked with it (1 when
    /// the server cannot tell); `head`: someone waits in line. Hands the lock to the head, or
    /// starts (or goes on with) a contest, as the policy says.
    pub(crate) fn released(
        &mut self,
        now: Instant,
        freed: bool,
        others: Option<u32>,
        head: bool,
    ) -> Released {
        if !freed {
            self.release_began = None;
            return Released::Kept;
        }
        // Whoever freed it, no owner of this line holds it now.
        self.holder = None;
        if let (Some(answer), LocalHandOff::Bounded(budget)) = (others, self.policy) {
            self.others = Some((answer, now.checked_add(budget).unwrap_or(now)));
        }
        let mark = self.release_mark.take();
        let began = self.release_began.take().unwrap_or(now);
        if !head {
            return Released::Idle;
        }
        let hand_over = match self.verdict(began) {
            Verdict::HandOver => true,
            Verdict::NewRun => {
                // Nobody else listens: a new run starts with the next acquisition, and
                // nothing is owed.
                self.run_since = None;
                self.owed = Duration::ZERO;
                self.sharing = 1;
                self.stand_back = STAND_BACK;
                true
            }
            Verdict::Contest => false,
        };
        self.handed = hand_over;
        if hand_over {
            return Released::HandedOver;
        }
        // How many others wait their turn: the answer asked with this release, else the last
        // one while it holds, else at least one.
        let listening = others
            .or(self
                .others
                .filter(|&(_, until)| until > began)
                .map(|(n, _)| n))
            .unwrap_or(1)
            .max(1);
        self.contest = Some(Box::new(match self.contest.take().map(|c| *c) {
            // Still the same contest (the head took the lock after standing back: nobody else
            // did): who was seen holding still had the lock.
            Some(c) => Contest {
                after: mark,
                began: now,
                waiting: now,
                seen: None,
                heard: None,
                taken: false,
                others: c.others.max(listening),
                ..c
            },
            None => Contest {
                after: mark,
                began: now,
                waiting: now,
                opened: now,
                wins: 0,
                seen: None,
                heard: None,
                taken: false,
                others: listening,
                held: Vec::new(),
                last: None,
                streak: now,
                mine: self
                    .run_since
                    .map_or(self.last_hold, |since| {
                        began.saturating_duration_since(since)
                    })
                    .max(self.last_hold),
            },
        }));
        Released::Contested
    }

    /// What the policy makes of a release that began at `began` and freed the lock while
    /// someone waits in line (pure: [`HandOff::released`] applies it).
    fn verdict(&self, began: Instant) -> Verdict {
        match self.policy {
            LocalHandOff::Unbounded => Verdict::HandOver,
            LocalHandOff::Off => Verdict::Contest,
            LocalHandOff::Bounded(budget) => {
                let turn = self.turn(budget);
                // Another hold as long as the last would still end within the turn.
                let last = self.last_hold;
                let within = |at: Instant| began.saturating_duration_since(at) + last < turn;
                if self.contest.is_some() {
                    Verdict::Contest
                } else if self.run_since.is_none_or(within) {
                    Verdict::HandOver
                } else if matches!(self.others, Some((0, until)) if until > began) {
                    Verdict::NewRun
                } else {
                    Verdict::Contest
                }
            }
        }
    }

    /// Whether the release under way, should it free the lock, hands it to the head (pure):
    /// the release may then tell the head before its reply is back (see
    /// `WaitLines::hand_over_early`).
    pub(crate) fn hands_over(&self, now: Instant) -> bool {
        let began = self.release_began.unwrap_or(now);
        !matches!(self.verdict(began), Verdict::Contest)
    }

    /// The line emptied: no release's message is awaited any more.
    pub(crate) fn line_emptied(&mut self) {
        self.release_mark = None;
    }

    /// What the head does next, `by_message` telling whether its last wake-up was an unlock
    /// message: while an owner of this line holds the lock the head waits for its hand-over,
    /// unless the message is news (it came later than [`ECHO_WINDOW`] after that owner's
    /// acquisition and outside its release: a remote forced unlock, say), when it attempts.
    pub(crate) fn next(&mut self, now: Instant, by_message: bool, messages: Option<u64>) -> Plan {
        match self.plan(now, messages) {
            Plan::Wait(_)
                if by_message && self.held_for(now).is_some_and(|held| held >= ECHO_WINDOW) =>
            {
                Plan::Attempt
            }
            plan => plan,
        }
    }

    /// What the head does next, messages aside (see [`next`](Self::next)).
    pub(crate) fn plan(&mut self, now: Instant, messages: Option<u64>) -> Plan {
        if let Some((until, _)) = self.holder {
            if until > now {
                return Plan::Wait(until - now);
            }
        }
        let policy_stands_back = matches!(self.policy, LocalHandOff::Bounded(_));
        let stand_back = self.stand_back;
        let Some(contest) = self.contest.as_mut() else {
            return Plan::Attempt;
        };
        // `CONTEST_WINS` is a tunable, 0 today: the comparison is kept for other values.
        #[allow(clippy::absurd_extreme_comparisons)]
        let won_enough = contest.wins >= CONTEST_WINS;
        if !(policy_stands_back && won_enough) {
            // A race, at once: the local release has ended, as a Java client's releasing
            // thread, whose next `lock()` follows its `unlock()`'s reply, races at once.
            return Plan::Attempt;
        }
        // Standing back: not before the release's own message (a waiter of another client
        // woken by it has sent its attempt by [`STAND_BACK`] after it).
        let waited = now.saturating_duration_since(contest.waiting);
        if let (Some(after), Some(count)) = (contest.after, messages) {
            if count <= after && waited < MESSAGE_WAIT {
                return Plan::Defer(MESSAGE_WAIT - waited);
            }
        }
        let until = *contest.seen.get_or_insert(now) + stand_back;
        // The message waited for is the release's own (the one after the mark); any later one
        // is another client's release: it took the lock while the head stood back.
        if let Some(count) = messages {
            let heard = *contest
                .heard
                .get_or_insert(contest.after.map_or(count, |after| after + 1));
            if count > heard {
                contest.taken = true;
                contest.heard = Some(count);
            }
        }
        if until > now {
            return Plan::Defer(until - now);
        }
        Plan::Attempt
    }

    /// Whether the head, when its attempt finds the lock busy, is to say who holds it (see
    /// [`busy`](Self::busy)): in a contest with more than one other client listening; while an
    /// owner of this line holds it (past its `until`: is that hold still on?); and before the
    /// other clients' turn is known to have begun (the holder may be an owner of this client
    /// that took the lock outside the line: its hold is no other client's turn).
    pub(crate) fn asks_holder(&self) -> bool {
        self.holder.is_some()
            || self.away_since.is_none()
            || self.contest.as_ref().is_some_and(|c| c.others > 1)
    }

    /// The head's attempt found the lock busy while no owner of this line holds it: another
    /// client's owner has it (`holder`: which client, when the head asked, see
    /// [`asks_holder`](Self::asks_holder); `messages`: the subscription's count then). No run
    /// goes on. A contest is over once every other client that listened has had the lock
    /// since it began, one of them has had it a second time (after another), [`TURN_MAX`] has
    /// passed, or the holder is unknown; until then the head stands back after each unlock
    /// message, as after its own release.
    pub(crate) fn busy(&mut self, now: Instant, holder: Option<u64>, messages: Option<u64>) {
        if self.holder.is_some() {
            // An owner of this line holds it past the `until` it was given (a watchdog hold
            // lasts as long as it is renewed): that hold is busy, not another client's turn,
            // unless another client is named holding (the line's hold ended unseen).
            if holder.is_none() {
                return;
            }
            self.holder = None;
        }
        if self.holder.is_some() {
            // An owner of this line holds it past the `until` it was given (a watchdog hold
            // lasts as long as it is renewed): that hold is busy, not another client's turn,
            // unless another client is named holding (the line's hold ended unseen).
            if holder.is_none() {
                return;
            }
            self.holder = None;
        }
        // The other clients' turn began when this client gave the lock up: the release that
        // started the contest, not the head's attempt after its stand-back (which would leave
        // the stand-back out of their turn, and this client's next run one hold short).
        let since = self.contest.as_ref().map_or(now, |c| c.began.min(now));
        self.away_since.get_or_insert(since);
        self.handed = false;
        self.run_since = None;
        self.quiet = Duration::ZERO;
        let Some(mut contest) = self.contest.take() else {
            return;
        };
        if let Some(holder) = holder {
            let again =
                contest.last.is_some_and(|last| last != holder) && contest.held.contains(&holder);
            if !contest.held.contains(&holder) {
                contest.held.push(holder);
            }
            if contest.last.is_some_and(|last| last != holder) {
                contest.streak = now;
            }
            let everyone = contest.everyone_held();
            let its_turn = now.saturating_duration_since(contest.streak) >= 2 * contest.mine;
            let long = now.saturating_duration_since(contest.opened) >= TURN_MAX;
            if !(everyone || again || its_turn || long) {
                // Others still wait their turn: stand back again after the next message.
                contest.last = Some(holder);
                contest.after = messages;
                contest.waiting = now;
                contest.seen = None;
                contest.heard = None;
                contest.taken = false;
                self.contest = Some(contest);
                return;
            }
        }
        self.sharing = contest.sharing();
    }

    /// The head's attempt after a stand-back won, but another client took the lock and gave it
    /// up meanwhile (its unlock message came after the release's own): somebody did come. With
    /// one other client listening, its turn is over and the contest ends as when the head
    /// finds the lock busy. Among several, who held is unknown (it may be the one seen already,
    /// taking the lock again): the contest goes on until each is seen holding (or
    /// [`TURN_MAX`]), the head standing back as long again after this client's next release.
    fn taken_meanwhile(&mut self, now: Instant) {
        let Some(contest) = self.contest.as_mut() else {
            return;
        };
        self.away_since.get_or_insert(contest.began.min(now));
        self.quiet = Duration::ZERO;
        let everyone = contest.others <= 1 || contest.everyone_held();
        let long = now.saturating_duration_since(contest.opened) >= TURN_MAX;
        if everyone || long {
            self.sharing = contest.sharing();
            self.contest = None;
        } else {
            contest.seen = None;
            contest.heard = None;
            contest.taken = false;
        }
    }

    /// The head acquired the lock, its hold lasting at least until `until`. A hand-over goes on
    /// with the run; an acquisition of the head's own starts a run, or counts as a race won in
    /// a contest.
    pub(crate) fn acquired(&mut self, now: Instant, until: Instant) {
        self.holder = Some((until, now));
        let taken = self
            .contest
            .as_ref()
            .is_some_and(|c| c.seen.is_some() && c.taken);
        if taken && !self.handed {
            self.taken_meanwhile(now);
        }
        if let Some(since) = self.away_since.take() {
            // Shared among the other clients that took their turns meanwhile: each of them
            // is owed about one turn of this client.
            self.owed = now.saturating_duration_since(since) / self.sharing.max(1);
        }
        if std::mem::take(&mut self.handed) {
            self.run_since.get_or_insert(now);
        } else if let Some(contest) = &mut self.contest {
            if contest.seen.is_none() {
                // A race won (or, after `taken_meanwhile`, the contest goes on).
                if !taken {
                    contest.wins += 1;
                }
            } else if self.stand_back < STAND_BACK_MAX {
                // The head stood back and nobody took the lock: perhaps the other client's
                // waiter is slower than that. Still a contest, standing back twice as long.
                self.stand_back = (self.stand_back * 2).min(STAND_BACK_MAX);
                contest.seen = None;
            } else {
                // Nobody took the lock even after the longest stand-back: whoever listens does
                // not wait for it. Alone for a while, then ask again.
                self.stand_back = STAND_BACK;
                let quiet = self.quiet.max(QUIET_START);
                self.quiet = (quiet * 2).min(QUIET_MAX);
                self.others = Some((0, now + quiet));
                self.owed = Duration::ZERO;
                self.sharing = 1;
                self.contest = None;
                self.run_since = Some(now);
            }
        } else {
            self.run_since = Some(now);
        }
    }

    /// How long the owner of this line that holds the lock has held it at `now` (`None`: none
    /// does, or its release is under way: a message now is its own, no news, and the release's
    /// end wakes the head).
    fn held_for(&self, now: Instant) -> Option<Duration> {
        let (_, since) = self.holder?;
        if self.release_began.is_some() {
            return None;
        }
        Some(now.saturating_duration_since(since))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A line with an owner always queued behind the head, driven on a clock of its own.
    struct Line {
        h: HandOff,
        now: Instant,
    }

    /// One round: the head acquires, holds `hold`, releases (`others`: the answer to the
    /// question, if asked), and the next owner becomes head.
    struct Round {
        plan: Plan,
        handed: bool,
        asked: bool,
    }

    impl Line {
        fn new(policy: LocalHandOff) -> Self {
            Self {
                h: HandOff::new(policy),
                now: Instant::now(),
            }
        }

        fn pass(&mut self, d: Duration) {
            self.now += d;
        }

        fn plan(&mut self) -> Plan {
            self.h.plan(self.now, None)
        }

        fn busy(&mut self) {
            self.h.busy(self.now, None, None);
        }

        fn round(&mut self, hold: Duration, others: Option<u32>) -> Round {
            assert_ne!(self.plan(), Plan::Wait(30_000 * MS), "nobody local holds");
            self.h.acquired(self.now, self.now + 30_000 * MS);
            self.pass(hold);
            let asked = self.h.releasing(self.now, None, true);
            // What a release may tell the head before its reply (no question asked with it)
            // is what its end decides.
            let early = (!asked && others.is_none()).then(|| self.h.hands_over(self.now));
            let released = self.h.released(self.now, true, others, true);
            let handed = released == Released::HandedOver;
            assert_eq!(self.h.handed, handed);
            if let Some(early) = early {
                assert_eq!(early, handed, "hands_over agrees with released");
            }
            Round {
                plan: self.plan(),
                handed,
                asked,
            }
        }

        /// Rounds of `hold` until a release asks who else listens (answered `others`): the
        /// hand-overs before it, and that round.
        fn hand_overs_until_asked(
            &mut self,
            hold: Duration,
            others: Option<u32>,
        ) -> (usize, Round) {
            let mut handed = 0;
            loop {
                let r = self.round(hold, others);
                if r.asked {
                    return (handed, r);
                }
                assert!(r.handed, "no question, a hand-over");
                handed += 1;
            }
        }

        fn wins(&self) -> Option<u32> {
            self.h.contest.as_ref().map(|c| c.wins)
        }
    }

    #[test]
    fn a_local_holder_makes_the_head_wait_until_its_release_or_its_lease_ends() {
        let mut l = Line::new(LocalHandOff::default());
        assert_eq!(l.plan(), Plan::Attempt);
        l.h.acquired(l.now, l.now + 1_000 * MS);
        assert_eq!(l.plan(), Plan::Wait(1_000 * MS));
        assert!(l.h.holds());
        l.pass(5 * MS);
        assert_eq!(l.h.released(l.now, false, None, true), Released::Kept);
        assert_eq!(l.plan(), Plan::Wait(995 * MS), "a partial release keeps it");
        assert_eq!(l.h.released(l.now, true, None, true), Released::HandedOver);
        assert_eq!(l.plan(), Plan::Attempt);
        assert!(!l.h.holds());
        // A hold past its lease no longer holds the head back.
        l.h.acquired(l.now, l.now + 100 * MS);
        l.pass(100 * MS);
        assert_eq!(l.plan(), Plan::Attempt);
        // Nobody in line: the line may end.
        assert_eq!(l.h.released(l.now, true, None, false), Released::Idle);
    }

    #[test]
    fn an_unlock_message_is_news_only_after_the_echo_window_and_outside_the_release() {
        let mut l = Line::new(LocalHandOff::default());
        l.h.acquired(l.now, l.now + 10_000 * MS);
        // Without a message, and with one within the echo window: wait for the hand-over.
        assert_eq!(l.h.next(l.now, false, None), Plan::Wait(10_000 * MS));
        l.pass(ECHO_WINDOW - MS);
        assert!(
            matches!(l.h.next(l.now, true, None), Plan::Wait(_)),
            "an echo"
        );
        l.pass(MS);
        assert!(
            matches!(l.h.next(l.now, false, None), Plan::Wait(_)),
            "no message, no news"
        );
        assert_eq!(
            l.h.next(l.now, true, None),
            Plan::Attempt,
            "a later message is news"
        );
        // While the local holder's own release is under way, its message is no news.
        let _ = l.h.releasing(l.now, None, true);
        assert!(
            matches!(l.h.next(l.now, true, None), Plan::Wait(_)),
            "the release's own message"
        );
    }

    #[test]
    fn a_run_hands_over_within_its_budget_and_asks_once_it_is_spent() {
        let mut l = Line::new(LocalHandOff::Bounded(10 * MS));
        // 1 ms holds: hand-overs, no question, while the run lasts less than 10 ms.
        let mut asked_at = None;
        for i in 0..30 {
            let r = l.round(MS, None);
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
            Some(8),
            "asked once another 1 ms hold would end past the 10 ms run (at 9 ms), not before"
        );
        // A race won (the head's own attempt), then the answer "nobody else": a new run of
        // hand-overs, and no question for another budget.
        l.busy();
        let r = l.round(20 * MS, Some(0));
        assert!(r.asked && r.handed);
        assert!(l.wins().is_none());
        let r = l.round(MS, None);
        assert!(!r.asked, "the answer is fresh for one budget");
        assert!(r.handed);
    }

    #[test]
    fn while_another_client_listens_a_spent_run_turns_into_a_contest_that_stands_back() {
        let mut l = Line::new(LocalHandOff::Bounded(10 * MS));
        // A 100 ms hold spends the run at once; someone else listens.
        let r = l.round(100 * MS, Some(1));
        assert!(r.asked);
        assert!(
            !r.handed,
            "no hand-over while another client waits past the budget"
        );
        assert_eq!(l.wins(), Some(0));
        // The head stands back at once (CONTEST_WINS races may be won first: none).
        assert_eq!(CONTEST_WINS, 0);
        assert_eq!(r.plan, Plan::Defer(STAND_BACK));
        l.pass(STAND_BACK);
        assert_eq!(l.plan(), Plan::Attempt);
        // Its attempt finds the lock busy: another client has it; the contest is over and the
        // next acquisition of the head's own starts a new run.
        l.busy();
        assert!(l.wins().is_none());
        let r = l.round(MS, None);
        assert!(r.handed, "a new run hands over within its budget");
    }

    #[test]
    fn a_head_standing_back_waits_for_the_releases_own_message_first() {
        let mut l = Line::new(LocalHandOff::Bounded(10 * MS));
        // A spent run's release, with 7 messages seen when it began, while someone else
        // listens: until the 8th comes (at most MESSAGE_WAIT) the head defers; STAND_BACK
        // counts from when it saw it.
        l.h.acquired(l.now, l.now + 30_000 * MS);
        l.pass(100 * MS);
        assert!(l.h.releasing(l.now, Some(7), true), "a spent run asks");
        assert_eq!(
            l.h.released(l.now, true, Some(1), true),
            Released::Contested
        );
        assert_eq!(l.wins(), Some(CONTEST_WINS));
        assert_eq!(l.h.plan(l.now, Some(7)), Plan::Defer(MESSAGE_WAIT));
        l.pass(30 * MS);
        assert_eq!(
            l.h.plan(l.now, Some(7)),
            Plan::Defer(MESSAGE_WAIT - 30 * MS)
        );
        assert_eq!(l.h.plan(l.now, Some(8)), Plan::Defer(STAND_BACK));
        l.pass(STAND_BACK);
        assert_eq!(l.h.plan(l.now, Some(8)), Plan::Attempt);
    }

    /// The head of a spent run's contest (`others` other clients listening), standing back
    /// after its release's own message (the 8th): `Line` at the end of the stand-back.
    fn standing_back_among(others: u32) -> Line {
        let mut l = Line::new(LocalHandOff::Bounded(10 * MS));
        l.h.acquired(l.now, l.now + 30_000 * MS);
        l.pass(100 * MS);
        assert!(l.h.releasing(l.now, Some(7), true), "a spent run asks");
        assert_eq!(
            l.h.released(l.now, true, Some(others), true),
            Released::Contested
        );
        l.pass(MS);
        assert_eq!(l.h.plan(l.now, Some(8)), Plan::Defer(STAND_BACK));
        l
    }

    #[test]
    fn another_clients_release_while_the_head_stands_back_ends_the_contest() {
        // The other client's waiter took the lock at the release's message and gave it up
        // within the stand-back (a 2 ms hold): its unlock message is the 9th.
        let mut l = standing_back_among(1);
        l.pass(5 * MS);
        assert_eq!(
            l.h.plan(l.now, Some(9)),
            Plan::Defer(STAND_BACK - 5 * MS),
            "the stand-back is not cut short: a Java client's releasing thread locks again"
        );
        l.pass(STAND_BACK - 5 * MS);
        assert_eq!(l.h.plan(l.now, Some(9)), Plan::Attempt);
        // The head's attempt wins: somebody did take the lock meanwhile, so the contest is
        // over, the stand-back stays as it was and the client is not taken for alone.
        l.h.acquired(l.now, l.now + 30_000 * MS);
        assert!(l.wins().is_none(), "the other client had its turn");
        assert_eq!(l.h.stand_back, STAND_BACK, "not doubled");
        assert_eq!(l.h.quiet, Duration::ZERO);
        assert!(l.h.others.is_none_or(|(n, _)| n > 0), "not alone");
        // Their turn counted from this client's release: the next run is about as long.
        assert_eq!(l.h.owed, STAND_BACK + MS);
        // The same stand-back without the 9th message: nobody came, twice as long next time.
        let mut l = standing_back_among(1);
        l.pass(STAND_BACK);
        assert_eq!(l.h.plan(l.now, Some(8)), Plan::Attempt);
        l.h.acquired(l.now, l.now + 30_000 * MS);
        assert!(l.wins().is_some(), "nobody took it: still a contest");
        assert_eq!(l.h.stand_back, 2 * STAND_BACK);
    }

    #[test]
    fn a_waiter_that_takes_each_stand_backs_lock_keeps_the_client_from_taking_itself_for_alone() {
        // The handoff test's shape: a remote waiter that takes one short hold per contest,
        // within the head's stand-back, rounds after rounds. Its turns are seen by their
        // messages, so the stand-back never grows and the client never takes itself for
        // alone (which made its runs double: 0.1, 0.2, 0.4, 0.8 s).
        let mut l = Line::new(LocalHandOff::Bounded(10 * MS));
        let mut messages = 0;
        for round in 0..12 {
            let mut handed = 0;
            loop {
                l.h.acquired(l.now, l.now + 30_000 * MS);
                l.pass(2 * MS);
                let asks = l.h.releasing(l.now, Some(messages), true);
                let others = asks.then_some(1);
                messages += 1;
                match l.h.released(l.now, true, others, true) {
                    Released::HandedOver => handed += 1,
                    Released::Contested => break,
                    other => panic!("round {round}: {other:?}"),
                }
            }
            assert!(
                handed <= 40,
                "round {round}: a run of {handed} hand-overs (about {STAND_BACK:?} of 2 ms holds)"
            );
            // The release's own message, then the remote hold and its release.
            l.pass(MS);
            assert_eq!(l.h.plan(l.now, Some(messages)), Plan::Defer(STAND_BACK));
            l.pass(3 * MS);
            messages += 1;
            assert!(matches!(l.h.plan(l.now, Some(messages)), Plan::Defer(_)));
            l.pass(STAND_BACK);
            assert_eq!(l.h.plan(l.now, Some(messages)), Plan::Attempt);
            l.h.acquired(l.now, l.now + 30_000 * MS);
            assert!(l.wins().is_none(), "round {round}");
            assert_eq!(l.h.stand_back, STAND_BACK, "round {round}");
            assert_eq!(l.h.quiet, Duration::ZERO, "round {round}");
            l.pass(2 * MS);
            l.h.releasing(l.now, Some(messages), true);
            messages += 1;
            assert_eq!(
                l.h.released(l.now, true, None, true),
                Released::HandedOver,
                "round {round}"
            );
        }
    }

    #[test]
    fn among_several_others_a_turn_known_by_its_message_alone_ends_nothing() {
        // Two others listen; one takes the lock within the stand-back and gives it up: who it
        // was is unknown (perhaps the one seen next, taking it again). The contest goes on,
        // the head standing back as long again after its next release (somebody came), and
        // ends once both are seen holding.
        let mut l = standing_back_among(2);
        assert_eq!(l.h.plan(l.now, Some(9)), Plan::Defer(STAND_BACK));
        l.pass(STAND_BACK);
        assert_eq!(l.h.plan(l.now, Some(9)), Plan::Attempt);
        l.h.acquired(l.now, l.now + 30_000 * MS);
        assert_eq!(l.wins(), Some(0), "still a contest, no race won");
        assert_eq!(l.h.stand_back, STAND_BACK, "somebody came: not doubled");
        assert_eq!(l.h.quiet, Duration::ZERO);
        l.pass(2 * MS);
        assert!(!l.h.releasing(l.now, Some(9), true));
        assert_eq!(l.h.released(l.now, true, None, true), Released::Contested);
        l.pass(MS);
        assert_eq!(l.h.plan(l.now, Some(10)), Plan::Defer(STAND_BACK));
        l.pass(STAND_BACK);
        assert_eq!(l.h.plan(l.now, Some(10)), Plan::Attempt);
        l.h.busy(l.now, Some(7), Some(10));
        assert!(l.wins().is_some(), "one of two seen holding");
        l.pass(STAND_BACK);
        l.h.busy(l.now, Some(9), Some(11));
        assert!(l.wins().is_none(), "both others seen holding");
    }

    /// A contest that goes on (the head took the lock after standing back, nobody else did)
    /// starts afresh from its latest release: that release's message mark and time, no
    /// message seen yet; it keeps the most other clients it heard of, and the other clients'
    /// turn counts from that release.
    #[test]
    fn a_contest_that_goes_on_counts_from_its_latest_release() {
        let mut h = HandOff::new(LocalHandOff::Bounded(10 * MS));
        let mut now = Instant::now();
        h.acquired(now, now + 30_000 * MS);
        now += 100 * MS;
        assert!(h.releasing(now, Some(7), true), "a spent run asks");
        assert_eq!(h.released(now, true, Some(3), true), Released::Contested);
        assert!(h.asks_holder(), "three others listen");
        assert_eq!(h.plan(now, Some(8)), Plan::Defer(STAND_BACK));
        now += STAND_BACK;
        assert_eq!(h.plan(now, Some(8)), Plan::Attempt);
        // Nobody took it: the head has it, still contesting, and stands back twice as long.
        h.acquired(now, now + 30_000 * MS);
        now += 40 * MS;
        assert!(!h.releasing(now, Some(9), true), "a contest asks nothing");
        assert_eq!(h.released(now, true, Some(5), true), Released::Contested);
        let release = now;
        assert_eq!(
            h.plan(now, Some(9)),
            Plan::Defer(MESSAGE_WAIT),
            "waits for this release's own message, from now"
        );
        now += 20 * MS;
        assert_eq!(
            h.plan(now, Some(10)),
            Plan::Defer(2 * STAND_BACK),
            "stands back from the message it just saw"
        );
        // Another client's owner has it: their turn began with this release; five others.
        now += 2 * STAND_BACK;
        h.busy(now, None, Some(10));
        assert_eq!(h.away_since, Some(release));
        assert_eq!(h.sharing, 5, "the most others heard of");
    }

    #[test]
    fn when_nobody_takes_the_lock_from_a_head_standing_back_the_client_is_alone_a_while() {
        let mut l = Line::new(LocalHandOff::Bounded(10 * MS));
        let mut r = l.round(100 * MS, Some(1));
        // Each stand-back that finds no taker (the head's attempt after it wins) is followed
        // by one twice as long, still in the contest (no hand-over), up to STAND_BACK_MAX.
        let mut stand_back = STAND_BACK;
        while stand_back < STAND_BACK_MAX {
            assert_eq!(r.plan, Plan::Defer(stand_back));
            l.pass(stand_back);
            assert_eq!(l.plan(), Plan::Attempt);
            r = l.round(60 * MS, None);
            assert!(
                !r.handed,
                "still a contest after a {stand_back:?} stand-back"
            );
            stand_back = (stand_back * 2).min(STAND_BACK_MAX);
        }
        assert_eq!(r.plan, Plan::Defer(STAND_BACK_MAX));
        l.pass(STAND_BACK_MAX);
        assert_eq!(l.plan(), Plan::Attempt);
        // Even the longest found no taker: the listener was no waiter. Hand-overs without a
        // question for QUIET_START, then the question again.
        let r = l.round(60 * MS, None);
        assert!(l.wins().is_none());
        assert!(!r.asked && r.handed, "alone for a while");
        let r = l.round(60 * MS, None);
        assert!(r.asked, "asked again after {QUIET_START:?}");
        // The next stand-back without a taker keeps the client alone twice as long.
        assert_eq!(l.h.quiet, 2 * QUIET_START);
    }

    #[test]
    fn a_remote_waiter_slower_than_the_stand_back_gets_a_longer_one_which_is_kept() {
        let mut l = Line::new(LocalHandOff::Bounded(10 * MS));
        let r = l.round(100 * MS, Some(1));
        assert_eq!(r.plan, Plan::Defer(STAND_BACK));
        l.pass(STAND_BACK);
        // Nobody took it within 50 ms: the next stand-back is 100 ms ...
        let r = l.round(100 * MS, None);
        assert_eq!(r.plan, Plan::Defer(2 * STAND_BACK));
        l.pass(80 * MS);
        // ... within which the other client's owner takes the lock.
        l.busy();
        assert!(l.wins().is_none(), "the contest is over");
        // This client's next turn ends in a contest standing back as long again.
        l.pass(100 * MS);
        let (_, r) = l.hand_overs_until_asked(100 * MS, Some(1));
        assert_eq!(
            r.plan,
            Plan::Defer(2 * STAND_BACK),
            "the longer stand-back is kept"
        );
        // Once nobody else listens it is back to STAND_BACK.
        l.pass(2 * STAND_BACK);
        l.busy();
        l.pass(100 * MS);
        let (_, r) = l.hand_overs_until_asked(100 * MS, Some(0));
        assert!(r.handed);
        assert_eq!(l.h.stand_back, STAND_BACK);
    }

    #[test]
    fn after_another_clients_long_turn_the_run_lasts_as_long_and_no_longer() {
        let mut l = Line::new(LocalHandOff::Bounded(10 * MS));
        // A spent run while someone else listens: a contest; the head's race finds the lock
        // busy (another client's owner has it) and it keeps it 500 ms.
        let r = l.round(100 * MS, Some(1));
        assert_eq!(r.plan, Plan::Defer(STAND_BACK));
        l.pass(STAND_BACK);
        l.busy();
        l.pass(500 * MS);
        // This client's turn then hands over for as long (holds starting before 500 ms), and
        // asks at the first release past it.
        let (handed, r) = l.hand_overs_until_asked(100 * MS, Some(1));
        assert_eq!(
            handed, 4,
            "their turn counts from this client's release (50 ms stand-back + 500 ms): \
             releases at 100..400 ms hand over (a next hold ends by 550 ms), the one at 500 \
             ms asks"
        );
        assert!(!r.handed, "someone else listens: a contest");
        // The head stands back at once (no race is won first).
        assert_eq!(r.plan, Plan::Defer(STAND_BACK));
        // A turn of 5 s elsewhere lengthens this client's run to TURN_MAX, no more.
        l.pass(STAND_BACK);
        l.busy();
        l.pass(5_000 * MS);
        let (handed, r) = l.hand_overs_until_asked(100 * MS, Some(0));
        assert_eq!(handed, 18, "holds ending within {TURN_MAX:?}");
        // Nobody else listens any more: nothing is owed, runs are the budget's again.
        assert!(r.handed);
        let (handed, _) = l.hand_overs_until_asked(2 * MS, None);
        assert!(
            (3..=8).contains(&handed),
            "{handed}: back to a run of about the 10 ms budget (not {TURN_MAX:?}) once the \
             answer went stale"
        );
    }

    /// A spent run's release while `others` other clients listen: a contest; the head's
    /// stand-back attempt after its message finds the lock busy.
    fn contest_among(l: &mut Line, others: u32) {
        let r = l.round(100 * MS, Some(others));
        assert!(r.asked && !r.handed);
        assert_eq!(l.h.asks_holder(), others > 1);
        l.pass(STAND_BACK);
        assert_eq!(l.plan(), Plan::Attempt);
    }

    #[test]
    fn among_several_others_the_contest_lasts_until_each_has_had_the_lock() {
        let mut l = Line::new(LocalHandOff::Bounded(10 * MS));
        contest_among(&mut l, 2);
        // Client 7 holds: one of two seen; the head stands back again after the next message.
        l.h.busy(l.now, Some(7), Some(3));
        assert!(
            l.wins().is_some(),
            "one other client of two has had the lock"
        );
        assert_eq!(l.h.plan(l.now, Some(3)), Plan::Defer(MESSAGE_WAIT));
        l.pass(10 * MS);
        assert_eq!(l.h.plan(l.now, Some(4)), Plan::Defer(STAND_BACK));
        l.pass(STAND_BACK);
        assert_eq!(l.h.plan(l.now, Some(4)), Plan::Attempt);
        // Still client 7 (the same turn): the contest goes on.
        l.h.busy(l.now, Some(7), Some(4));
        assert!(l.wins().is_some());
        // Client 9: both have had the lock since this client's turn: the head races again,
        // and the time away is shared between the two.
        l.pass(STAND_BACK);
        l.h.busy(l.now, Some(9), Some(5));
        assert!(l.wins().is_none(), "every other client has had the lock");
        assert_eq!(l.plan(), Plan::Attempt);
        l.pass(40 * MS);
        l.h.acquired(l.now, l.now + 30_000 * MS);
        assert_eq!(l.h.owed, (STAND_BACK * 3 + 10 * MS + 40 * MS) / 2);
    }

    #[test]
    fn a_contest_among_several_ends_when_one_of_them_has_the_lock_a_second_time() {
        let mut l = Line::new(LocalHandOff::Bounded(10 * MS));
        contest_among(&mut l, 3);
        l.h.busy(l.now, Some(7), Some(1));
        l.pass(STAND_BACK);
        l.h.busy(l.now, Some(9), Some(2));
        assert!(l.wins().is_some(), "two of three");
        l.pass(STAND_BACK);
        l.h.busy(l.now, Some(7), Some(3));
        assert!(
            l.wins().is_none(),
            "client 7 had it again: the third listener does not wait for it"
        );
    }

    #[test]
    fn a_contest_among_several_ends_once_one_holder_has_had_twice_this_clients_turn() {
        let mut l = Line::new(LocalHandOff::Bounded(10 * MS));
        // This client's turn: one 100 ms hold.
        contest_among(&mut l, 2);
        let began = l.now - STAND_BACK;
        while l.now - began < 200 * MS {
            l.h.busy(l.now, Some(7), None);
            assert!(
                l.wins().is_some(),
                "client 7's turn has lasted less than 200 ms"
            );
            l.pass(STAND_BACK);
        }
        l.h.busy(l.now, Some(7), None);
        assert!(
            l.wins().is_none(),
            "200 ms of client 7: the other listener is standing back too, or not waiting"
        );
    }

    #[test]
    fn a_contest_among_several_ends_without_a_holder_or_after_the_longest_turn() {
        let mut l = Line::new(LocalHandOff::Bounded(10 * MS));
        contest_among(&mut l, 2);
        l.h.busy(l.now, None, None);
        assert!(
            l.wins().is_none(),
            "who holds is unknown: as with one other"
        );
        // A contest among 200 others, a new holder each time: over after TURN_MAX.
        let mut l = Line::new(LocalHandOff::Bounded(10 * MS));
        contest_among(&mut l, 200);
        let opened = l.now - STAND_BACK;
        let mut client = 0;
        while l.wins().is_some() {
            client += 1;
            l.pass(STAND_BACK);
            l.h.busy(l.now, Some(client), None);
        }
        assert!(l.now - opened >= TURN_MAX, "{client} holders seen");
        assert!(client < 200);
    }

    #[test]
    fn without_an_answer_a_spent_run_contests_rather_than_risk_starving_others() {
        let mut l = Line::new(LocalHandOff::Bounded(10 * MS));
        let r = l.round(20 * MS, None);
        assert!(r.asked && !r.handed);
        assert!(l.wins().is_some());
    }

    #[test]
    fn unbounded_always_hands_over_and_off_never_does() {
        let mut l = Line::new(LocalHandOff::Unbounded);
        for i in 0..5 {
            let r = l.round(100 * MS, None);
            assert!(!r.asked, "round {i}: nobody is asked");
            assert!(r.handed);
        }
        let mut l = Line::new(LocalHandOff::Off);
        for i in 0..5 {
            let r = l.round(MS, None);
            assert!(!r.asked, "round {i}: nobody is asked");
            assert!(!r.handed, "round {i}");
            assert_eq!(r.plan, Plan::Attempt, "round {i}: Off never stands back");
        }
    }

    /// The whole state and the line's state, driven alike, answer alike and end alike.
    fn same(line: &LineHandOff, whole: &HandOff) -> bool {
        line.view(|h| format!("{h:?}")) == format!("{whole:?}")
    }

    #[test]
    fn a_line_state_stays_small_while_other_clients_hold_and_acts_as_the_whole_state() {
        for policy in [
            LocalHandOff::Bounded(10 * MS),
            LocalHandOff::Off,
            LocalHandOff::Unbounded,
        ] {
            let (mut whole, mut line) = (HandOff::new(policy), LineHandOff::new(policy));
            let mut now = Instant::now();
            // The head of a lock another client holds: attempts, finds it busy, sleeps.
            for i in 0..3u64 {
                let plan = whole.next(now, i > 0, Some(i));
                assert_eq!(line.next(now, i > 0, Some(i)), plan, "{policy:?}");
                assert_eq!(plan, Plan::Attempt);
                assert_eq!(line.asks_holder(), whole.asks_holder());
                whole.busy(now, Some(7), Some(i));
                line.busy(now, Some(7), Some(i));
                now += 5 * MS;
            }
            assert!(
                matches!(
                    line,
                    LineHandOff::Fresh {
                        away_since: Some(_),
                        ..
                    }
                ),
                "{policy:?}: only when the other clients' turn began is kept: {line:?}"
            );
            assert!(same(&line, &whole));
            // It acquires: a holder, a run: the whole state from then on.
            whole.acquired(now, now + 30_000 * MS);
            line.acquired(now, now + 30_000 * MS);
            assert!(matches!(line, LineHandOff::Whole(_)), "{policy:?}");
            assert!(line.holds() && whole.holds());
            now += 20 * MS;
            // A release begins, the line empties meanwhile (its mark is dropped), a waiter comes.
            let asks = whole.releasing(now, Some(3), true);
            assert_eq!(line.releasing(now, Some(3), true), asks);
            whole.line_emptied();
            line.line_emptied();
            assert!(same(&line, &whole), "{policy:?}");
            assert_eq!(line.hands_over(now), whole.hands_over(now));
            // Two other clients listen: a contest among several, where the head asks who holds.
            let released = whole.released(now, true, Some(2), true);
            assert_eq!(line.released(now, true, Some(2), true), released);
            let mut asked = false;
            for i in 0..4u64 {
                now += 30 * MS;
                let plan = whole.next(now, true, Some(4 + i));
                assert_eq!(line.next(now, true, Some(4 + i)), plan, "{policy:?} {i}");
                asked |= whole.asks_holder();
                assert_eq!(line.asks_holder(), whole.asks_holder(), "{policy:?} {i}");
                whole.busy(now, Some(9), Some(4 + i));
                line.busy(now, Some(9), Some(4 + i));
            }
            // Every policy asks at the first busy attempt after its turn (is the holder one
            // of this client's own owners?), a contest among several at every one.
            assert!(asked, "{policy:?}: the head asks who holds");
            assert!(same(&line, &whole), "{policy:?}");
        }
    }

    /// The head's attempt finds the lock busy while an owner of its line holds it past the
    /// `until` it was given: that hold, not another client's turn (nothing changes), unless
    /// another client is named holding (the line's hold ended unseen). Before the other
    /// clients' turn is known to have begun, the head asks who holds.
    #[test]
    fn a_busy_attempt_while_an_owner_of_the_line_holds_is_no_other_clients_turn() {
        let mut h = HandOff::new(LocalHandOff::Bounded(10 * MS));
        assert!(
            h.asks_holder(),
            "is the holder one of this client's owners?"
        );
        let t0 = Instant::now();
        h.acquired(t0, t0 + 500 * MS);
        let now = t0 + 1_500 * MS;
        assert_eq!(h.plan(now, Some(0)), Plan::Attempt, "past its until");
        assert!(h.asks_holder());
        h.busy(now, None, Some(0));
        assert!(h.holds(), "still this line's hold");
        assert_eq!(h.away_since, None, "no other client's turn began");
        assert!(h.run_since.is_some(), "the run goes on");
        h.busy(now, Some(9), Some(0));
        assert!(!h.holds(), "another client holds: the line's hold ended");
        assert_eq!(h.away_since, Some(now));
        assert!(!h.asks_holder(), "their turn is known to have begun");
    }

    #[test]
    fn a_fresh_line_state_stays_fresh_through_a_partial_release_not_through_a_release_under_way() {
        let policy = LocalHandOff::Bounded(10 * MS);
        let mut line = LineHandOff::new(policy);
        let now = Instant::now();
        assert_eq!(line.released(now, false, None, true), Released::Kept);
        line.line_emptied();
        assert!(!line.holds());
        assert!(matches!(
            line,
            LineHandOff::Fresh {
                away_since: None,
                ..
            }
        ));
        assert!(same(&line, &HandOff::new(policy)));
        // A local owner that took the lock without the line (its own first attempt) releases
        // it while a waiter is queued: no holder, but a release under way is more than fresh.
        let mut whole = HandOff::new(policy);
        let asks = whole.releasing(now, Some(5), true);
        assert_eq!(line.releasing(now, Some(5), true), asks);
        assert!(matches!(line, LineHandOff::Whole(_)), "{line:?}");
        assert!(same(&line, &whole));
        let released = whole.released(now + MS, true, None, true);
        assert_eq!(line.released(now + MS, true, None, true), released);
        assert!(same(&line, &whole));
    }
}
