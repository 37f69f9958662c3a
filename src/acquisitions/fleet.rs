//! A deterministic simulation of a fleet of processes on one hot lock (tests only): crate
//! processes that run the production local wait line ([`WaitLines`], `line.rs`: its order, its
//! turns and wakers, its one subscription, and the hand-off policy it keeps, `LineHandOff`),
//! beside Java processes that behave as Redisson's `RLock.lock()` does, every owner looping
//! lock → hold → unlock with no pause. It finds in seconds what a rule does to each process's
//! share of the holds, before the slow runs beside real Java (`compat-tests`). Its property is
//! shown to fail with an unfair policy (`LocalHandOff::Unbounded`, the negative control).
//!
//! The model, in virtual microseconds (events in time order, ties in the order they were made;
//! every random draw comes from one seeded generator, so a run is a function of its
//! [`Fleet`]), on a runtime whose clock is paused and moved to each event's time, the clock
//! the wait lines read:
//! * **The server** runs each command when it arrives: an acquisition takes the lock if it is
//!   free, else answers busy with the lock's TTL; a release frees it and publishes the unlock
//!   message to every process subscribed then; `NUMSUB` counts the subscribed processes; a
//!   holder query (`HKEYS`) names the holding process.
//! * **A crate process** has a [`WaitLines`] of its own and drives it as the engine does, in
//!   the same order: an owner attempts first unless the line says otherwise
//!   (`attempts_first`), else joins it (`join`: a [`Ticket`]); then the steps of
//!   `engine/sleep.rs` (`wait_in_line`): a waiter behind the head waits for its turn (the
//!   ticket's `notified`, polled with the owner's own [`Waker`], which the line wakes when it
//!   hands a turn); the head takes the line's subscription (`subscription_with`: the process's
//!   channel entry, as the registry keeps it: SUBSCRIBE, its barrier, the messages counted,
//!   one wake-up permit, UNSUBSCRIBE when the line and the acquisition drop it), asks the line
//!   (`next`) and attempts, waits or defers, says who holds when the line asks (`busy`), and
//!   leaves the line when it acquires (`acquired`); and the steps of `lock/claim/calls.rs`
//!   (`release`): the line asked first (`releasing`: `NUMSUB` goes with the release), else
//!   told as soon as the release is written (`hand_over_early`: the head's attempt then
//!   reaches the server right behind it), else told at the reply (`released`). A message
//!   wakes the head after the process's reaction delay.
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
    future::Future,
    sync::Arc,
    task::{Context, Wake, Waker},
    time::Duration,
};

use parking_lot::Mutex;
use tokio::time::Instant;

use super::line::{Listening, Plan, Ticket, WaitLines};
use crate::{config::LocalHandOff, types::line::WaitLine};

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
    /// `epoch`: which of the process's subscriptions (a crate's channel entry) it is for.
    Subscribe {
        epoch: u64,
    },
    Unsubscribe,
}

