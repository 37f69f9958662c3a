//! The history format and the checker of the chaos runner (`chaos`, see `src/main.rs`).
//!
//! Every worker process writes one line per event to its own history file, stamped with
//! `CLOCK_MONOTONIC` in nanoseconds ([`clock::now_ns`]): one clock shared by every process of
//! the machine, so events of different processes compare without any synchronisation. The
//! checker ([`check`], [`check_with`]) reads the merged history and counts overlaps of two
//! holders of one lock, split into *announced* (the earlier holder had been told before the later
//! one acquired: by its state, or only by its validity deadline) and *unannounced* ones, ties
//! each overlap to the fault of the run that can have caused it ([`FaultSpan`]), and counts
//! fencing tokens that did not increase while the token counter survived, fenced-register
//! outcomes, waits and errors.
//!
//! # Line format
//! `<kind> <process> <owner> <seq> <t_ns> <fields...>`, one attempt being `(process, owner,
//! seq)`:
//!
//! | kind | fields | meaning |
//! |---|---|---|
//! | `B` | `<lock> <variant> [lease=<ms>] [nested=1] [long=1] [side=java] [at_least=<ms>] [units=<unit>,...]` | an acquisition attempt begins: a leased hold (else the watchdog keeps it), the inner acquisition of a nested re-entry, a hold whose work is to last several leases, a Java (Redisson) holder (else the crate's), a run-once job's run with its `at_least` (see below), what the hold occupies (else the lock, exclusively) |
//! | `A` | `<token or -> <deadline_ns> [<state>]` | acquired; the hold's validity deadline and state (`Held`, or `InDoubt` when taken across a connection loss or failover; absent in older histories: `Held`); a Java watchdog hold has no deadline (`u64::MAX`) |
//! | `N` | `<kind>` | not acquired: `none` (the wait ran out) or an error kind |
//! | `O` | `<state> <deadline_ns>` | the holder looked at its hold (`Held`, `InDoubt`, `Lost`) |
//! | `T` | `<state>` | the holder was told: `lost()` resolved (in doubt or lost) |
//! | `G` | `<previous occupant or ->` | entered the register: who was still inside |
//! | `W` | `<t_reply_ns> <token> <1 or 0>` | a fenced write sent at `t_ns`, accepted or rejected |
//! | `E` | | the critical section ends (just before the release is sent) |
//! | `R` | `<ok or error kind>` | the release's outcome |
//! | `X` | `<what:kind>` | an error inside the critical section (e.g. a failed re-entry) |
//!
//! A unit is `<key>[/<part>][@r]`: the Redis key of the lock, the part of it the hold takes (a
//! value of a group lock), and `@r` for a shared hold (a reader: readers overlap each other, not
//! a writer). A multi-lock's hold lists one unit per part. Two holds overlap when they share a
//! unit and at least one of them holds it exclusively.
//!
//! # Run-once jobs
//! A run of a run-once job (variant `run-once`) is a hold of the tick's name from the job's
//! start (`A`) to its end (`E`): two runs of one tick whose jobs overlapped in time are an
//! overlap, unannounced unless the earlier run had been told (in doubt or lost) before the later
//! one started, or the later one started told. A run that started after another run of the
//! same tick had ended is not an overlap (the two never ran at once), but it is a second run of
//! the tick: [`Report::once_reruns`] counts it, and [`Report::once_early_reruns`] those of them
//! that started before the earlier run's `at_least` (from its attempt's begin) had passed,
//! while `run_once` keeps the name by its TTL. A rerun after `at_least` is ShedLock's semantics
//! (a late instance of the tick runs it again); an early one needs the name gone (a fault that
//! loses data, a deletion) or is a defect of the `at_least` rule.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::collections::{BTreeMap, HashMap};

/// The shared monotonic clock.
pub mod clock {
    use std::time::Instant;

    /// `CLOCK_MONOTONIC` in nanoseconds: comparable across the processes of one machine.
    pub fn now_ns() -> u64 {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
        (t.tv_sec as u64) * 1_000_000_000 + t.tv_nsec as u64
    }

    /// A process-local [`Instant`] (std uses `CLOCK_MONOTONIC` on Linux) as [`now_ns`] time.
    pub fn instant_ns(at: Instant) -> u64 {
        let (now_i, now) = (Instant::now(), now_ns());
        if at >= now_i {
            now + (at - now_i).as_nanos() as u64
        } else {
            now.saturating_sub((now_i - at).as_nanos() as u64)
        }
    }
}

/// One acquisition attempt, rebuilt from the history.
#[derive(Debug, Clone, Default)]
pub struct Attempt {
    /// Worker process number.
    pub process: u32,
    /// Owner number within the process.
    pub owner: u32,
    /// Attempt number of that owner.
    pub seq: u64,
    /// Lock name.
    pub lock: String,
    /// Variant (`reentrant`, `fair`, `write`, `fenced`, `redlock`).
    pub variant: String,
    /// When the attempt began.
    pub begin: u64,
    /// When the acquisition returned with the lock.
    pub acquired: Option<u64>,
    /// When the attempt returned without the lock, and why.
    pub failed: Option<(u64, String)>,
    /// Fencing token of the hold.
    pub token: Option<u64>,
    /// What the holder knew: `(when, state, validity deadline)`; the first is the acquisition.
    pub looks: Vec<(u64, String, u64)>,
    /// When `lost()` first resolved.
    pub told: Option<u64>,
    /// When the critical section ended.
    pub end: Option<u64>,
    /// The release outcome.
    pub release: Option<String>,
    /// The lease of a leased hold, in ms (`None`: the watchdog keeps it).
    pub lease_ms: Option<u64>,
    /// A holder of the Java driver (real Redisson): never told anything.
    pub java: bool,
    /// The inner acquisition of a nested re-entry (`nested=1`: the same owner's outer hold
    /// of the lock is still open).
    pub nested: bool,
    /// A run-once job's `at_least`, in ms (`at_least=<ms>`).
    pub at_least_ms: Option<u64>,
    /// Its work was to last several leases (`long=1`, `--long-holds`): the worker's plan when
    /// it began; whether it did is [`Attempt::lived_by_renewals`].
    pub long: bool,
    /// What the hold occupies; empty: the lock, exclusively.
    pub units: Vec<Unit>,
}

/// What a hold occupies: a lock key, a part of it, shared or exclusive (see the format above).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unit {
    /// The lock's Redis key.
    pub key: String,
    /// The part of it (a group lock's value), if the hold takes only a part.
    pub part: Option<String>,
    /// A shared hold (a reader).
    pub shared: bool,
}

impl Unit {
    /// Parses `<key>[/<part>][@r]`.
    pub fn parse(s: &str) -> Option<Unit> {
        let (body, shared) = match s.strip_suffix("@r") {
            Some(b) => (b, true),
            None => (s, false),
        };
        let (key, part) = match body.split_once('/') {
            Some((k, p)) => (k, Some(p.to_owned())),
            None => (body, None),
        };
        (!key.is_empty()).then(|| Unit {
            key: key.to_owned(),
            part,
            shared,
        })
    }

