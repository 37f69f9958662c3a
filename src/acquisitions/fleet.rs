//! A deterministic simulation of a fleet of processes on one hot lock (tests only): crate
//! processes whose local wait line runs the real hand-off policy ([`HandOff`]), beside Java
//! processes that behave as Redisson's `RLock.lock()` does, every owner looping lock → hold →
//! unlock with no pause. It finds in seconds what a rule does to each process's share of the
//! holds, before the slow runs beside real Java (`compat-tests`).
//!
//! The model, in virtual microseconds (events in time order, ties in the order they were made;
//! every random draw comes from one seeded generator, so a run is a function of its
//! [`Fleet`]):
//! * **The server** runs each command when it arrives: an acquisition takes the lock if it is
//!   free, else answers busy with the lock's TTL; a release frees it and publishes the unlock
//!   message to every process subscribed then; `NUMSUB` counts the subscribed processes; a
//!   holder query (`HKEYS`) names the holding process.
//! * **A crate process** does what `line.rs`, `engine/sleep.rs` (`wait_in_line`) and
//!   `lock/claim/calls.rs` (`release`) do, in the same order: an owner attempts first unless
//!   the line has waiters, else joins the line; the head subscribes (one subscription per line,
//!   dropped when the line has no waiter), asks the policy ([`HandOff::next`]) and attempts,
//!   waits or defers; a release asks the policy (`releasing`), sends `NUMSUB` with it when
//!   told to, tells the head early when the policy hands over (its attempt then reaches the
//!   server right behind the release), else decides on the reply (`released`). A message
//!   wakes the head after the process's reaction delay; the wake-up permits are capped at one
//!   (one subscription per line), the line's notification keeps one permit as tokio's
//!   `Notify` does.
//! * **A Java process** (Redisson 3.x and 4.x `lock()`): a thread's first attempt follows its
//!   release's reply after the JVM's re-lock delay; a busy one subscribes (the JVM's entry for
//!   the channel is shared by its waiting threads; the last thread out unsubscribes, and the
//!   entry's permits go with it), attempts again, then waits on the entry's semaphore: a
//!   message releases one permit (not capped), which wakes the longest-blocked thread after
//!   the JVM's wake delay, or waits for the next thread that looks.
//! * **Delays** (measured with `MONITOR` on this machine beside real Redisson 3.52 and 4.7,
//!   from a release on the server to a waiter's attempt on the server): a crate head 0.5 ms
//!   (p10) to 1.5 ms (p50); a JVM's waiting thread 3 to 6 ms (p10 to p50, p90 8-17 ms); a
//!   JVM's releasing thread 2 to 5 ms. A fleet draws each process's range and every delay
//!   within it, with a tail (one draw in twenty takes up to four times longer).

use std::{
    cmp::Reverse,
    collections::{BinaryHeap, HashMap, VecDeque},
    time::Duration,
};

use tokio::time::Instant;

use super::handoff::{HandOff, Plan, Released};
use crate::config::LocalHandOff;

/// Microseconds of virtual time.
type Us = u64;

const MS: Us = 1_000;
/// The lock's TTL for a holder (the watchdog's 30 s): a busy answer's bound.
const TTL: Us = 30_000 * MS;

/// A small seeded generator (splitmix64): the whole run is a function of the seed.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    fn between(&mut self, lo: Us, hi: Us) -> Us {
        lo + self.next() % (hi.saturating_sub(lo) + 1)
    }
}

/// A delay range, and its tail: one draw in twenty takes up to four times the top.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Delay {
    pub(crate) lo: Us,
    pub(crate) hi: Us,
}

impl Delay {
    pub(crate) const fn ms(lo: f64, hi: f64) -> Self {
        Delay {
            lo: (lo * 1000.0) as Us,
            hi: (hi * 1000.0) as Us,
        }
    }

    fn draw(self, rng: &mut Rng) -> Us {
        let d = rng.between(self.lo, self.hi);
        if rng.next().is_multiple_of(20) {
            d + rng.between(0, 3 * self.hi)
        } else {
            d
        }
    }
}

/// What runs a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Runs {
    /// The crate, with its local wait line and hand-off policy.
    Crate,
    /// Redisson's `RLock.lock()`, one thread per owner.
    Java,
}