/// The server's answer.
#[derive(Debug, Clone, Copy)]
enum Answer {
    Acquired { owner: usize },
    Busy { owner: usize },
    Released { owner: usize, others: Option<u32> },
    Holder { owner: usize, holder: Option<usize> },
    Subscribed { epoch: u64 },
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
    /// A crate owner waiting in the line goes on (`gen` must still be its wait's): woken by a
    /// turn, a message (`by_message`), its sleep's bound, or its subscription's barrier.
    OwnerWakes {
        p: usize,
        owner: usize,
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

/// The lock's name and local wait line in every crate process (one lock).
const NAME: &str = "hot";
const LINE: WaitLine = WaitLine::Lock;

/// What the production code running inside the simulation did that the simulation must act on
/// after the event that caused it: tasks woken (a turn handed to a waiter, through its
/// [`Waker`]) and commands a subscription sent as it was made or dropped.
#[derive(Default)]
struct Effects {
    woken: Mutex<Vec<(usize, usize)>>,
    sent: Mutex<Vec<(usize, Cmd)>>,
}

/// The waker of one crate owner's wait: waking it records the owner.
struct OwnerWaker {
    p: usize,
    owner: usize,
    effects: Arc<Effects>,
}

impl Wake for OwnerWaker {
    fn wake(self: Arc<Self>) {
        self.effects.woken.lock().push((self.p, self.owner));
    }
}

/// A crate process's subscription entry for the lock's channel, as the registry keeps it: made
/// when the line's head first subscribes (SUBSCRIBE, then the barrier), counting the messages
/// seen since, with one wake-up permit (capped at the line's one subscription), gone with the
/// line's last subscriber (UNSUBSCRIBE).
#[derive(Default)]
struct ChannelEntry {
    /// A subscription lives (the line's, or the acquisition's copy of it).
    live: bool,
    /// The entry's generation: the SUBSCRIBE it sent, whose answer is its barrier.
    epoch: u64,
    ready: bool,
    messages: u64,
    permit: bool,
}

/// The line's subscription ([`Listening`]): the process's channel entry while it lives.
struct SimSub {
    p: usize,
    entry: Arc<Mutex<ChannelEntry>>,
    effects: Arc<Effects>,
}

impl SimSub {
    fn subscribe(p: usize, entry: &Arc<Mutex<ChannelEntry>>, effects: &Arc<Effects>) -> Self {
        let epoch = {
            let mut e = entry.lock();
            let epoch = e.epoch + 1;
            *e = ChannelEntry {
                live: true,
                epoch,
                ..ChannelEntry::default()
            };
            epoch
        };
        effects.sent.lock().push((p, Cmd::Subscribe { epoch }));
        SimSub {
            p,
            entry: entry.clone(),
            effects: effects.clone(),
        }
    }
}

impl Listening for SimSub {
    fn messages(&self) -> u64 {
        self.entry.lock().messages
    }
}

impl Drop for SimSub {
    fn drop(&mut self) {
        let mut e = self.entry.lock();
        e.live = false;
        e.ready = false;
        e.permit = false;
        self.effects.sent.lock().push((self.p, Cmd::Unsubscribe));
    }
}

/// Where one crate owner's acquisition stands (`wait_in_line`'s steps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wait {
    /// Not acquiring (holding, releasing, or between).
    No,
    /// Its attempt of its own (before joining the line) is in flight.
    First,
    /// In the line behind the head, waiting for its turn.
    Behind,
    /// The head, waiting for the subscription's barrier.
    Subscribing,
    /// The head's attempt, or its question of who holds, is in flight.
    Busy,
    /// The head sleeps until a turn, a message or its bound.
    Asleep,
    /// Woken; its wake-up is under way.
    Waking,
}

/// A crate process: the production wait line ([`WaitLines`] with the process's policy: its
/// order, turns, subscription and hand-off policy) and, per owner, the steps of
/// `engine::sleep::wait_in_line` and `Claim::release` that drive it.
struct CrateState {
    lines: Arc<WaitLines<SimSub>>,
    entry: Arc<Mutex<ChannelEntry>>,
    tickets: Vec<Option<Ticket<SimSub>>>,
    /// The acquisition's copy of the line's subscription (the engine's `kept`).
    kept: Vec<Option<Arc<SimSub>>>,
    wait: Vec<Wait>,
    gen: Vec<u64>,
    wakers: Vec<Waker>,
    /// Owners whose release is in flight and told the head early (no `released` at the reply).
    told: Vec<bool>,
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
    effects: Arc<Effects>,
    crates: Vec<Option<CrateState>>,
    javas: Vec<Option<JavaState>>,
    /// Holds in order: (process, owner, acquired at).
    holds: Vec<(usize, usize, Us)>,
    /// When each owner's current wait began (its previous release, or the start).
    waiting_since: Vec<Vec<Us>>,
    longest_wait: Vec<usize>,
}

impl Sim {
    /// A simulation starting now (on the runtime's paused clock, which the run moves).
    fn new(fleet: Fleet) -> Self {
        let n = fleet.processes.len();
        let effects = Arc::new(Effects::default());
        let crates = fleet
            .processes
            .iter()
            .enumerate()
            .map(|(p, pr)| {
                (pr.runs == Runs::Crate).then(|| CrateState {
                    lines: Arc::new(WaitLines::new(fleet.policy)),
                    entry: Arc::default(),
                    tickets: (0..pr.owners).map(|_| None).collect(),
                    kept: vec![None; pr.owners],
                    wait: vec![Wait::No; pr.owners],
                    gen: vec![0; pr.owners],
                    wakers: (0..pr.owners)
                        .map(|owner| {
                            Waker::from(Arc::new(OwnerWaker {
                                p,
                                owner,
                                effects: effects.clone(),
                            }))
                        })
                        .collect(),
                    told: vec![false; pr.owners],
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
            effects,
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

    /// Runs the events in time order, the runtime's clock (the one the wait lines read) moved
    /// to each event's time first.
    async fn run(mut self) -> Outcome {
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
            if t > self.now {
                tokio::time::advance(Duration::from_micros(t - self.now)).await;
                self.now = t;
            }
            debug_assert_eq!(
                Instant::now(),
                self.at(),
                "the lines read the simulated clock"
            );
            let event = self.events.remove(&id).expect("scheduled");
            self.handle(event);
            self.effects();
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
        // The lines end here, with their wakers and subscriptions.
        drop(self.crates);
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
            Event::OwnerWakes {
                p,
                owner,
                gen,
                by_message,
            } => {
                if self.cs(p).gen[owner] == gen {
                    self.owner_wakes(p, owner, by_message);
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

    /// What the production code did during the event: commands its subscriptions sent, and
    /// the owners it woke (a turn handed to them).
    fn effects(&mut self) {
        let sent = std::mem::take(&mut *self.effects.sent.lock());
        for (p, cmd) in sent {
            self.send(p, cmd);
        }
        let woken = std::mem::take(&mut *self.effects.woken.lock());
        for (p, owner) in woken {
            match self.cs(p).wait[owner] {
                Wait::Behind => self.wake_owner(p, owner, 10, false),
                Wait::Asleep => {
                    self.cs(p).wait[owner] = Wait::Waking;
                    self.wake_owner(p, owner, 10, false);
                }
                // Busy or waking: the turn stays in the waiter's place for its next look.
                _ => {}
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
            Cmd::Subscribe { epoch } => {
                self.subscribed[p] = true;
                self.reply(p, Answer::Subscribed { epoch });
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

    // ---- A crate process: the production wait line, driven as the engine does ---------

    fn cs(&mut self, p: usize) -> &mut CrateState {
        self.crates[p].as_mut().expect("crate")
    }

    /// Schedules owner `owner`'s next step after `after` (a new `gen`: an earlier wake-up or
    /// bound is void).
    fn wake_owner(&mut self, p: usize, owner: usize, after: Us, by_message: bool) {
        let st = self.cs(p);
        st.gen[owner] += 1;
        let gen = st.gen[owner];
        self.schedule(
            after,
            Event::OwnerWakes {
                p,
                owner,
                gen,
                by_message,
            },
        );
    }

    /// Whether a turn was handed to the owner's ticket (taking it); if not, its waker is
    /// registered for the next one (the `notified()` the engine polls).
    fn turn(&mut self, p: usize, owner: usize) -> bool {
        let st = self.cs(p);
        let ticket = st.tickets[owner].as_ref().expect("in line");
        let mut cx = Context::from_waker(&st.wakers[owner]);
        let notified = ticket.notified();
        let mut notified = std::pin::pin!(notified);
        notified.as_mut().poll(&mut cx).is_ready()
    }

    /// An owner's `lock()`: an attempt of its own unless the line has waiters
    /// (`WaitLines::attempts_first`; no owner here may hold already), else it joins the line.
    fn crate_lock(&mut self, p: usize, owner: usize) {
        self.waiting_since[p][owner] = self.now;
        if self.cs(p).lines.attempts_first(LINE, NAME, || false) {
            self.cs(p).wait[owner] = Wait::First;
            self.send(p, Cmd::Acquire { owner });
        } else {
            self.join(p, owner);
        }
    }

    /// Joins the line (`WaitLines::join`), then `wait_in_line`: the head goes on at once, a
    /// waiter behind it waits for its turn.
    fn join(&mut self, p: usize, owner: usize) {
        let st = self.cs(p);
        let ticket = st.lines.join(LINE, NAME.into(), NAME.to_owned());
        let head = ticket.head_now();
        st.tickets[owner] = Some(ticket);
        if head {
            self.head_starts(p, owner);
        } else {
            self.cs(p).wait[owner] = Wait::Behind;
            if self.turn(p, owner) {
                self.wake_owner(p, owner, 10, false);
            }
        }
    }

    /// The owner is the head: the line's subscription (made by the first head that needs it),
    /// its barrier, then the loop.
    fn head_starts(&mut self, p: usize, owner: usize) {
        let effects = self.effects.clone();
        let st = self.cs(p);
        let entry = st.entry.clone();
        let ticket = st.tickets[owner].as_ref().expect("in line");
        let sub = ticket.subscription_with(|_| SimSub::subscribe(p, &entry, &effects));
        st.kept[owner] = Some(sub);
        if st.entry.lock().ready {
            self.head_step(p, owner, false);
        } else {
            st.wait[owner] = Wait::Subscribing;
        }
    }

    /// The owner's wait goes on after a wake-up.
    fn owner_wakes(&mut self, p: usize, owner: usize, by_message: bool) {
        match self.cs(p).wait[owner] {
            Wait::Behind => {
                let head = self.cs(p).tickets[owner]
                    .as_ref()
                    .expect("in line")
                    .head_now();
                if head {
                    self.head_starts(p, owner);
                } else if self.turn(p, owner) {
                    self.wake_owner(p, owner, 10, false);
                }
            }
            Wait::Subscribing => {
                if self.cs(p).entry.lock().ready {
                    self.head_step(p, owner, false);
                }
            }
            Wait::Asleep | Wait::Waking => self.head_step(p, owner, by_message),
            Wait::No | Wait::First | Wait::Busy => {}
        }
    }

    /// One step of the head's loop: what the line says ([`Ticket::next`]).
    fn head_step(&mut self, p: usize, owner: usize, by_message: bool) {
        let st = self.cs(p);
        let plan = st.tickets[owner]
            .as_ref()
            .expect("the head")
            .next(by_message);
        match plan {
            Plan::Attempt => {
                st.wait[owner] = Wait::Busy;
                self.send(p, Cmd::Acquire { owner });
            }
            Plan::Wait(bound) | Plan::Defer(bound) => self.head_sleeps(p, owner, bound),
        }
    }

    /// The head sleeps until a turn (the ticket's notification), a message (the subscription's
    /// wake-up permit) or `bound`, whichever comes first.
    fn head_sleeps(&mut self, p: usize, owner: usize, bound: Duration) {
        if self.turn(p, owner) {
            self.cs(p).wait[owner] = Wait::Waking;
            self.wake_owner(p, owner, 10, false);
            return;
        }
        let permit = std::mem::take(&mut self.cs(p).entry.lock().permit);
        if permit {
            self.cs(p).wait[owner] = Wait::Waking;
            self.wake_owner(p, owner, 10, true);
            return;
        }
        self.cs(p).wait[owner] = Wait::Asleep;
        let after = bound.as_micros().min(u128::from(TTL)) as Us;
        self.wake_owner(p, owner, after, false);
    }

    /// An unlock message reaches the process: the channel's entry counts it and wakes its
    /// waiter (the head, after the process's reaction delay), or keeps the wake-up permit.
    fn crate_message(&mut self, p: usize) {
        // From the message on the server to the attempt on the server: one way each.
        let react = self
            .draw(p, |pr| pr.react)
            .saturating_sub(2 * self.fleet.one_way);
        let st = self.cs(p);
        {
            let mut e = st.entry.lock();
            if !e.live {
                return;
            }
            e.messages += 1;
        }
        match st.wait.iter().position(|&w| w == Wait::Asleep) {
            Some(owner) => {
                st.wait[owner] = Wait::Waking;
                self.wake_owner(p, owner, react, true);
            }
            None => st.entry.lock().permit = true,
        }
    }

    fn crate_reply(&mut self, p: usize, answer: Answer) {
        match answer {
            Answer::Subscribed { epoch } => {
                let st = self.cs(p);
                {
                    let mut e = st.entry.lock();
                    if !e.live || e.epoch != epoch {
                        return;
                    }
                    e.ready = true;
                }
                if let Some(owner) = st.wait.iter().position(|&w| w == Wait::Subscribing) {
                    self.wake_owner(p, owner, 10, false);
                }
            }
            Answer::Acquired { owner } => {
                let now = self.at();
                let st = self.cs(p);
                if let Some(ticket) = st.tickets[owner].take() {
                    // The head acquired: it leaves the line (the next waiter is handed its
                    // turn) and the acquisition drops its copy of the subscription.
                    ticket.acquired(now + Duration::from_micros(TTL));
                    st.kept[owner] = None;
                }
                st.wait[owner] = Wait::No;
                self.holding(p, owner);
            }
            Answer::Busy { owner } => {
                let st = self.cs(p);
                match st.wait[owner] {
                    Wait::Busy => {
                        let ticket = st.tickets[owner].as_ref().expect("the head");
                        if ticket.asks_holder() {
                            // `wait_in_line` asks who holds before it sleeps.
                            self.send(p, Cmd::Holder { owner });
                            return;
                        }
                        ticket.busy(None, &format!("process-{p}"));
                        self.head_sleeps(p, owner, Duration::from_micros(TTL));
                    }
                    // An owner's own first attempt found it busy: it joins the line.
                    Wait::First => self.join(p, owner),
                    other => unreachable!("a busy answer to an owner that is {other:?}"),
                }
            }
            Answer::Holder { owner, holder } => {
                let st = self.cs(p);
                if st.wait[owner] == Wait::Busy {
                    let holder = holder.map(|q| format!("process-{q}"));
                    st.tickets[owner]
                        .as_ref()
                        .expect("the head")
                        .busy(holder.as_deref(), &format!("process-{p}"));
                    self.head_sleeps(p, owner, Duration::from_micros(TTL));
                }
            }
            Answer::Released { owner, others } => {
                let told = std::mem::replace(&mut self.cs(p).told[owner], false);
                if !told {
                    self.cs(p).lines.released(LINE, NAME, true, others);
                }
                let relock = self.draw(p, |pr| pr.relock);
                self.schedule(relock, Event::Locks { p, owner });
            }
        }
    }

    /// A crate owner's release, as `Claim::release` sends it: the line asked first
    /// (`WaitLines::releasing`: `NUMSUB` goes with the release when the policy wants it), else
    /// the head told as soon as the release is written (`WaitLines::hand_over_early`), else
    /// the line told at the reply (`WaitLines::released`).
    fn crate_release(&mut self, p: usize, owner: usize) {
        let ask = self.cs(p).lines.releasing(LINE, NAME).is_some();
        self.send(p, Cmd::Release { owner, ask });
        if !ask {
            let st = self.cs(p);
            st.told[owner] = st.lines.hand_over_early(LINE, NAME);
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
                        self.send(p, Cmd::Subscribe { epoch: 0 });
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
            Answer::Subscribed { .. } => {
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

/// Runs `fleet` and returns what it measured: on a runtime of its own whose clock is paused,
/// moved by the simulation to each event's time (the wait lines read it).
pub(crate) fn simulate(fleet: Fleet) -> Outcome {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime for the simulation")
        .block_on(async { Sim::new(fleet).run().await })
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
        fleets_with(LocalHandOff::default())
    }

    /// [`fleets`] whose crate processes run `policy`.
    fn fleets_with(policy: LocalHandOff) -> impl Strategy<Value = Fleet> {
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
                move |(procs, hold_ms, one_way, (java_react, relock, threads), seed)| {
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
                        policy,
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

    /// The fairness property: every process of the fleet, crate or Java, gets at least 0.6 / P
    /// of the holds while all wait (P processes).
    fn every_share(fleet: &Fleet) -> Result<(), TestCaseError> {
        let o = simulate(fleet.clone());
        let floor = 0.6 / fleet.processes.len() as f64;
        for p in 0..fleet.processes.len() {
            prop_assert!(
                o.share(p) >= floor,
                "share {:.3} < {floor:.3}: {}",
                o.share(p),
                describe(fleet, &o)
            );
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(config(96))]

        /// Every process of a fleet, crate or Java, gets at least 0.6 / P of the holds while
        /// all wait (P processes).
        #[test]
        fn every_process_of_a_fleet_gets_its_share(fleet in fleets()) {
            every_share(&fleet)?;
        }
    }

    /// The negative control: the same property over the same fleets, with crate processes
    /// that always hand the lock over locally (`LocalHandOff::Unbounded`, never asking who
    /// else waits), must fail: a simulation in which an unfair policy passed would prove
    /// nothing. It fails at the first fleet tried.
    #[test]
    fn an_unbounded_local_hand_off_fails_the_share_property() {
        let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
            max_shrink_iters: 0,
            ..config(32)
        });
        match runner.run(&fleets_with(LocalHandOff::Unbounded), |fleet| {
            every_share(&fleet)
        }) {
            Err(proptest::test_runner::TestError::Fail(why, _)) => {
                assert!(why.message().contains("share"), "{why}");
            }
            other => panic!("an unbounded hand-off passed the share property: {other:?}"),
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

    /// Unbounded local hand-offs starve every other process of the issue's fleets (the crate
    /// process that first holds keeps the lock: its line never empties), which the policy's
    /// bound is there to prevent.
    #[test]
    fn an_unbounded_local_hand_off_starves_the_issues_fleets() {
        for (crates, javas) in [(1, 1), (2, 1), (3, 1), (2, 2), (1, 2), (2, 0)] {
            let o = simulate(Fleet {
                policy: LocalHandOff::Unbounded,
                ..fleet(crates, javas, 3, 50.0, 1)
            });
            assert!(
                o.smallest_share() < 0.01,
                "{crates} + {javas}: {:?}",
                o.holds
            );
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