    /// The unit's name without the mode: holds of one name can overlap.
    pub fn id(&self) -> String {
        match &self.part {
            Some(p) => format!("{}/{p}", self.key),
            None => self.key.clone(),
        }
    }
}

impl Attempt {
    fn id(&self) -> String {
        format!(
            "{}p{}/o{}/#{}",
            if self.java { "java:" } else { "" },
            self.process,
            self.owner,
            self.seq
        )
    }

    /// `lock <lock> (<variant>[, leased]): <id>`, for the examples.
    fn describe(&self) -> String {
        format!(
            "lock {} ({}{}): {}",
            self.lock,
            self.variant,
            if self.lease_ms.is_some() {
                ", leased"
            } else {
                ""
            },
            self.id()
        )
    }

    fn who(&self) -> (u32, u32) {
        (self.process, self.owner)
    }

    fn key3(&self) -> (u32, u32, u64) {
        (self.process, self.owner, self.seq)
    }

    /// `crate` or `java`.
    pub fn side(&self) -> &'static str {
        if self.java {
            "java"
        } else {
            "crate"
        }
    }

    /// What the hold occupies (the lock itself, exclusively, unless the history says more).
    pub fn units(&self) -> Vec<Unit> {
        if self.units.is_empty() {
            vec![Unit {
                key: self.lock.clone(),
                part: None,
                shared: false,
            }]
        } else {
            self.units.clone()
        }
    }

    /// Whether the holder had been told, at `t`, that its hold was not safe any more: its
    /// latest look at or before `t` (the acquisition, a look at the state, `lost()` resolving)
    /// showed a state other than `Held`, or a validity deadline at or before `t`. A hold in
    /// doubt that was confirmed held again before `t` counts as not told.
    pub fn told_by(&self, t: u64) -> bool {
        self.excuse_at(t) != Excuse::Unannounced
    }

    /// What the acquisition itself told the holder: its hold came back in doubt, or with its
    /// validity deadline already passed (a process paused between the server's grant and the
    /// call's return: the grant may be older than another holder's, whose acquisition then
    /// comes first in the history although it came second on the server).
    pub fn born_told(&self) -> Excuse {
        let at = self.acquired.unwrap_or(0);
        match self.acquired.and(self.looks.iter().find(|l| l.0 == at)) {
            Some((_, state, deadline)) => {
                if state != "Held" {
                    Excuse::Told
                } else if *deadline <= at {
                    Excuse::Deadline
                } else {
                    Excuse::Unannounced
                }
            }
            _ => Excuse::Unannounced,
        }
    }

    /// What the holder knew at `t` (see [`told_by`](Self::told_by)): told by its state, told
    /// only by its validity deadline, or nothing. Looks after `t` do not count.
    pub fn excuse_at(&self, t: u64) -> Excuse {
        match self.latest_look(t) {
            Some((_, state, _)) if state != "Held" => Excuse::Told,
            Some((_, _, deadline)) if *deadline <= t => Excuse::Deadline,
            _ => Excuse::Unannounced,
        }
    }

    /// The holder's latest look at or before `t`.
    fn latest_look(&self, t: u64) -> Option<&(u64, String, u64)> {
        self.looks.iter().filter(|l| l.0 <= t).max_by_key(|l| l.0)
    }

    /// When the news the holder had at `t` came ([`excuse_at`](Self::excuse_at)): told by its
    /// state, the first look of the run of looks other than `Held` that lasted to `t`; told
    /// only by its deadline, the deadline. `None` when it had no news.
    pub fn news_at(&self, t: u64) -> Option<u64> {
        match self.excuse_at(t) {
            Excuse::Told => {
                let mut looks: Vec<&(u64, String, u64)> =
                    self.looks.iter().filter(|l| l.0 <= t).collect();
                looks.sort_by_key(|l| l.0);
                let held = looks.iter().rposition(|l| l.1 == "Held");
                looks.get(held.map_or(0, |i| i + 1)).map(|l| l.0)
            }
            Excuse::Deadline => self.latest_look(t).map(|l| l.2),
            _ => None,
        }
    }

    /// How long the hold lasted, from its acquisition to the end of its critical section, in
    /// leases: its first validity window (from the acquisition to the deadline it was acquired
    /// with) is one. `None` for a hold that never ended, or whose acquisition had no deadline
    /// (a Java watchdog hold).
    pub fn leases_lasted(&self) -> Option<f64> {
        let (at, _, deadline) = self.looks.first()?;
        let window = deadline
            .checked_sub(*at)
            .filter(|&w| w > 0 && *deadline != u64::MAX)?;
        let end = self.end?;
        Some(end.saturating_sub(*at) as f64 / window as f64)
    }

    /// A crate's watchdog hold that lasted at least two leases (see
    /// [`leases_lasted`](Self::leases_lasted)): it lived only by its renewals, whatever it
    /// was meant to do when it began (`long=1` is the worker's plan, which a loss, an error
    /// or the run's end may cut short).
    pub fn lived_by_renewals(&self) -> bool {
        !self.java && self.lease_ms.is_none() && self.leases_lasted().is_some_and(|n| n >= 2.0)
    }

    /// When the crate's holder was first told its hold was in doubt or lost while it should
    /// have been valid (see [`Report::told`]): `None` if it never was.
    pub fn told_early_at(&self) -> Option<u64> {
        if self.java || self.variant == "redlock" {
            return None;
        }
        let lease_end = self.looks.first().map_or(u64::MAX, |l| l.2);
        self.looks
            .iter()
            .filter(|l| l.1 != "Held" && (self.lease_ms.is_none() || l.0 < lease_end))
            .map(|l| l.0)
            .min()
    }
}

/// What excused an overlap: what the earlier holder knew when the later one acquired, or what
/// the later one's acquisition told it (see [`Attempt::born_told`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Excuse {
    /// Nothing: it still held a valid hold as far as it knew.
    Unannounced,
    /// Its state said so: in doubt, lost, or `lost()` had resolved.
    Told,
    /// Only its validity deadline (`valid_until()`), which had passed; its state still said
    /// held. A crate that set the deadline too early would turn real overlaps into these.
    Deadline,
    /// Nothing, but the nemesis had deleted its lock's key (`del-key`, `flush`) with every
    /// connection kept, and the holder could not have learnt it yet: a watchdog hold within
    /// the deletion window (a renewal period, a command timeout and another renewal period:
    /// its next renewal tells it), a leased hold before its lease ran out (nothing checks it),
    /// and in both cases only until its owner acquired that lock again (an acquisition that
    /// finds the owner's count lower than the client knows ends the older holds). The
    /// documented gap of data gone under an open connection; counted among the unannounced.
    Deleted,
}