/// One process of a fleet.
#[derive(Debug, Clone)]
pub(crate) struct Process {
    pub(crate) runs: Runs,
    pub(crate) owners: usize,
    /// How long an owner holds the lock (each hold draws within it).
    pub(crate) hold: Delay,
    /// From an unlock message on the server to this process's attempt on the server (a crate
    /// head woken by it; a JVM's thread woken through its semaphore).
    pub(crate) react: Delay,
    /// From a release on the server to the releasing owner's next attempt on the server (its
    /// reply, then its next `lock()`).
    pub(crate) relock: Delay,
}

impl Process {
    /// A crate process as measured on this machine.
    pub(crate) fn crate_side(owners: usize, hold_ms: f64) -> Self {
        Process {
            runs: Runs::Crate,
            owners,
            hold: Delay::ms(hold_ms, hold_ms + 1.0),
            react: Delay::ms(0.3, 2.0),
            relock: Delay::ms(0.2, 1.0),
        }
    }

    /// A Java process as measured on this machine.
    pub(crate) fn java_side(owners: usize, hold_ms: f64) -> Self {
        Process {
            runs: Runs::Java,
            owners,
            hold: Delay::ms(hold_ms, hold_ms + 1.0),
            react: Delay::ms(3.0, 8.0),
            relock: Delay::ms(2.0, 7.0),
        }
    }
}

/// A fleet on one lock, and how long it runs.
#[derive(Debug, Clone)]
pub(crate) struct Fleet {
    pub(crate) processes: Vec<Process>,
    pub(crate) policy: LocalHandOff,
    /// One-way latency between a process and the server.
    pub(crate) one_way: Us,
    pub(crate) seconds: u64,
    pub(crate) seed: u64,
}

/// What a run measured.
#[derive(Debug, Clone)]
pub(crate) struct Outcome {
    /// Holds per process.
    pub(crate) holds: Vec<usize>,
    /// Per process: the longest wait of one acquisition of one owner, in holds (of anyone)
    /// that began within it.
    pub(crate) longest_wait: Vec<usize>,
    /// The holding process of each hold, in order (`A`, `B`, ...; for reading a failure).
    pub(crate) order: String,
}

impl Outcome {
    /// Process `p`'s share of the holds.
    pub(crate) fn share(&self, p: usize) -> f64 {
        let total: usize = self.holds.iter().sum();
        self.holds[p] as f64 / total.max(1) as f64
    }

    /// The smallest share of any process.
    pub(crate) fn smallest_share(&self) -> f64 {
        (0..self.holds.len())
            .map(|p| self.share(p))
            .fold(f64::INFINITY, f64::min)
    }
}

/// A command a process sends to the server.
#[derive(Debug, Clone, Copy)]
enum Cmd {
    Acquire {
        owner: usize,
    },
    /// A release; `ask`: `NUMSUB` goes with it.
    Release {
        owner: usize,
        ask: bool,
    },
    /// Who holds the lock (`HKEYS`).
    Holder {
        owner: usize,
    },
    Subscribe,
    Unsubscribe,
}

/// The server's answer.
#[derive(Debug, Clone, Copy)]
enum Answer {
    Acquired { owner: usize },
    Busy { owner: usize },
    Released { owner: usize, others: Option<u32> },
    Holder { owner: usize, holder: Option<usize> },
    Subscribed,
}

#[derive(Debug, Clone, Copy)]
enum Event {
    AtServer {
        p: usize,
        cmd: Cmd,
    },
    Reply {
        p: usize,
        answer: Answer,
    },
    /// An unlock message reaches process `p`.
    Message {
        p: usize,
    },
    /// Owner `owner` of `p` ends its hold.
    HoldEnds {
        p: usize,
        owner: usize,
    },
    /// A crate head wakes (`gen` must still be the head's sleep), by a message or not.
    HeadWakes {
        p: usize,
        gen: u64,
        by_message: bool,
    },
    /// A crate owner's `lock()` begins (after its release's reply).
    Locks {
        p: usize,
        owner: usize,
    },
    /// A Java thread attempts (after a wake-up or its re-lock delay), `first`: before it
    /// subscribed.
    JavaAttempts {
        p: usize,
        owner: usize,
    },
    /// A Java thread's wait on the semaphore timed out (`gen` must still be its wait).
    JavaTimeout {
        p: usize,
        owner: usize,
        gen: u64,
    },
}

/// A crate process's line and head.
#[derive(Debug)]
struct CrateState {
    /// The line's policy state (`None`: no line: a line ends with its last waiter and holder).
    hand_off: Option<HandOff>,
    line: VecDeque<usize>,
    /// The line's subscription: `Some(messages seen)` once subscribed.
    messages: Option<u64>,
    subscribing: bool,
    /// One wake-up permit of the subscription (capped at its one waiter), and the head's
    /// `Notify` permit.
    sub_permit: bool,
    notify_permit: bool,
    head: Head,
    gen: u64,
    /// Owners whose release is in flight and told the head early (no `released` at the reply).
    told: Vec<bool>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Head {
    /// No head loop running (no waiter, or the head waits for its subscription).
    Idle,
    /// The head's attempt (or its holder query) is in flight.
    Busy,
    /// Asleep until woken (`gen`).
    Asleep,
    /// A wake-up is under way.
    Waking,
}

/// A Java process's subscription entry and semaphore.
#[derive(Debug, Default)]
struct JavaState {
    /// Threads subscribed (the entry's count); the entry lives while it is above zero.
    subscribed: usize,
    /// The entry's semaphore: permits, and the threads blocked on it (longest first).
    permits: u64,
    blocked: VecDeque<usize>,
    /// Each thread's wait generation (a timeout of an older wait is void) and whether it is
    /// subscribed.
    gen: Vec<u64>,
    in_entry: Vec<bool>,
    /// Threads waiting for the SUBSCRIBE to complete.
    pending_subscribe: Vec<usize>,
    subscribing: bool,
}

struct Sim {
    fleet: Fleet,
    rng: Rng,
    now: Us,
    base: Instant,
    seq: u64,
    queue: BinaryHeap<Reverse<(Us, u64, usize)>>,
    events: HashMap<usize, Event>,
    next_event: usize,
    /// The server: who holds (process, owner), who is subscribed.
    holder: Option<(usize, usize)>,
    subscribed: Vec<bool>,
    crates: Vec<Option<CrateState>>,
    javas: Vec<Option<JavaState>>,
    /// Holds in order: (process, owner, acquired at).
    holds: Vec<(usize, usize, Us)>,
    /// When each owner's current wait began (its previous release, or the start).
    waiting_since: Vec<Vec<Us>>,
    longest_wait: Vec<usize>,
}

impl Sim {
    fn new(fleet: Fleet) -> Self {
        let n = fleet.processes.len();
        let crates = fleet
            .processes
            .iter()
            .map(|p| {
                (p.runs == Runs::Crate).then(|| CrateState {
                    hand_off: None,
                    line: VecDeque::new(),
                    messages: None,
                    subscribing: false,
                    sub_permit: false,
                    notify_permit: false,
                    head: Head::Idle,
                    gen: 0,
                    told: vec![false; p.owners],
                })
            })
            .collect();
        let javas = fleet
            .processes
            .iter()
            .map(|p| {
                (p.runs == Runs::Java).then(|| JavaState {
                    gen: vec![0; p.owners],
                    in_entry: vec![false; p.owners],
                    ..JavaState::default()
                })
            })
            .collect();
        let waiting_since = fleet.processes.iter().map(|p| vec![0; p.owners]).collect();
        Sim {
            rng: Rng::new(fleet.seed),
            fleet,
            now: 0,
            base: Instant::now(),
            seq: 0,
            queue: BinaryHeap::new(),
            events: HashMap::new(),
            next_event: 0,
            holder: None,
            subscribed: vec![false; n],
            crates,
            javas,
            holds: Vec::new(),
            waiting_since,
            longest_wait: vec![0; n],
        }
    }

    fn at(&self) -> Instant {
        self.base + Duration::from_micros(self.now)
    }

    fn schedule(&mut self, after: Us, event: Event) {
        let id = self.next_event;
        self.next_event += 1;
        self.events.insert(id, event);
        self.seq += 1;
        self.queue.push(Reverse((self.now + after, self.seq, id)));
    }

    /// Sends `cmd` from `p`: it reaches the server one way later.
    fn send(&mut self, p: usize, cmd: Cmd) {
        let one_way = self.fleet.one_way;
        self.schedule(one_way, Event::AtServer { p, cmd });
    }