/// The news that announced an overlap, and when it came (see [`Excuse`]): the fault that
/// explains the overlap must have been under way then (see `Faults::cause_of`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum News {
    /// The earlier holder's state said in doubt or lost, since this time (the first look of
    /// the run of such looks that lasted to the later acquisition).
    Told(u64),
    /// Only the earlier holder's validity deadline, which passed at this time.
    Deadline(u64),
    /// The later holder's acquisition came back told (in doubt, or already past its deadline
    /// when `deadline`): it began at `begin` and returned at the later acquisition.
    Born {
        /// When the later holder's attempt began.
        begin: u64,
        /// Told only by the deadline.
        deadline: bool,
    },
}

/// A fault of the run as the checker sees it (from the runner's `nemesis.log`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultSpan {
    /// The fault's name (`pause-client`, ...).
    pub name: String,
    /// When it started (`CLOCK_MONOTONIC` ns).
    pub start: u64,
    /// When it ended.
    pub end: u64,
    /// Whether it can make two holders of one lock overlap: a lock that expired or vanished on
    /// the server (renewals stopped longer than the lease, data lost), or a RedLock node lost.
    pub can_overlap: bool,
    /// Whether it can lose data, the fencing token counter with it (a restart without data, a
    /// failover), after which tokens start again from a lower value.
    pub loses_data: bool,
    /// The worker process it stopped (a client pause): it explains only overlaps whose earlier
    /// holder is of that process, or whose later holder is and was told by its acquisition.
    pub process: Option<u32>,
    /// The lock key it deleted (`del-key`): it explains only overlaps on that key.
    pub lock: Option<String>,
    /// Whether it deleted lock keys with every connection kept (`del-key`: the key of `lock`;
    /// `flush`: every key): see [`Excuse::Deleted`].
    pub deletes: bool,
    /// Whether it can stop the renewals of a hold, or its holder, long enough for the hold's
    /// validity deadline to pass unrenewed (a process or a server stopped, requests lost or
    /// held back, a server restarting or failing over): only such a fault explains an overlap
    /// announced only by a deadline. Latency below the command timeout, a deletion and a
    /// RedLock node's restart do not.
    pub stalls: bool,
    /// Whether it can tell a holder of the deployment that its hold is in doubt or lost (every
    /// fault but one of the RedLock nodes alone): only such a fault explains a hold told
    /// ([`Report::told_unexplained`]).
    pub tells: bool,
}

impl Default for FaultSpan {
    fn default() -> Self {
        FaultSpan {
            name: String::new(),
            start: 0,
            end: 0,
            can_overlap: true,
            loses_data: false,
            process: None,
            lock: None,
            deletes: false,
            stalls: true,
            tells: true,
        }
    }
}

/// The faults of a run, and how long after a fault's end an overlap can still be its doing.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Every fault, in any order.
    pub spans: Vec<FaultSpan>,
    /// An overlap acquired later than this after the end of every fault that can cause one
    /// is unexplained.
    pub window_ns: u64,
    /// How long after a key's deletion a watchdog holder may still not know (see
    /// [`Excuse::Deleted`]); 0: only during the deletion.
    pub deletion_window_ns: u64,
    /// How long after a fault's end a holder can still learn of it: told in doubt or lost
    /// because of it, or see its validity deadline pass unrenewed because renewals stalled
    /// during it (a lease and a command timeout). The news that announced an overlap, and a
    /// hold told, must come from a fault under way or ended at most this long before; 0:
    /// [`window_ns`](Self::window_ns) (histories written before this field existed).
    pub told_window_ns: u64,
}

impl Faults {
    /// Whether a fault that can lose data was under way at some time in `from..=to`.
    fn data_lost_within(&self, from: u64, to: u64) -> bool {
        self.spans
            .iter()
            .any(|f| f.loses_data && f.start <= to && f.end >= from)
    }

    /// The latest fault started at or before `t`.
    fn latest_at(&self, t: u64) -> Option<&FaultSpan> {
        self.spans
            .iter()
            .filter(|f| f.start <= t)
            .max_by_key(|f| f.start)
    }

    /// How long after a fault's end its news can still reach a holder (see
    /// [`told_window_ns`](Self::told_window_ns)).
    fn told_window(&self) -> u64 {
        if self.told_window_ns > 0 {
            self.told_window_ns
        } else {
            self.window_ns
        }
    }

    /// The fault an overlap of `x` (earlier) and `y` (later) on `keys` at `t` is tied to, given
    /// the news that announced it (`None`: none): the latest fault that explains it (`true`),
    /// else the latest fault started at or before `t`, if any (`false`). A fault explains
    /// (see [`FaultSpan`]: a client pause speaks only for its process's holders, a deletion
    /// only for its key):
    /// - news from the earlier holder's state ([`News::Told`]): a fault that can cause
    ///   overlaps, under way at some time from when the news came to `t`, or ended at most the
    ///   told window before the news (a hold in doubt since a fault that keeps the data, a
    ///   restart from the AOF, can be lost to one that comes while it is still in doubt);
    /// - news from its deadline alone ([`News::Deadline`]): the same, and one that can stall
    ///   renewals: the deadline passed unrenewed because of it;
    /// - news from the later holder's own acquisition ([`News::Born`]): such a fault of the
    ///   later holder, under way during that acquisition (or the told window before);
    /// - no news (an unannounced overlap, a deletion's window): a fault that can cause
    ///   overlaps, started at or before `t` and ended at most the window before it.
    fn cause_of(
        &self,
        t: u64,
        x: &Attempt,
        y: &Attempt,
        keys: &[String],
        news: Option<News>,
    ) -> (Option<usize>, bool) {
        let latest = |ok: &dyn Fn(&FaultSpan) -> bool| {
            self.spans
                .iter()
                .enumerate()
                .filter(|(_, f)| f.start <= t && ok(f))
                .max_by_key(|(_, f)| f.start)
                .map(|(i, _)| i)
        };
        let of = |f: &FaultSpan, who: &Attempt| {
            f.process.is_none_or(|p| who.process == p)
                && f.lock.as_ref().is_none_or(|l| keys.contains(l))
        };
        // Under way at some time in `from..=to`, or ended at most `window` before it.
        let during = |f: &FaultSpan, from: u64, to: u64, window: u64| {
            f.start <= to && f.end.saturating_add(window) >= from
        };
        let w = self.told_window();
        let explains = |f: &FaultSpan| {
            f.can_overlap
                && match news {
                    None => during(f, t, t, self.window_ns) && of(f, x),
                    Some(News::Told(at)) => during(f, at, t, w) && of(f, x),
                    Some(News::Deadline(at)) => f.stalls && during(f, at, at, w) && of(f, x),
                    Some(News::Born { begin, deadline }) => {
                        (f.stalls || !deadline) && during(f, begin, t, w) && of(f, y)
                    }
                }
        };
        match latest(&explains) {
            Some(i) => (Some(i), true),
            None => (latest(&|_| true), false),
        }
    }