    fn reply(&mut self, p: usize, answer: Answer) {
        let one_way = self.fleet.one_way;
        self.schedule(one_way, Event::Reply { p, answer });
    }

    fn draw(&mut self, p: usize, delay: impl Fn(&Process) -> Delay) -> Us {
        let d = delay(&self.fleet.processes[p]);
        d.draw(&mut self.rng)
    }

    fn run(mut self) -> Outcome {
        for p in 0..self.fleet.processes.len() {
            for owner in 0..self.fleet.processes[p].owners {
                let start = self.rng.between(0, 2 * MS);
                match self.fleet.processes[p].runs {
                    Runs::Crate => self.schedule(start, Event::Locks { p, owner }),
                    Runs::Java => self.schedule(start, Event::JavaAttempts { p, owner }),
                }
            }
        }
        let end = self.fleet.seconds * 1_000 * MS;
        while let Some(Reverse((t, _, id))) = self.queue.pop() {
            if t > end {
                break;
            }
            self.now = t;
            let event = self.events.remove(&id).expect("scheduled");
            self.handle(event);
        }
        let mut holds = vec![0; self.fleet.processes.len()];
        for &(p, _, _) in &self.holds {
            holds[p] += 1;
        }
        let order = self
            .holds
            .iter()
            .map(|&(p, _, _)| char::from(b'A' + p as u8))
            .collect();
        Outcome {
            holds,
            longest_wait: self.longest_wait,
            order,
        }
    }

    fn handle(&mut self, event: Event) {
        match event {
            Event::AtServer { p, cmd } => self.server(p, cmd),
            Event::Reply { p, answer } => match self.fleet.processes[p].runs {
                Runs::Crate => self.crate_reply(p, answer),
                Runs::Java => self.java_reply(p, answer),
            },
            Event::Message { p } => match self.fleet.processes[p].runs {
                Runs::Crate => self.crate_message(p),
                Runs::Java => self.java_message(p),
            },
            Event::HoldEnds { p, owner } => match self.fleet.processes[p].runs {
                Runs::Crate => self.crate_release(p, owner),
                Runs::Java => self.send(p, Cmd::Release { owner, ask: false }),
            },
            Event::HeadWakes { p, gen, by_message } => {
                let st = self.crates[p].as_mut().expect("crate");
                if st.gen == gen && matches!(st.head, Head::Asleep | Head::Waking) {
                    self.head_step(p, by_message);
                }
            }
            Event::Locks { p, owner } => self.crate_lock(p, owner),
            Event::JavaAttempts { p, owner } => self.send(p, Cmd::Acquire { owner }),
            Event::JavaTimeout { p, owner, gen } => {
                let st = self.javas[p].as_mut().expect("java");
                if st.gen[owner] == gen && st.blocked.contains(&owner) {
                    st.blocked.retain(|&o| o != owner);
                    self.send(p, Cmd::Acquire { owner });
                }
            }
        }
    }

    // ---- The server -------------------------------------------------------------------

    fn server(&mut self, p: usize, cmd: Cmd) {
        match cmd {
            Cmd::Acquire { owner } => {
                if self.holder.is_none() {
                    self.holder = Some((p, owner));
                    self.record_hold(p, owner);
                    self.reply(p, Answer::Acquired { owner });
                } else {
                    self.reply(p, Answer::Busy { owner });
                }
            }
            Cmd::Release { owner, ask } => {
                assert_eq!(self.holder, Some((p, owner)), "only the holder releases");
                self.holder = None;
                let others = ask.then(|| {
                    (0..self.subscribed.len())
                        .filter(|&q| q != p && self.subscribed[q])
                        .count() as u32
                });
                for q in 0..self.subscribed.len() {
                    if self.subscribed[q] {
                        let one_way = self.fleet.one_way;
                        self.schedule(one_way, Event::Message { p: q });
                    }
                }
                self.reply(p, Answer::Released { owner, others });
            }
            Cmd::Holder { owner } => {
                let holder = self.holder.map(|(q, _)| q);
                self.reply(p, Answer::Holder { owner, holder });
            }
            Cmd::Subscribe => {
                self.subscribed[p] = true;
                self.reply(p, Answer::Subscribed);
            }
            Cmd::Unsubscribe => self.subscribed[p] = false,
        }
    }