    /// Whether a fault explains that `a` was told its hold was in doubt or lost at `at`: one
    /// that can tell a holder, of its process and its keys, under way then or ended at most
    /// the told window before (for a hold that came back from its acquisition told, at some
    /// time of that acquisition).
    fn explains_told(&self, a: &Attempt, at: u64) -> bool {
        let from = if Some(at) == a.acquired { a.begin } else { at };
        let keys: Vec<String> = a.units().into_iter().map(|u| u.key).collect();
        self.spans.iter().any(|f| {
            f.tells
                && f.start <= at
                && f.end.saturating_add(self.told_window()) >= from
                && f.process.is_none_or(|p| a.process == p)
                && f.lock.as_ref().is_none_or(|l| keys.contains(l))
        })
    }

    /// Whether a key of `keys` was deleted under `x` and it could not have learnt it by `t`
    /// (see [`Excuse::Deleted`]); `all` lists every hold, for its owner's later acquisitions.
    fn deleted_under(&self, x: &Attempt, keys: &[String], t: u64, all: &[&Attempt]) -> bool {
        if x.acquired.is_none() {
            return false;
        }
        self.spans
            .iter()
            .filter(|f| f.deletes && f.start <= t)
            .any(|f| {
                let deleted: Vec<&String> = match &f.lock {
                    Some(l) => keys.iter().filter(|k| *k == l).collect(),
                    None => keys.iter().collect(),
                };
                // Its grant came at some time between its attempt's begin and its return (a
                // replica sync's `WAIT` after the grant can return after the deletion).
                let held_then = x.begin <= f.end && x.end.unwrap_or(u64::MAX) >= f.start;
                let in_window =
                    x.lease_ms.is_some() || t <= f.end.saturating_add(self.deletion_window_ns);
                // Another acquisition of that key by the same owner, begun after the deletion
                // (so it read what the deletion left).
                let again = all.iter().any(|a| {
                    a.who() == x.who()
                        && a.key3() != x.key3()
                        && a.begin > f.end
                        && a.acquired.is_some_and(|at| at <= t)
                        && a.units().iter().any(|u| deleted.contains(&&u.key))
                });
                !deleted.is_empty() && held_then && in_window && !again
            })
    }
}

/// One overlap of two holds of one lock.
#[derive(Debug, Clone)]
pub struct Overlap {
    /// When the later holder acquired.
    pub at: u64,
    /// What the earlier holder knew then.
    pub excuse: Excuse,
    /// The fault it is tied to (an index into [`Faults::spans`]): see `explained`.
    pub fault: Option<usize>,
    /// Whether that fault can cause overlaps and ended at most the window before it; if not,
    /// `fault` is merely the latest fault before it.
    pub explained: bool,
    /// How long after that fault's end it came, in ms (negative: during the fault).
    pub after_fault_ms: Option<i64>,
    /// The two holds and the lock, described.
    pub what: String,
    /// `<earlier holder's side>><later holder's side>`: `crate>crate`, `crate>java`,
    /// `java>crate`, `java>java`.
    pub sides: String,
}

/// The overlaps of one pair of sides (see [`Report::by_side`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SideTally {
    /// Overlaps.
    pub all: u64,
    /// Unannounced ones (those in a deletion's window included).
    pub unannounced: u64,
    /// Of them, in a deletion's window ([`Excuse::Deleted`]).
    pub in_deletion_window: u64,
    /// Ones no fault before them explains.
    pub unexplained: u64,
}

/// The overlaps tied to one fault (see [`Report::by_fault`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultTally {
    /// The fault's name, `-` for none.
    pub fault: String,
    /// Overlaps.
    pub all: u64,
    /// Unannounced ones.
    pub unannounced: u64,
    /// Ones announced only by the deadline.
    pub deadline_only: u64,
    /// Ones the fault does not explain.
    pub unexplained: u64,
    /// The latest one after the fault's end, in ms (negative: during it).
    pub latest_after_end_ms: Option<i64>,
}

/// A fenced write.
#[derive(Debug, Clone)]
struct FencedWrite {
    attempt: (u32, u32, u64),
    sent: u64,
    reply: u64,
    token: u64,
    accepted: bool,
}

/// What the checker found.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Acquisitions (holds).
    pub ops: u64,
    /// Acquisitions per owner `(process, owner)`; every owner that began an attempt is listed.
    pub owner_ops: BTreeMap<(u32, u32), u64>,
    /// Attempts that returned without the lock because the wait ran out.
    pub not_acquired: u64,
    /// Holds renewed by the watchdog whose holder was told they were in doubt or lost (a `T`
    /// line, or a state other than `Held` seen): none in a run without faults. RedLock holds
    /// are not counted: the workers take them with a lease, and a hold longer than it is told
    /// at its end by design.
    pub told: u64,
    /// Of them, holds told at a time no fault explains (see `Faults::explains_told`: none
    /// under way then, or ended at most the told window before, that can tell a holder of the
    /// deployment, of its process, of its lock): a loss the crate announced that nothing
    /// caused, e.g. a watchdog that renews too late or too short. Must be 0; in a run without
    /// faults, every hold told is one.
    pub told_unexplained: u64,
    /// A few of those, described.
    pub told_examples: Vec<String>,
    /// Pairs of holds of one lock by different owners whose critical sections overlapped.
    pub overlaps: u64,
    /// Overlaps where the earlier holder had not been told before the later one acquired
    /// (those in a deletion's window, and those of Java holders, included).
    pub unannounced: u64,
    /// Of them, the ones in a deletion's window ([`Excuse::Deleted`]).
    pub in_deletion_window: u64,
    /// Unannounced overlaps whose earlier holder was the crate's, outside a deletion's window:
    /// must be 0.
    pub unannounced_crate: u64,
    /// Overlaps whose earlier holder was a Java holder and the later one the crate's, with no
    /// fault before them that can take the Java hold away: the crate broke a Java holder's
    /// exclusion. Must be 0.
    pub java_broken: u64,
    /// Overlaps by the sides of the earlier and the later holder (`crate>java`: a crate holder
    /// overlapped by a Java one that acquired later).
    pub by_side: BTreeMap<String, SideTally>,
    /// Acquisitions by side (`crate`, `java`).
    pub ops_by_side: BTreeMap<String, u64>,
    /// Acquisitions of the crate's holders by kind: `<variant>` (reentrant, fair, read, write,
    /// fenced, group, multi, redlock), and apart `leased` (a hold with a lease), `nested`
    /// (the inner acquisition of a nested re-entry) and `long` (a watchdog hold that lasted at
    /// least two leases, measured from its acquisition to its end:
    /// [`Attempt::lived_by_renewals`]), with how many of them were told (in doubt or lost,
    /// before a lease ended): `(acquired, told)`. A kind that never acquires, or that a fault
    /// never reaches, shows here.
    pub by_kind: BTreeMap<String, (u64, u64)>,
    /// Holds of the crate that went in doubt and stayed in doubt until their deadline (then
    /// lost, or ended past it): the crate could not find out in time whether it still held.
    /// Expected while a server cannot be reached; after a fault that keeps the data (a slot
    /// migration), a defect.
    pub doubt_to_deadline: u64,
    /// A few of those, described.
    pub doubt_examples: Vec<String>,
    /// Per fault name: the longest time from a fault's start to the next acquisition of the
    /// crate on a lock of the deployment (RedLock left out), in ms, and how many faults.
    pub recovery: BTreeMap<String, (f64, u64)>,
    /// Overlaps announced only by the earlier holder's validity deadline: its state still said
    /// held.
    pub deadline_only: u64,
    /// Overlaps not explained by a fault: no fault that can cause one started before them and
    /// ended less than the window before them.
    pub unexplained: u64,
    /// Entries into the register that found another holder still inside (clock-free check).
    pub register_overlaps: u64,
    /// Fenced writes sent.
    pub fenced_writes: u64,
    /// Fenced writes the register rejected (a token lower than one it had accepted).
    pub fenced_rejected: u64,
    /// Fenced writes accepted although a write of another hold with a token at least as high
    /// had been accepted before they were sent: must be 0.
    pub stale_accepted: u64,
    /// Holds of one lock by different attempts with the same fencing token.
    pub duplicate_tokens: u64,
    /// Fenced holds whose token was not higher than that of a hold of the same lock acquired
    /// before they began, or equal to another hold's, with no fault that can lose data in
    /// between: the counter survived and the tokens did not increase. Must be 0.
    pub token_regressions: u64,
    /// Attempts that never returned, or returned later than the stuck bound.
    pub stuck_waits: u64,
    /// The longest attempt (begin to return), in milliseconds.
    pub max_wait_ms: f64,
    /// Errors by kind (acquisitions: the kind; releases: `release:<kind>`).
    pub errors: BTreeMap<String, u64>,
    /// From the first to the last event, in seconds.
    pub span_s: f64,
    /// A few unannounced overlaps, described.
    pub examples: Vec<String>,
    /// Overlaps by variant: `(all, unannounced)`.
    pub by_variant: BTreeMap<String, (u64, u64)>,
    /// Every overlap, by the later acquisition's time.
    pub overlap_list: Vec<Overlap>,
    /// A few announced overlaps, described (what the earlier holder knew).
    pub announced_examples: Vec<String>,
    /// A few token regressions, described.
    pub token_examples: Vec<String>,
    /// Runs of a run-once job that started after another run of the same tick (name) had
    /// ended: second runs that are no overlap (see the module's "Run-once jobs").
    pub once_reruns: u64,
    /// Of them, the ones that started before the earlier run's `at_least` had passed.
    pub once_early_reruns: u64,
    /// The faults the overlaps were tied to (a copy of the input).
    pub faults: Vec<FaultSpan>,
}