    fn record_hold(&mut self, p: usize, owner: usize) {
        let since = self.waiting_since[p][owner];
        let waited = self.holds.iter().rev().take_while(|h| h.2 >= since).count();
        self.longest_wait[p] = self.longest_wait[p].max(waited);
        self.holds.push((p, owner, self.now));
    }

    /// An owner holds: its hold ends after its hold time.
    fn holding(&mut self, p: usize, owner: usize) {
        let hold = self.draw(p, |pr| pr.hold);
        self.schedule(hold, Event::HoldEnds { p, owner });
    }

    // ---- A crate process --------------------------------------------------------------

    fn cs(&mut self, p: usize) -> &mut CrateState {
        self.crates[p].as_mut().expect("crate")
    }

    /// An owner's `lock()`: an attempt of its own unless the line has waiters (no barging),
    /// else it joins the line.
    fn crate_lock(&mut self, p: usize, owner: usize) {
        self.waiting_since[p][owner] = self.now;
        if self.cs(p).line.is_empty() {
            self.send(p, Cmd::Acquire { owner });
        } else {
            self.join(p, owner);
        }
    }

    fn join(&mut self, p: usize, owner: usize) {
        let policy = self.fleet.policy;
        let st = self.cs(p);
        st.hand_off.get_or_insert_with(|| HandOff::new(policy));
        st.line.push_back(owner);
        if st.line.len() == 1 {
            self.head_starts(p);
        }
    }

    /// A waiter became the head: it subscribes (once per line), then runs its loop.
    fn head_starts(&mut self, p: usize) {
        let st = self.cs(p);
        if st.messages.is_some() {
            self.wake_head(p, 10, false);
        } else if !st.subscribing {
            st.subscribing = true;
            st.head = Head::Idle;
            self.send(p, Cmd::Subscribe);
        }
    }

    fn head_step(&mut self, p: usize, by_message: bool) {
        let now = self.at();
        let st = self.cs(p);
        let Some(&_owner) = st.line.front() else {
            st.head = Head::Idle;
            return;
        };
        let messages = st.messages;
        let plan = st
            .hand_off
            .as_mut()
            .expect("a line")
            .next(now, by_message, messages);
        match plan {
            Plan::Attempt => {
                st.head = Head::Busy;
                let owner = *st.line.front().expect("head");
                self.send(p, Cmd::Acquire { owner });
            }
            Plan::Wait(bound) | Plan::Defer(bound) => self.head_sleeps(p, bound),
        }
    }

    /// Wakes the head after `after` (a new `gen`: an earlier wake-up or bound is void).
    fn wake_head(&mut self, p: usize, after: Us, by_message: bool) {
        let st = self.cs(p);
        st.gen += 1;
        st.head = Head::Waking;
        let gen = st.gen;
        self.schedule(after, Event::HeadWakes { p, gen, by_message });
    }

    /// The head sleeps until notified, a message, or `bound` (a wake-up of its `gen`; an
    /// earlier one makes a new `gen` and voids the bound's).
    fn head_sleeps(&mut self, p: usize, bound: Duration) {
        let st = self.cs(p);
        st.gen += 1;
        let gen = st.gen;
        let woken = if std::mem::take(&mut st.notify_permit) {
            Some(false)
        } else if std::mem::take(&mut st.sub_permit) {
            Some(true)
        } else {
            None
        };
        match woken {
            Some(by_message) => {
                self.wake_head(p, 10, by_message);
            }
            None => {
                st.head = Head::Asleep;
                let after = bound.as_micros().min(u128::from(TTL)) as Us;
                self.schedule(
                    after,
                    Event::HeadWakes {
                        p,
                        gen,
                        by_message: false,
                    },
                );
            }
        }
    }

    /// The line's head is woken by a local notification (a hand-over, a contest, a promotion).
    fn notify_head(&mut self, p: usize) {
        let st = self.cs(p);
        if st.line.is_empty() {
            return;
        }
        match st.head {
            Head::Asleep => {
                self.wake_head(p, 10, false);
            }
            _ => st.notify_permit = true,
        }
    }