impl Report {
    /// Acquisitions per second over the history's span.
    pub fn ops_per_s(&self) -> f64 {
        if self.span_s > 0.0 {
            self.ops as f64 / self.span_s
        } else {
            0.0
        }
    }

    /// The fewest acquisitions of one owner (0 without owners).
    pub fn min_owner_ops(&self) -> u64 {
        self.owner_ops.values().copied().min().unwrap_or(0)
    }

    /// Acquisitions per process (the sum over its owners), by process number.
    pub fn process_ops(&self) -> BTreeMap<u32, u64> {
        let mut per = BTreeMap::new();
        for (&(process, _), &n) in &self.owner_ops {
            *per.entry(process).or_default() += n;
        }
        per
    }

    /// Overlaps per fault they are tied to (one entry per fault name, in order of first
    /// appearance; `-`: before any fault).
    pub fn by_fault(&self) -> Vec<FaultTally> {
        let mut overlaps: Vec<&Overlap> = self.overlap_list.iter().collect();
        overlaps.sort_by_key(|o| o.at);
        let mut out: Vec<FaultTally> = Vec::new();
        for o in overlaps {
            let name = o
                .fault
                .and_then(|i| self.faults.get(i))
                .map_or("-", |f| f.name.as_str());
            let i = match out.iter().position(|e| e.fault == name) {
                Some(i) => i,
                None => {
                    out.push(FaultTally {
                        fault: name.to_owned(),
                        ..FaultTally::default()
                    });
                    out.len() - 1
                }
            };
            let e = &mut out[i];
            e.all += 1;
            e.unannounced += u64::from(o.excuse == Excuse::Unannounced);
            e.deadline_only += u64::from(o.excuse == Excuse::Deadline);
            e.unexplained += u64::from(!o.explained);
            if let Some(ms) = o.after_fault_ms {
                e.latest_after_end_ms = Some(e.latest_after_end_ms.map_or(ms, |l| l.max(ms)));
            }
        }
        out
    }

    /// [`by_fault`](Self::by_fault) as one line.
    pub fn by_fault_line(&self) -> String {
        let v: Vec<String> = self
            .by_fault()
            .iter()
            .map(|e| {
                format!(
                    "{}:{}/{}/{}/{} (latest {} after its end)",
                    e.fault,
                    e.all,
                    e.unannounced,
                    e.deadline_only,
                    e.unexplained,
                    e.latest_after_end_ms
                        .map_or_else(|| "-".to_owned(), |ms| format!("{ms} ms"))
                )
            })
            .collect();
        format!(
            "overlaps by the fault before them (all/unannounced/deadline only/unexplained): {}",
            if v.is_empty() {
                "none".into()
            } else {
                v.join(", ")
            }
        )
    }