    fn crate_message(&mut self, p: usize) {
        // From the message on the server to the attempt on the server: one way each.
        let react = self
            .draw(p, |pr| pr.react)
            .saturating_sub(2 * self.fleet.one_way);
        let st = self.cs(p);
        let Some(m) = st.messages.as_mut() else {
            return;
        };
        *m += 1;
        match st.head {
            Head::Asleep if !st.line.is_empty() => {
                self.wake_head(p, react, true);
            }
            _ => st.sub_permit = true,
        }
    }

    fn crate_reply(&mut self, p: usize, answer: Answer) {
        match answer {
            Answer::Subscribed => {
                let st = self.cs(p);
                st.subscribing = false;
                st.messages = Some(0);
                st.sub_permit = false;
                if !st.line.is_empty() {
                    self.wake_head(p, 10, false);
                } else {
                    // Nobody waits any more: the subscription goes.
                    st.messages = None;
                    self.send(p, Cmd::Unsubscribe);
                }
            }
            Answer::Acquired { owner } => {
                let now = self.at();
                let st = self.cs(p);
                if st.line.front() == Some(&owner) {
                    // The head acquired: it leaves the line, the next waiter becomes head.
                    let hand_off = st.hand_off.as_mut().expect("a line");
                    hand_off.acquired(now, now + Duration::from_micros(TTL));
                    st.line.pop_front();
                    st.head = Head::Idle;
                    st.gen += 1;
                    self.line_left(p);
                }
                self.holding(p, owner);
            }
            Answer::Busy { owner } => {
                let now = self.at();
                let st = self.cs(p);
                if st.line.front() == Some(&owner) && st.head == Head::Busy {
                    let messages = st.messages;
                    let hand_off = st.hand_off.as_mut().expect("a line");
                    if hand_off.asks_holder() {
                        // `wait_in_line` asks who holds before it sleeps.
                        self.send(p, Cmd::Holder { owner });
                        return;
                    }
                    hand_off.busy(now, None, messages);
                    self.head_sleeps(p, Duration::from_micros(TTL));
                } else {
                    // An owner's own first attempt found it busy: it joins the line.
                    self.join(p, owner);
                }
            }
            Answer::Holder { owner, holder } => {
                let now = self.at();
                let st = self.cs(p);
                if st.line.front() == Some(&owner) && st.head == Head::Busy {
                    let messages = st.messages;
                    st.hand_off.as_mut().expect("a line").busy(
                        now,
                        holder.map(|q| q as u64),
                        messages,
                    );
                    self.head_sleeps(p, Duration::from_micros(TTL));
                }
            }
            Answer::Released { owner, others } => {
                let told = std::mem::replace(&mut self.cs(p).told[owner], false);
                if !told {
                    let now = self.at();
                    let st = self.cs(p);
                    let head = !st.line.is_empty();
                    if let Some(hand_off) = st.hand_off.as_mut() {
                        match hand_off.released(now, true, others, head) {
                            Released::Kept => {}
                            Released::Idle => st.hand_off = None,
                            Released::HandedOver | Released::Contested => self.notify_head(p),
                        }
                    }
                }
                let relock = self.draw(p, |pr| pr.relock);
                self.schedule(relock, Event::Locks { p, owner });
            }
        }
    }

    /// The head left the line (acquired): the subscription goes with the last waiter, the line
    /// with its last waiter and holder; else the next waiter is head.
    fn line_left(&mut self, p: usize) {
        let st = self.cs(p);
        if st.line.is_empty() {
            if st.messages.take().is_some() {
                self.send(p, Cmd::Unsubscribe);
            }
            let st = self.cs(p);
            st.sub_permit = false;
            if let Some(h) = st.hand_off.as_mut() {
                h.line_emptied();
                if !h.holds() {
                    st.hand_off = None;
                }
            }
        } else {
            self.head_starts(p);
        }
    }

    /// A crate owner's release, as `Claim::release` sends it.
    fn crate_release(&mut self, p: usize, owner: usize) {
        let now = self.at();
        let st = self.cs(p);
        let messages = st.messages;
        let waiters = !st.line.is_empty();
        let ask = st
            .hand_off
            .as_mut()
            .is_some_and(|h| h.releasing(now, messages, waiters));
        self.send(p, Cmd::Release { owner, ask });
        if ask {
            return;
        }
        // Written to the connection: the head may be told now.
        let st = self.cs(p);
        let early = !st.line.is_empty() && st.hand_off.as_ref().is_some_and(|h| h.hands_over(now));
        if early {
            let outcome = st
                .hand_off
                .as_mut()
                .expect("a line")
                .released(now, true, None, true);
            assert_eq!(outcome, Released::HandedOver);
            st.told[owner] = true;
            self.notify_head(p);
        }
    }