    /// `key=value` lines, the format the runner prints.
    pub fn summary(&self) -> String {
        let errors: Vec<String> = self
            .errors
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect();
        let mut s = format!(
            "ops={} ops_per_s={:.1} owners={} min_owner_ops={} not_acquired={} told={} \
             told_unexplained={} overlaps={} unannounced={} in_deletion_window={} unannounced_crate={} java_broken={} \
             deadline_only={} unexplained={} register_overlaps={} \
             fenced_writes={} fenced_rejected={} stale_accepted={} duplicate_tokens={} \
             token_regressions={} stuck_waits={} max_wait_ms={:.0} doubt_to_deadline={} errors={}",
            self.ops,
            self.ops_per_s(),
            self.owner_ops.len(),
            self.min_owner_ops(),
            self.not_acquired,
            self.told,
            self.told_unexplained,
            self.overlaps,
            self.unannounced,
            self.in_deletion_window,
            self.unannounced_crate,
            self.java_broken,
            self.deadline_only,
            self.unexplained,
            self.register_overlaps,
            self.fenced_writes,
            self.fenced_rejected,
            self.stale_accepted,
            self.duplicate_tokens,
            self.token_regressions,
            self.stuck_waits,
            self.max_wait_ms,
            self.doubt_to_deadline,
            if errors.is_empty() {
                "none".to_owned()
            } else {
                errors.join(",")
            }
        );
        let by: Vec<String> = self
            .by_variant
            .iter()
            .map(|(k, (a, u))| format!("{k}:{a}/{u}"))
            .collect();
        s.push_str(&format!(
            " overlaps_by_variant(all/unannounced)={}",
            by.join(",")
        ));
        let kinds: Vec<String> = self
            .by_kind
            .iter()
            .map(|(k, (a, t))| format!("{k}:{a}/{t}"))
            .collect();
        s.push_str(&format!(
            " crate_ops_by_kind(acquired/told)={}",
            kinds.join(",")
        ));
        if self.by_kind.contains_key("run-once") {
            s.push_str(&format!(
                " once_reruns(all/early)={}/{}",
                self.once_reruns, self.once_early_reruns
            ));
        }
        let sides: Vec<String> = self
            .by_side
            .iter()
            .map(|(k, t)| {
                format!(
                    "{k}:{}/{}/{}/{}",
                    t.all, t.unannounced, t.in_deletion_window, t.unexplained
                )
            })
            .collect();
        let ops: Vec<String> = self
            .ops_by_side
            .iter()
            .map(|(k, n)| format!("{k}:{n}"))
            .collect();
        s.push_str(&format!(
            " ops_by_side={} overlaps_by_side(earlier>later:all/unannounced/in_deletion_window/unexplained)={}",
            ops.join(","),
            if sides.is_empty() {
                "none".to_owned()
            } else {
                sides.join(",")
            }
        ));
        for e in &self.examples {
            s.push_str("\nunannounced overlap: ");
            s.push_str(e);
        }
        for o in self.overlap_list.iter().filter(|o| !o.explained).take(5) {
            s.push_str("\nunexplained overlap: ");
            s.push_str(&o.what);
        }
        for e in &self.token_examples {
            s.push_str("\ntoken regression: ");
            s.push_str(e);
        }
        for e in &self.told_examples {
            s.push_str("\ntold, no fault explains it: ");
            s.push_str(e);
        }
        for e in &self.doubt_examples {
            s.push_str("\nin doubt to the deadline: ");
            s.push_str(e);
        }
        s
    }

    /// The recovery line: per fault, the longest time from its start to the crate's next
    /// acquisition.
    pub fn recovery_line(&self) -> String {
        let v: Vec<String> = self
            .recovery
            .iter()
            .map(|(f, (ms, n))| format!("{f}:{:.2}s(n={n})", ms / 1000.0))
            .collect();
        format!(
            "first acquisition after a fault's start, longest per fault: {}",
            if v.is_empty() {
                "none".into()
            } else {
                v.join(", ")
            }
        )
    }
}

/// A history line that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// The line.
    pub line: String,
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "bad history line: {:?}", self.line)
    }
}

impl std::error::Error for ParseError {}

/// Checks a history (lines of every worker, in any order) of a run without faults: every
/// overlap is unexplained. `stuck_ms` bounds one attempt (its wait plus retries, pauses and
/// slack): a longer or unfinished attempt is a stuck wait.
pub fn check<'a>(
    lines: impl IntoIterator<Item = &'a str>,
    stuck_ms: u64,
) -> Result<Report, ParseError> {
    check_with(lines, stuck_ms, &Faults::default())
}