    // ---- A Java process ---------------------------------------------------------------

    fn js(&mut self, p: usize) -> &mut JavaState {
        self.javas[p].as_mut().expect("java")
    }

    fn java_reply(&mut self, p: usize, answer: Answer) {
        match answer {
            Answer::Acquired { owner } => {
                let st = self.js(p);
                if std::mem::take(&mut st.in_entry[owner]) {
                    st.subscribed -= 1;
                    if st.subscribed == 0 {
                        // The last thread out: the entry (and its permits) goes.
                        st.permits = 0;
                        self.send(p, Cmd::Unsubscribe);
                    }
                }
                self.holding(p, owner);
            }
            Answer::Busy { owner } => {
                let st = self.js(p);
                if !st.in_entry[owner] {
                    // The first attempt failed: subscribe (the entry is shared), then attempt.
                    st.in_entry[owner] = true;
                    st.subscribed += 1;
                    if st.subscribed == 1 && !st.subscribing {
                        st.subscribing = true;
                        st.pending_subscribe.push(owner);
                        self.send(p, Cmd::Subscribe);
                    } else if st.subscribing {
                        st.pending_subscribe.push(owner);
                    } else {
                        self.send(p, Cmd::Acquire { owner });
                    }
                } else if st.permits > 0 {
                    st.permits -= 1;
                    self.send(p, Cmd::Acquire { owner });
                } else {
                    st.gen[owner] += 1;
                    let gen = st.gen[owner];
                    st.blocked.push_back(owner);
                    self.schedule(TTL, Event::JavaTimeout { p, owner, gen });
                }
            }
            Answer::Holder { .. } => unreachable!("Java asks nobody who holds"),
            Answer::Subscribed => {
                let st = self.js(p);
                st.subscribing = false;
                let waiting = std::mem::take(&mut st.pending_subscribe);
                for owner in waiting {
                    self.send(p, Cmd::Acquire { owner });
                }
            }
            Answer::Released { owner, .. } => {
                let relock = self
                    .draw(p, |pr| pr.relock)
                    .saturating_sub(2 * self.fleet.one_way);
                self.waiting_since[p][owner] = self.now;
                self.schedule(relock, Event::JavaAttempts { p, owner });
            }
        }
    }

    fn java_message(&mut self, p: usize) {
        let wake = self
            .draw(p, |pr| pr.react)
            .saturating_sub(2 * self.fleet.one_way);
        let st = self.js(p);
        if st.subscribed == 0 {
            return;
        }
        match st.blocked.pop_front() {
            Some(owner) => {
                st.gen[owner] += 1;
                self.schedule(wake, Event::JavaAttempts { p, owner });
            }
            None => st.permits += 1,
        }
    }
}

/// Runs `fleet` and returns what it measured.
pub(crate) fn simulate(fleet: Fleet) -> Outcome {
    Sim::new(fleet).run()
}

#[cfg(test)]
mod tests {
    use proptest::{prelude::*, test_runner::RngSeed};

    use super::*;