/// [`check`] of a run with `faults`: each overlap is tied to the fault that can have caused it,
/// and tokens may start again from a lower value after a fault that can lose data.
pub fn check_with<'a>(
    lines: impl IntoIterator<Item = &'a str>,
    stuck_ms: u64,
    faults: &Faults,
) -> Result<Report, ParseError> {
    let mut attempts: HashMap<(u32, u32, u64), Attempt> = HashMap::new();
    let mut writes: HashMap<String, Vec<FencedWrite>> = HashMap::new();
    let mut pending_writes: Vec<FencedWrite> = Vec::new();
    let mut report = Report {
        faults: faults.spans.clone(),
        ..Report::default()
    };
    let (mut first, mut last) = (u64::MAX, 0u64);
    for line in lines {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || ParseError {
            line: line.to_owned(),
        };
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.len() < 5 {
            return Err(bad());
        }
        let num = |i: usize| w.get(i).and_then(|v| v.parse::<u64>().ok()).ok_or_else(bad);
        let key = (num(1)? as u32, num(2)? as u32, num(3)?);
        let t = num(4)?;
        first = first.min(t);
        last = last.max(t);
        let a = attempts.entry(key).or_insert_with(|| Attempt {
            process: key.0,
            owner: key.1,
            seq: key.2,
            ..Attempt::default()
        });
        let field = |i: usize| w.get(i).map(|s| s.to_string()).ok_or_else(bad);
        match w[0] {
            "B" => {
                a.begin = t;
                a.lock = field(5)?;
                a.variant = field(6)?;
                for opt in w.iter().skip(7) {
                    match opt.split_once('=') {
                        Some(("lease", ms)) => a.lease_ms = Some(ms.parse().map_err(|_| bad())?),
                        Some(("side", side)) => a.java = side == "java",
                        Some(("nested", n)) => a.nested = n == "1",
                        Some(("long", n)) => a.long = n == "1",
                        Some(("at_least", ms)) => {
                            a.at_least_ms = Some(ms.parse().map_err(|_| bad())?)
                        }
                        Some(("units", units)) => {
                            a.units = units
                                .split(',')
                                .map(Unit::parse)
                                .collect::<Option<Vec<_>>>()
                                .ok_or_else(bad)?;
                        }
                        _ => return Err(bad()),
                    }
                }
            }
            "A" => {
                a.acquired = Some(t);
                a.token = w.get(5).and_then(|v| v.parse().ok());
                let state = w.get(7).map_or("Held", |s| s).to_owned();
                a.looks.push((t, state, num(6)?));
            }
            "N" => a.failed = Some((t, field(5)?)),
            "O" => a.looks.push((t, field(5)?, num(6)?)),
            "T" => {
                a.told.get_or_insert(t);
                // Being told is a look that says "not safe" (a later look may say held again).
                a.looks.push((t, "Told".to_owned(), 0));
            }
            "G" => {
                if field(5)? != "-" {
                    report.register_overlaps += 1;
                }
            }
            "W" => {
                let reply = num(5)?;
                last = last.max(reply);
                pending_writes.push(FencedWrite {
                    attempt: key,
                    sent: t,
                    reply,
                    token: num(6)?,
                    accepted: field(7)? == "1",
                });
            }
            "E" => a.end = Some(t),
            "R" => a.release = Some(field(5)?),
            "X" => *report.errors.entry(field(5)?).or_default() += 1,
            _ => return Err(bad()),
        }
    }
    for wr in pending_writes {
        let lock = attempts
            .get(&wr.attempt)
            .map(|a| a.lock.clone())
            .unwrap_or_default();
        writes.entry(lock).or_default().push(wr);
    }
    report.span_s = if last > first {
        (last - first) as f64 / 1e9
    } else {
        0.0
    };

    // Attempts: ops, waits, errors.
    let mut by_lock: HashMap<&str, Vec<&Attempt>> = HashMap::new();
    let mut held: Vec<&Attempt> = Vec::new();
    for a in attempts.values() {
        let done = a.acquired.or(a.failed.as_ref().map(|f| f.0));
        match done {
            Some(d) => {
                let ms = d.saturating_sub(a.begin) as f64 / 1e6;
                report.max_wait_ms = report.max_wait_ms.max(ms);
                if ms > stuck_ms as f64 {
                    report.stuck_waits += 1;
                }
            }
            None => report.stuck_waits += 1,
        }
        if let Some((_, kind)) = &a.failed {
            if kind == "none" {
                report.not_acquired += 1;
            } else {
                *report.errors.entry(kind.clone()).or_default() += 1;
            }
        }
        if let Some(r) = &a.release {
            if r != "ok" {
                *report.errors.entry(format!("release:{r}")).or_default() += 1;
            }
        }
        let owner_ops = report.owner_ops.entry((a.process, a.owner)).or_default();
        if a.acquired.is_some() {
            *owner_ops += 1;
            let told_at = a.told_early_at();
            let told = told_at.is_some();
            report.told += u64::from(told);
            if let Some(at) = told_at.filter(|&at| !faults.explains_told(a, at)) {
                report.told_unexplained += 1;
                if report.told_examples.len() < 5 {
                    let f = faults.latest_at(at).map_or("no fault".to_owned(), |f| {
                        let ms = (at as i64 - f.end as i64) / 1_000_000;
                        format!("{}, ended {ms} ms before", f.name)
                    });
                    report.told_examples.push(format!(
                        "{} acquired at {}, told at {at} (after {f})",
                        a.describe(),
                        a.acquired.unwrap_or(0),
                    ));
                }
            }
            report.ops += 1;
            if !a.java {
                let kinds = [
                    Some(a.variant.as_str()),
                    a.lease_ms.map(|_| "leased"),
                    a.nested.then_some("nested"),
                    a.lived_by_renewals().then_some("long"),
                ];
                for k in kinds.into_iter().flatten() {
                    let e = report.by_kind.entry(k.to_owned()).or_default();
                    e.0 += 1;
                    e.1 += u64::from(told);
                }
            }
            *report.ops_by_side.entry(a.side().to_owned()).or_default() += 1;
            by_lock.entry(a.lock.as_str()).or_default().push(a);
            held.push(a);
            if let Some(e) = doubt_to_deadline(a) {
                report.doubt_to_deadline += 1;
                if report.doubt_examples.len() < 5 {
                    let f = faults
                        .latest_at(e.0)
                        .map_or("no fault", |f| f.name.as_str());
                    report.doubt_examples.push(format!(
                        "{} in doubt from {} to {} (deadline {}; after {f})",
                        a.describe(),
                        e.0,
                        e.1,
                        e.2
                    ));
                }
            }
        }
    }
    held.sort_by_key(|a| (a.acquired, a.process, a.owner, a.seq));
    for holds in by_lock.values_mut() {
        holds.sort_by_key(|a| (a.acquired, a.process, a.owner, a.seq));
        tokens(holds, faults, &mut report);
        once_reruns(holds, &mut report);
    }

    // Recovery: from each fault's start to the crate's next acquisition (RedLock aside).
    for f in &faults.spans {
        let next = held
            .iter()
            .filter(|a| !a.java && a.variant != "redlock")
            .filter_map(|a| a.acquired)
            .find(|&t| t >= f.start);
        if let Some(t) = next {
            let ms = (t - f.start) as f64 / 1e6;
            let e = report.recovery.entry(f.name.clone()).or_default();
            e.0 = e.0.max(ms);
            e.1 += 1;
        }
    }

    // Overlaps: per unit, holds by acquisition time; a hold that never ended lasts to the end.
    // Two holds overlap on a unit unless both hold it shared; a pair is one overlap however
    // many units it shares.
    let mut by_unit: HashMap<String, Vec<(&Attempt, bool, String)>> = HashMap::new();
    for a in &held {
        for u in a.units() {
            by_unit
                .entry(u.id())
                .or_default()
                .push((a, u.shared, u.key.clone()));
        }
    }
    type Id = (u32, u32, u64);
    type Pair<'a> = (&'a Attempt, &'a Attempt, Vec<String>);
    let mut pairs: HashMap<(Id, Id), Pair> = HashMap::new();
    for holds in by_unit.values_mut() {
        holds.sort_by_key(|(a, _, _)| (a.acquired, a.process, a.owner, a.seq));
        // Holds whose critical section had not ended at the current acquisition.
        let mut active: Vec<(&Attempt, bool)> = Vec::new();
        for (y, y_shared, key) in holds.iter() {
            let ty = y.acquired.unwrap_or(0);
            active.retain(|(x, _)| x.end.unwrap_or(u64::MAX) > ty);
            for (x, x_shared) in &active {
                if x.who() == y.who() || (*x_shared && *y_shared) {
                    continue;
                }
                let e = pairs
                    .entry((x.key3(), y.key3()))
                    .or_insert_with(|| (x, y, Vec::new()));
                if !e.2.contains(key) {
                    e.2.push(key.clone());
                }
            }
            active.push((y, *y_shared));
        }
    }
    let mut pairs: Vec<Pair> = pairs.into_values().collect();
    pairs.sort_by_key(|(x, y, _)| (y.acquired, y.key3(), x.key3()));
    for (x, y, keys) in pairs {
        let ty = y.acquired.unwrap_or(0);
        report.overlaps += 1;
        let (mut excuse, news) = match x.excuse_at(ty) {
            Excuse::Unannounced => {
                let born = y.born_told();
                let news = (born != Excuse::Unannounced).then_some(News::Born {
                    begin: y.begin,
                    deadline: born == Excuse::Deadline,
                });
                (born, news)
            }
            Excuse::Deadline => (Excuse::Deadline, x.news_at(ty).map(News::Deadline)),
            told => (told, x.news_at(ty).map(News::Told)),
        };
        if excuse == Excuse::Unannounced && faults.deleted_under(x, &keys, ty, &held) {
            excuse = Excuse::Deleted;
        }
        let (fault, explained) = faults.cause_of(ty, x, y, &keys, news);
        let unannounced = matches!(excuse, Excuse::Unannounced | Excuse::Deleted);
        report.unexplained += u64::from(!explained);
        report.deadline_only += u64::from(excuse == Excuse::Deadline);
        report.in_deletion_window += u64::from(excuse == Excuse::Deleted);
        report.unannounced_crate += u64::from(!x.java && excuse == Excuse::Unannounced);
        report.java_broken += u64::from(x.java && !y.java && !explained);
        let sides = format!("{}>{}", x.side(), y.side());
        let t = report.by_side.entry(sides.clone()).or_default();
        t.all += 1;
        t.unannounced += u64::from(unannounced);
        t.in_deletion_window += u64::from(excuse == Excuse::Deleted);
        t.unexplained += u64::from(!explained);
        let v = report.by_variant.entry(y.variant.clone()).or_default();
        v.0 += 1;
        let deadline = x
            .looks
            .iter()
            .filter(|l| l.0 <= ty)
            .max_by_key(|l| l.0)
            .map(|l| l.2);
        let what = format!(
            "lock {} ({} of {}{}, {} of {}{}): {} held from {} (deadline {:?}, told {:?}, \
             ended {:?}); {} acquired at {} ({excuse:?}; after {})",
            keys.join("+"),
            x.variant,
            x.side(),
            if x.lease_ms.is_some() { ", leased" } else { "" },
            y.variant,
            y.side(),
            if y.lease_ms.is_some() { ", leased" } else { "" },
            x.id(),
            x.acquired.unwrap_or(0),
            deadline,
            x.told,
            x.end,
            y.id(),
            ty,
            fault
                .and_then(|i| faults.spans.get(i))
                .map_or("no fault".to_owned(), |f| f.name.clone())
        );
        if !unannounced && report.announced_examples.len() < 5 {
            report.announced_examples.push(format!(
                "{what}; looks before: {:?}",
                x.looks.iter().filter(|l| l.0 <= ty).collect::<Vec<_>>()
            ));
        }
        if unannounced {
            v.1 += 1;
            report.unannounced += 1;
            // The examples show what must be 0 first.
            let defect = !x.java && excuse == Excuse::Unannounced;
            if report.examples.len() < 10 && (defect || report.examples.len() < 5) {
                report.examples.push(what.clone());
            }
        }
        report.overlap_list.push(Overlap {
            at: ty,
            excuse,
            fault,
            explained,
            after_fault_ms: fault
                .and_then(|i| faults.spans.get(i))
                .map(|f| (ty as i64 - f.end as i64) / 1_000_000),
            what,
            sides,
        });
    }
    report.overlap_list.sort_by_key(|o| o.at);

    // Fenced writes: the register must have rejected every stale one.
    for ws in writes.values_mut() {
        report.fenced_writes += ws.len() as u64;
        report.fenced_rejected += ws.iter().filter(|w| !w.accepted).count() as u64;
        // Accepted writes by reply time, with the highest token accepted so far and the hold
        // that wrote it.
        let mut accepted: Vec<&FencedWrite> = ws.iter().filter(|w| w.accepted).collect();
        accepted.sort_by_key(|w| w.reply);
        let mut high: Vec<(u64, u64, (u32, u32, u64))> = Vec::with_capacity(accepted.len());
        let mut top: Option<(u64, (u32, u32, u64))> = None;
        for v in &accepted {
            if top.is_none_or(|(t, _)| v.token >= t) {
                top = Some((v.token, v.attempt));
            }
            if let Some((t, a)) = top {
                high.push((v.reply, t, a));
            }
        }
        for w in ws.iter().filter(|w| w.accepted) {
            // Writes whose reply came before this one was sent were applied before it.
            let n = high.partition_point(|(reply, _, _)| *reply < w.sent);
            if n > 0 {
                let (_, t, a) = high[n - 1];
                if t > w.token || (t == w.token && a != w.attempt) {
                    report.stale_accepted += 1;
                }
            }
        }
    }
    Ok(report)
}

/// A doubt of a crate hold that lasted to its deadline: `(doubt seen, resolved or ended,
/// deadline)`. A doubt ends when a look sees the hold held again or lost; one that ended lost
/// at or after the deadline it had when the doubt began, or was still open when the hold ended
/// past it, lasted to the deadline.
fn doubt_to_deadline(a: &Attempt) -> Option<(u64, u64, u64)> {
    // A RedLock guard is in doubt while a quorum is not confirmed, until its validity: by
    // design.
    if a.java || a.variant == "redlock" {
        return None;
    }
    let mut looks: Vec<&(u64, String, u64)> = a.looks.iter().filter(|l| l.1 != "Told").collect();
    looks.sort_by_key(|l| l.0);
    let mut doubt: Option<(u64, u64)> = None;
    for l in looks {
        match (l.1.as_str(), doubt) {
            ("InDoubt", None) => doubt = Some((l.0, l.2)),
            ("Held", Some(_)) => doubt = None,
            ("Lost", Some((since, deadline))) => {
                if l.0 + 1_000_000 >= deadline {
                    return Some((since, l.0, deadline));
                }
                return None;
            }
            _ => {}
        }
    }
    match (doubt, a.end) {
        (Some((since, deadline)), Some(end)) if end >= deadline => Some((since, end, deadline)),
        _ => None,
    }
}

/// Second runs of a run-once tick (the holds of one name, sorted by acquisition): a run that
/// started after another run of the name had ended (see the module's "Run-once jobs").
fn once_reruns(holds: &[&Attempt], report: &mut Report) {
    for y in holds.iter().filter(|a| a.at_least_ms.is_some()) {
        let Some(ty) = y.acquired else { continue };
        let before: Vec<&&Attempt> = holds
            .iter()
            .filter(|x| x.key3() != y.key3() && x.end.is_some_and(|e| e <= ty))
            .collect();
        if before.is_empty() {
            continue;
        }
        report.once_reruns += 1;
        let early = before.iter().any(|x| {
            let at_least = x.at_least_ms.unwrap_or(0).saturating_mul(1_000_000);
            ty < x.begin.saturating_add(at_least)
        });
        report.once_early_reruns += u64::from(early);
    }
}

/// Fencing tokens of the holds of one lock (sorted by acquisition): duplicates, and holds whose
/// token did not increase while the counter survived. A hold `x` certainly acquired before `y`
/// when `x`'s acquisition returned before `y`'s attempt began; then `y`'s token must be higher,
/// unless a fault that can lose data came between `x`'s attempt and `y`'s acquisition. Two
/// holds never share a token, with the same exception.
fn tokens(holds: &[&Attempt], faults: &Faults, report: &mut Report) {
    let fenced: Vec<(&Attempt, u64, u64)> = holds
        .iter()
        .filter_map(|a| Some((*a, a.token?, a.acquired?)))
        .collect();
    let mut seen: HashMap<u64, Vec<&Attempt>> = HashMap::new();
    for &(y, ty, acq_y) in &fenced {
        let same = seen.entry(ty).or_default();
        if !same.is_empty() {
            report.duplicate_tokens += 1;
        }
        let duplicate = same.iter().find(|x| {
            let from = x.begin.min(y.begin);
            !faults.data_lost_within(from, acq_y)
        });
        let regression = duplicate.map(|x| (*x, ty)).or_else(|| {
            fenced
                .iter()
                .filter(|&&(x, tx, acq_x)| {
                    acq_x < y.begin && tx >= ty && !faults.data_lost_within(x.begin, acq_y)
                })
                .map(|&(x, tx, _)| (x, tx))
                .next()
        });
        if let Some((x, tx)) = regression {
            report.token_regressions += 1;
            if report.token_examples.len() < 5 {
                report.token_examples.push(format!(
                    "lock {}: {} acquired at {} with token {tx}; {} began at {} and acquired at \
                     {acq_y} with token {ty}",
                    y.lock,
                    x.id(),
                    x.acquired.unwrap_or(0),
                    y.id(),
                    y.begin
                ));
            }
        }
        same.push(y);
    }
}