    /// Fleets of 2 to 4 processes, at least one of the crate (the JVMs of a fleet alike, as one
    /// service's instances are, in delays and threads: a faster JVM keeps the lock from a slower one, whoever else is
    /// there), each with 2 to 4 owners (one owner has no local line to
    /// hand over in: it races as a Redisson thread does) and
    /// its own delays within the measured ranges (and beyond: slower crates, quicker and
    /// slower JVMs), holds of 20 to 150 ms (each process within 20 % of the fleet's), 40 s.
    fn fleets() -> impl Strategy<Value = Fleet> {
        let process = (
            any::<bool>(),
            2usize..=4,
            0.8f64..1.2,
            (0.2f64..1.0, 0.5f64..3.0),
        );
        (
            proptest::collection::vec(process, 2..=4),
            20.0f64..150.0,
            30u64..150,
            (
                (2.0f64..5.0, 2.0f64..12.0),
                (1.5f64..4.0, 2.0f64..8.0),
                2usize..=4,
            ),
            any::<u64>(),
        )
            .prop_map(
                |(procs, hold_ms, one_way, (java_react, relock, threads), seed)| {
                    let mut processes: Vec<Process> = procs
                        .into_iter()
                        .map(|(java, owners, scale, crate_react)| {
                            let hold = hold_ms * scale;
                            if java {
                                Process {
                                    react: Delay::ms(java_react.0, java_react.0 + java_react.1),
                                    relock: Delay::ms(relock.0, relock.0 + relock.1),
                                    ..Process::java_side(threads, hold)
                                }
                            } else {
                                Process {
                                    react: Delay::ms(crate_react.0, crate_react.0 + crate_react.1),
                                    ..Process::crate_side(owners, hold)
                                }
                            }
                        })
                        .collect();
                    if processes.iter().all(|p| p.runs == Runs::Java) {
                        processes[0] = Process::crate_side(processes[0].owners, hold_ms);
                    }
                    Fleet {
                        processes,
                        policy: LocalHandOff::default(),
                        one_way,
                        seconds: 40,
                        seed,
                    }
                },
            )
    }

    fn config(cases: u32) -> ProptestConfig {
        ProptestConfig {
            cases,
            rng_seed: RngSeed::Fixed(39),
            failure_persistence: None,
            ..ProptestConfig::default()
        }
    }

    fn describe(fleet: &Fleet, o: &Outcome) -> String {
        let who: Vec<String> = fleet
            .processes
            .iter()
            .enumerate()
            .map(|(i, p)| {
                format!(
                    "{}{:?} {} owners: {} holds ({:.3}), longest wait {}",
                    char::from(b'A' + i as u8),
                    p.runs,
                    p.owners,
                    o.holds[i],
                    o.share(i),
                    o.longest_wait[i]
                )
            })
            .collect();
        format!(
            "{}; order {}",
            who.join("; "),
            &o.order[..o.order.len().min(200)]
        )
    }

    proptest! {
        #![proptest_config(config(96))]

        /// Every process of a fleet, crate or Java, gets at least 0.6 / P of the holds while
        /// all wait (P processes).
        #[test]
        fn every_process_of_a_fleet_gets_its_share(fleet in fleets()) {
            let o = simulate(fleet.clone());
            let floor = 0.6 / fleet.processes.len() as f64;
            for p in 0..fleet.processes.len() {
                prop_assert!(o.share(p) >= floor, "share {:.3} < {floor:.3}: {}", o.share(p), describe(&fleet, &o));
            }
        }
    }

    fn fleet(crates: usize, javas: usize, owners: usize, hold_ms: f64, seed: u64) -> Fleet {
        let mut processes: Vec<Process> = (0..crates)
            .map(|_| Process::crate_side(owners, hold_ms))
            .collect();
        processes.extend((0..javas).map(|_| Process::java_side(owners, hold_ms)));
        Fleet {
            processes,
            policy: LocalHandOff::default(),
            one_way: 50,
            seconds: 60,
            seed,
        }
    }

    /// The issue's fleets, 3 owners each, 50 and 100 ms holds: beside one JVM the crate's
    /// process and Java still share about evenly (the policy of before measured 0.49 here, and
    /// 0.45-0.49 beside real Redisson); two or three crate processes no longer starve a JVM
    /// (before: 0.015 and 0); every process of every fleet gets at least 0.6 / P.
    #[test]
    fn the_issues_fleets_share_the_lock() {
        for hold in [50.0, 100.0] {
            for seed in 1..=3 {
                let o = simulate(fleet(1, 1, 3, hold, seed));
                assert!(o.smallest_share() >= 0.45, "1 + 1: {o:?}");
                for (crates, javas) in [(2, 1), (3, 1), (2, 2), (1, 2), (2, 0), (3, 0), (4, 0)] {
                    let o = simulate(fleet(crates, javas, 3, hold, seed));
                    let floor = 0.6 / (crates + javas) as f64;
                    assert!(
                        o.smallest_share() >= floor,
                        "{crates} + {javas}, {hold} ms: {o:?}"
                    );
                }
            }
        }
    }
}
