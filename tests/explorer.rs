//! The explorer (issue 49): random sequences of what users do with locks, and of the faults of
//! the test kit, over two or three clients of one throwaway `redis-server`, each client behind a
//! proxy of its own; after every step, and every `POLL` while time passes, what every guard says
//! is checked against the server, read directly (never through a proxy).
//!
//! A case is made from a seed (`generate`): the clients, owners and names, each name bound to one
//! kind family (reentrant, read-write halves, fair, fenced, watchdog permits), and a sequence of
//! steps biased towards locality (the same owner and name again), so that runs such as "write
//! lock, two leased reads, unlock one read" come often. Acquisitions run as tasks (a waiting one
//! goes on while later steps run: the waiters of other clients). The checks (`Run::round`, the
//! end of a case in `Run::finish`), each named by the signature a failure carries:
//!
//! 1. `held-without-field`, `ttl-below-deadline`, `read-ttl-below-deadline`,
//!    `count-below-guards`, `permit-missing`, `permit-deadline`: a guard whose `state()` is `Held`
//!    (read before and after the server) has its owner's field (a permit: its id) on the server,
//!    the key outlives its `valid_until` (`t_answer + PTTL ≥ valid_until`, `t_answer` the reply's
//!    arrival: a key that passes lived at least that long), a reader's longest timeout key too,
//!    and the owner's count is at least its `Held` guards.
//! 2. `exclusion`: no two owners inside exclusive holds at once; no more permits than there are.
//! 3. `wake`: while a waiter with time left waits on a name whose lock has been free on the
//!    server (a permit available) for longer than `WAKE_BOUND`, a release failed to wake it.
//! 4. `end-*`: once every guard is released and every task done, each client's `stats()` keeps
//!    nothing and the server keeps no lock key, within bounds.
//! 5. `unexplained-*`: a guard is never told `InDoubt` or `Lost` without a fault (or its own
//!    lease's end) to explain it; `unlock-found-nothing`: an unlock of a guard that said `Held`
//!    well inside its deadline finds the hold; `token-not-increasing` for fenced holds.
//!
//! The faults excuse what docs/safety.md says they excuse, and no more (`Faults`): a `DEL`
//! leaves the guards of holds taken before it `Held` without their field until a renewal could
//! have found it gone (a leased-only hold: until its lease ends); a stall, a dropped connection
//! or a restart explain a hold told in doubt or lost on the client they hit (a restart: every
//! client) and a waiter woken late; a stalled runtime (`LAG_EXCUSE`) explains a late renewal or
//! wake-up. Nothing excuses a `Held` guard whose key outlives nothing, or two exclusive holders.
//!
//! Environment: `EXPLORER_SECS` (exploring budget, default 75), `EXPLORER_SEED=<u64>` (replay the
//! case of that seed), with `EXPLORER_KEEP=<i,j,..>` (only those steps: a shrunk sequence),
//! `EXPLORER_ALL=1` (keep exploring after a failure, report each distinct signature),
//! `EXPLORER_UNTIL=<text>[,<text>..]` (explore until a failure whose signature contains one),
//! `EXPLORER_SHRINK_SECS` (the shrinking's bound per failure, default 150), `EXPLORER_SHRINK=1`
//! (with `EXPLORER_SEED`: shrink the replayed steps further), `EXPLORER_FIRST_SEED`.
//! docs/testing.md ("The explorer") has how to run it long and what it found.

use redisson_lock_test_kit as common;

use std::{
    collections::{BTreeMap, HashMap, HashSet},
    fmt,
    future::Future,
    pin::Pin,
    sync::{Arc, Mutex},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use common::{proxy::Proxy, RedisServer};
use fred::{
    clients::Client as FredClient,
    interfaces::{ClientLike, KeysInterface, PubsubInterface},
    types::{
        config::{Config as FredConfig, PerformanceConfig, ReconnectPolicy},
        ClusterHash, CustomCommand, Value,
    },
};
use redisson_lock::{
    AnyGuard, Client, Config, ErrorKind, HoldState, Kind, Lock, Owner, PermitGuard, PermitId,
};
use tokio::{task::JoinHandle, time::Instant};

const MS: Duration = Duration::from_millis(1);
/// Short, so that leases, renewals (every third of it) and expiries happen inside one case.
const WATCHDOG: Duration = Duration::from_millis(2000);
const COMMAND_TIMEOUT: Duration = Duration::from_millis(600);
const FAIR_WAIT: Duration = Duration::from_millis(1500);
/// The checks' period while time passes.
const POLL: Duration = Duration::from_millis(15);
/// A waiter still asleep this long after its lock was free on the server was not woken: well
/// below the watchdog timeout (the bound of a sleep without a message), generous for a loaded
/// debug build (a wake-up takes a few ms; a stall of the runtime is excused, `LAG_EXCUSE`).
const WAKE_BOUND: Duration = Duration::from_millis(800);
/// A stall of the test's own runtime (or of a read of the server) at least this long explains a
/// late renewal or a late wake-up.
const LAG_EXCUSE: Duration = Duration::from_millis(300);
/// How long an acquisition step waits for its task before letting it run on.
const SETTLE: Duration = Duration::from_millis(400);
/// The bounds of the end of a case: tasks done, clients idle, keys gone.
const END_BOUND: Duration = Duration::from_secs(20);

/// After a `DEL`, the next renewal run of a renewed hold starts within a period (or the run under
/// way ends within a command timeout) and its reply comes within a command timeout.
fn renewal_bound() -> Duration {
    WATCHDOG / 3 + COMMAND_TIMEOUT * 2 + Duration::from_millis(400)
}

/// The deadline rule's margin (docs/safety.md): 1 % + 2 ms.
fn drift(lease: Duration) -> Duration {
    lease / 100 + 2 * MS
}

// ---------------------------------------------------------------------------------------------
// Cases and steps

/// SplitMix64: small, seeded, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Family {
    Reentrant,
    ReadWrite,
    Fair,
    Fenced,
    Permits,
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Family::Reentrant => "reentrant",
            Family::ReadWrite => "rw",
            Family::Fair => "fair",
            Family::Fenced => "fenced",
            Family::Permits => "permits",
        })
    }
}

/// Which half of a read-write lock; `Whole` for every other kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Half {
    Whole,
    Read,
    Write,
}

impl fmt::Display for Half {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Half::Whole => "",
            Half::Read => ":read",
            Half::Write => ":write",
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum How {
    /// `lock()`, waiting without limit (the step waits `SETTLE` for it, then it runs on).
    Lock,
    /// `try_lock()`: one attempt.
    Once,
    /// `try_lock_for(wait)`: a waiter that runs on while later steps go.
    For(u32),
}

/// Who acts and on what: client, owner (0 for permits), name, half.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Who {
    c: usize,
    o: usize,
    n: usize,
    half: Half,
}

impl fmt::Display for Who {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c{}/o{} n{}{}", self.c, self.o, self.n, self.half)
    }
}

#[derive(Clone, Debug)]
enum Step {
    /// An acquisition; `lease: None` is the watchdog.
    Acquire {
        who: Who,
        how: How,
        lease: Option<u32>,
    },
    /// `guard.unlock()` (a permit: `release()`) of the `pick`-th guard of `who`.
    Unlock { who: Who, pick: usize },
    /// Drops the guard: a background release.
    Drop { who: Who, pick: usize },
    /// `guard.keep()`: the hold stays for a later `lock.unlock()`.
    Keep { who: Who, pick: usize },
    /// The Java style: `lock.unlock()` through a handle of the owner (a permit: `release(id)`
    /// of a kept one), when a kept hold exists.
    HandleUnlock { who: Who },
    /// Lets time pass (checks keep running).
    Wait(u32),
    /// Freezes client `c`'s proxy for `ms`, then lets the held bytes through.
    Freeze { c: usize, ms: u32 },
    /// Drops client `c`'s connections.
    Reset(usize),
    /// `DEL` of name `n`'s lock key by another client.
    Del(usize),
    /// `kill -9` and start again, with (AOF) or without the data.
    Restart { empty: bool },
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lease = |l: &Option<u32>| match l {
            None => "watchdog".to_string(),
            Some(ms) => format!("lease {ms}ms"),
        };
        match self {
            Step::Acquire { who, how, lease: l } => match how {
                How::Lock => write!(f, "{who} lock ({})", lease(l)),
                How::Once => write!(f, "{who} try_lock ({})", lease(l)),
                How::For(w) => write!(f, "{who} try_lock_for {w}ms ({})", lease(l)),
            },
            Step::Unlock { who, pick } => write!(f, "{who} unlock guard #{pick}"),
            Step::Drop { who, pick } => write!(f, "{who} drop guard #{pick}"),
            Step::Keep { who, pick } => write!(f, "{who} keep guard #{pick}"),
            Step::HandleUnlock { who } => write!(f, "{who} lock.unlock() (Java style)"),
            Step::Wait(ms) => write!(f, "wait {ms}ms"),
            Step::Freeze { c, ms } => write!(f, "FAULT freeze c{c}'s proxy {ms}ms"),
            Step::Reset(c) => write!(f, "FAULT reset c{c}'s connections"),
            Step::Del(n) => write!(f, "FAULT DEL n{n}"),
            Step::Restart { empty: false } => write!(f, "FAULT restart the server (AOF)"),
            Step::Restart { empty: true } => write!(f, "FAULT restart the server empty"),
        }
    }
}

struct Case {
    seed: u64,
    clients: usize,
    owners: usize,
    families: Vec<Family>,
    permits: u64,
    steps: Vec<Step>,
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self
            .families
            .iter()
            .enumerate()
            .map(|(i, fam)| match fam {
                Family::Permits => format!("n{i} permits({})", self.permits),
                _ => format!("n{i} {fam}"),
            })
            .collect();
        write!(
            f,
            "seed {}: {} clients, {} owners each, [{}], {} steps",
            self.seed,
            self.clients,
            self.owners,
            names.join(", "),
            self.steps.len()
        )
    }
}

const LEASES: [u32; 8] = [150, 250, 400, 600, 900, 1300, 2000, 3000];
const WAITS: [u32; 9] = [10, 30, 80, 150, 250, 400, 600, 900, 1300];
const TRY_WAITS: [u32; 6] = [100, 400, 1000, 2000, 3500, 6000];

/// The case of `seed`. Locality: the next step acts on the same client, owner and name with
/// probability 0.8, a move goes back to the previous focus often, an owner that holds nothing
/// mostly acquires, and an acquisition is often followed by another client's on the same name,
/// so sequences of one owner on one name interleave with other clients' waiters.
fn generate(seed: u64) -> Case {
    use Family::*;
    let mut r = Rng(seed);
    let clients = 2 + r.below(2) as usize;
    let owners = 2 + r.below(2) as usize;
    let names = 2 + r.below(2) as usize;
    let families: Vec<Family> = (0..names)
        .map(|_| r.pick(&[Reentrant, ReadWrite, ReadWrite, Fair, Fenced, Permits]))
        .collect();
    let permits = 1 + r.below(2);
    // A third of the cases without faults: there every check is at its strictest.
    let fault_p = r.pick(&[0.0, 0.0, 0.025, 0.025, 0.07]);
    let len = 20 + r.below(45) as usize;
    let mut focus = (
        r.below(clients as u64) as usize,
        r.below(owners as u64) as usize,
        r.below(names as u64) as usize,
    );
    let mut previous = focus;
    let mut last_half: HashMap<(usize, usize, usize), Half> = HashMap::new();
    let mut expected: HashMap<(usize, usize, usize), usize> = HashMap::new();
    let mut steps = Vec::with_capacity(len);
    while steps.len() < len {
        if r.chance(fault_p) {
            steps.push(match r.below(100) {
                0..=39 => Step::Freeze {
                    c: r.below(clients as u64) as usize,
                    ms: 100 + 100 * r.below(14) as u32,
                },
                40..=64 => Step::Reset(r.below(clients as u64) as usize),
                65..=84 => Step::Del(r.below(names as u64) as usize),
                85..=92 => Step::Restart { empty: false },
                _ => Step::Restart { empty: true },
            });
            continue;
        }
        if r.chance(0.2) {
            let next = if r.chance(0.8) {
                previous
            } else {
                // Mostly another owner of the same name: contention, waiters.
                match r.below(10) {
                    0..=1 => (focus.0, r.below(owners as u64) as usize, focus.2),
                    2..=7 => (
                        r.below(clients as u64) as usize,
                        r.below(owners as u64) as usize,
                        focus.2,
                    ),
                    _ => (
                        r.below(clients as u64) as usize,
                        r.below(owners as u64) as usize,
                        r.below(names as u64) as usize,
                    ),
                }
            };
            previous = focus;
            focus = next;
        }
        let (c, o, n) = focus;
        let family = families[n];
        let o = if family == Permits { 0 } else { o };
        let last = last_half.get(&(c, o, n)).copied();
        let half = |r: &mut Rng, acquiring: bool| match family {
            ReadWrite => match last {
                // After a write hold, reads of the same owner often follow (a downgrade).
                Some(Half::Write) if acquiring && r.chance(0.7) => Half::Read,
                Some(h) if !acquiring && r.chance(0.7) => h,
                _ => r.pick(&[Half::Read, Half::Write]),
            },
            _ => Half::Whole,
        };
        // What the focus is expected to hold (acquisitions assumed to succeed): an owner that
        // holds nothing mostly acquires; one that holds mostly releases or lets time pass.
        let holds = expected.get(&(c, o, n)).copied().unwrap_or(0);
        let roll = if holds == 0 && r.chance(0.6) {
            0
        } else {
            r.below(100)
        };
        let step = match roll {
            0..=41 => {
                let h = half(&mut r, true);
                last_half.insert((c, o, n), h);
                *expected.entry((c, o, n)).or_default() += 1;
                let lease = if family == Permits {
                    r.chance(0.2).then(|| r.pick(&LEASES))
                } else {
                    r.chance(0.55).then(|| r.pick(&LEASES))
                };
                let how = match r.below(100) {
                    0..=44 => How::Lock,
                    45..=64 => How::Once,
                    _ => How::For(r.pick(&TRY_WAITS)),
                };
                Step::Acquire {
                    who: Who { c, o, n, half: h },
                    how,
                    lease,
                }
            }
            42..=70 => {
                let who = Who {
                    c,
                    o,
                    n,
                    half: half(&mut r, false),
                };
                let pick = r.below(4) as usize;
                if roll < 68 {
                    let e = expected.entry((c, o, n)).or_default();
                    *e = e.saturating_sub(1);
                }
                match roll {
                    42..=57 => Step::Unlock { who, pick },
                    58..=63 => Step::Drop { who, pick },
                    64..=67 => Step::Keep { who, pick },
                    _ => Step::HandleUnlock { who },
                }
            }
            _ => Step::Wait(r.pick(&WAITS)),
        };
        // Right after an acquisition, another client often wants the same name (a waiter that
        // releases must wake); the focus stays.
        let contender = match &step {
            Step::Acquire { who, .. } if clients > 1 && r.chance(0.3) => {
                let other = (c + 1 + r.below(clients as u64 - 1) as usize) % clients;
                let o = if family == Permits {
                    0
                } else {
                    r.below(owners as u64) as usize
                };
                let half = match family {
                    ReadWrite => r.pick(&[Half::Read, Half::Write]),
                    _ => Half::Whole,
                };
                Some(Step::Acquire {
                    who: Who {
                        c: other,
                        o,
                        n: who.n,
                        half,
                    },
                    how: if r.chance(0.5) {
                        How::Lock
                    } else {
                        How::For(r.pick(&TRY_WAITS))
                    },
                    lease: r.chance(0.5).then(|| r.pick(&LEASES)),
                })
            }
            _ => None,
        };
        steps.push(step);
        steps.extend(contender);
    }
    Case {
        seed,
        clients,
        owners,
        families,
        permits,
        steps,
    }
}

// ---------------------------------------------------------------------------------------------
// What a run keeps

/// A guard of any kind.
enum G {
    Lock(AnyGuard),
    Permit(PermitGuard),
}

impl G {
    fn state(&self) -> HoldState {
        match self {
            G::Lock(g) => g.state(),
            G::Permit(g) => g.state(),
        }
    }
    fn valid_until(&self) -> Instant {
        match self {
            G::Lock(g) => g.valid_until(),
            G::Permit(g) => g.valid_until(),
        }
    }
}

/// How a hold was taken: what the checks and their excuses need.
#[derive(Clone)]
struct Meta {
    /// The fencing token of a fenced hold.
    token: Option<u64>,
    /// The step that acquired it (index in the run's steps).
    step: usize,
    who: Who,
    /// The owner field (a permit: its id in hex).
    field: String,
    watchdog: bool,
    lease: Option<Duration>,
    /// When the acquisition began: its hold was sent no earlier.
    began: Instant,
}

/// A guard the run holds.
struct Holding {
    meta: Meta,
    guard: G,
    /// Once a loss was found explained, it is not looked at again.
    loss_seen: bool,
}

type Acquired = redisson_lock::Result<Option<G>>;

/// An acquisition task not harvested yet.
struct Pending {
    step: usize,
    who: Who,
    lease: Option<Duration>,
    began: Instant,
    /// When a waiting acquisition gives up (`None`: never).
    deadline: Option<Instant>,
    task: JoinHandle<Acquired>,
}

/// The faults so far, with their windows (`None`: still under way).
#[derive(Default)]
struct Faults {
    /// Client-side faults (freeze, reset): client, start, end.
    client: Vec<(usize, Instant, Option<Instant>)>,
    /// Restarts: start, end.
    server: Vec<(Instant, Option<Instant>)>,
    /// `DEL`s: name, sent, answered.
    dels: Vec<(usize, Instant, Instant)>,
}

impl Faults {
    /// A fault of client `c` (any client: `None`) or of the server under way in `[from, to]`.
    fn any_in(&self, c: Option<usize>, from: Instant, to: Instant) -> bool {
        let open = |end: Option<Instant>| end.unwrap_or(to);
        self.client
            .iter()
            .any(|&(fc, s, e)| c.is_none_or(|c| c == fc) && s <= to && open(e) >= from)
            || self.server.iter().any(|&(s, e)| s <= to && open(e) >= from)
    }
}

/// Check 3's record of one name: since when the server showed it free.
#[derive(Clone)]
struct Track {
    free_since: Option<Instant>,
    /// When the last read that found it busy was sent.
    last_busy: Instant,
    /// When the key would run out by the TTL last seen of 3 ms or more (sent + PTTL; `None`: no
    /// TTL). A TTL of under 3 ms, as `PEXPIRE 1` leaves, does not move it.
    runs_out: Option<Instant>,
    /// The lock came free when its TTL could have run out: an expiry, which publishes nothing.
    expired: bool,
    /// A fair lock's queue as last read: owner field → (its place's deadline, epoch ms; it was
    /// the head).
    places: HashMap<String, (f64, bool)>,
    /// The places that left the queue since: owner field → (the place's deadline and whether
    /// it was the head when last read, and when that read was sent, epoch ms).
    left: HashMap<String, (f64, bool, f64)>,
}

/// What the server holds of one name, read at once (`SNAPSHOT`).
enum NameSnap {
    Lock {
        /// Owner fields and their counts (`mode` left out).
        fields: HashMap<String, i64>,
        pttl: i64,
        /// A reader field's longest timeout key (`-1`: one without TTL; `-2`: none).
        reads: HashMap<String, i64>,
        /// A fair lock's queue: owner field → (its place's deadline, epoch ms; it is the head).
        places: HashMap<String, (f64, bool)>,
    },
    Permits {
        available: Option<i64>,
        /// Permit id (hex) → deadline (epoch ms).
        scores: HashMap<String, f64>,
    },
}

/// A failed check.
#[derive(Clone, Debug)]
struct Violation {
    /// The check and the kind it failed on: the same signature again counts as the same failure.
    sig: String,
    detail: String,
    /// The step after which it was found (`None`: at the end of the case).
    step: Option<usize>,
}

/// One read of every name, atomic (one script): per name `{fields, pttl, reads}` or
/// `{available, ids and deadlines}`. Permit ids are raw bytes, turned into hex here.
const SNAPSHOT: &str = r#"
local out = {}
for i = 1, #ARGV do
  local key, aux = KEYS[2 * i - 1], KEYS[2 * i]
  if ARGV[i] == 'p' then
    local z = redis.call('zrange', aux, 0, -1, 'withscores')
    local ids = {}
    for j = 1, #z, 2 do
      ids[#ids + 1] = (string.gsub(z[j], '.', function(ch) return string.format('%02x', string.byte(ch)) end))
      ids[#ids + 1] = z[j + 1]
    end
    local n = redis.call('get', key)
    out[i] = {n or '', ids}
  else
    local h = redis.call('hgetall', key)
    local reads = {}
    if ARGV[i] == 'rw' then
      for j = 1, #h, 2 do
        local count = tonumber(h[j + 1])
        if count then
          local best = -2
          for k = 1, count do
            local ttl = redis.call('pttl', aux .. ':' .. h[j] .. ':rwlock_timeout:' .. k)
            if ttl == -1 then ttl = 999999999999 end
            if ttl > best then best = ttl end
          end
          reads[#reads + 1] = h[j]
          reads[#reads + 1] = best
        end
      end
    end
    local places = {}
    if ARGV[i] == 'f' then
      local q = redis.call('lindex', 'redisson_lock_queue:{' .. key .. '}', 0)
      local z = redis.call('zrange', aux, 0, -1, 'withscores')
      for j = 1, #z, 2 do
        places[#places + 1] = z[j]
        places[#places + 1] = (z[j] == q) and ('h' .. z[j + 1]) or z[j + 1]
      end
    end
    out[i] = {h, redis.call('pttl', key), reads, places}
  end
end
return out
"#;

/// Epoch milliseconds of monotonic instant `t`.
fn epoch_ms(t: Instant) -> f64 {
    let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    let now = Instant::now();
    let wall_ms = wall.as_secs_f64() * 1000.0;
    if t >= now {
        wall_ms + (t - now).as_secs_f64() * 1000.0
    } else {
        wall_ms - (now - t).as_secs_f64() * 1000.0
    }
}

fn config() -> Config {
    common::config()
        .lock_watchdog_timeout(WATCHDOG)
        .timeout(COMMAND_TIMEOUT)
        .retry_delay(Duration::from_millis(100))
        .reconnect_max_delay(Duration::from_millis(100))
        .fair_lock_wait_timeout(FAIR_WAIT)
}

async fn admin(port: u16) -> FredClient {
    let perf = PerformanceConfig {
        default_command_timeout: Duration::from_secs(1),
        ..Default::default()
    };
    let redis = FredClient::new(
        FredConfig::from_url(&format!("redis://127.0.0.1:{port}")).unwrap(),
        Some(perf),
        None,
        Some(ReconnectPolicy::new_constant(0, 50)),
    );
    redis.init().await.expect("admin connection");
    redis
}

async fn cmd(redis: &FredClient, name: &'static str, args: Vec<Value>) -> Option<Value> {
    let call = redis.custom(
        CustomCommand::new_static(name, ClusterHash::FirstKey, false),
        args,
    );
    match tokio::time::timeout(Duration::from_secs(2), call).await {
        Ok(Ok(v)) => Some(v),
        _ => None,
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Integer(i) => Some(*i),
        other => other.as_string().and_then(|s| s.parse().ok()),
    }
}

fn array(v: Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a,
        Value::Null => Vec::new(),
        other => vec![other],
    }
}

fn pairs(v: Value) -> Vec<(String, Value)> {
    let mut out = Vec::new();
    let mut it = array(v).into_iter();
    while let (Some(k), Some(v)) = (it.next(), it.next()) {
        out.push((k.as_string().unwrap_or_default(), v));
    }
    out
}

/// A run of one case against a server of its own.
struct Run<'a> {
    case: &'a Case,
    t0: Instant,
    server: RedisServer,
    proxies: Vec<Proxy>,
    clients: Vec<Client>,
    admin: FredClient,
    names: Vec<String>,
    holdings: Vec<Holding>,
    pending: Vec<Pending>,
    /// Kept holds (`guard.keep()`) per owner and half: whether each was a watchdog hold.
    kept: HashMap<Who, Vec<bool>>,
    kept_permits: HashMap<Who, Vec<PermitId>>,
    faults: Faults,
    /// Stalls of the runtime or of a read: (seen at, length).
    lag: Arc<Mutex<Vec<(Instant, Duration)>>>,
    lag_task: JoinHandle<()>,
    tracks: Vec<Track>,
    /// Owner fields a `lock.unlock()` released a part of while a guard of theirs was out: which
    /// part it takes is the crate's choice, so those guards' losses are not judged.
    /// A Java-style unlock of an owner (name, owner field) was answered at this instant (the
    /// latest): the guards of the owner whose acquisition began before are excused (see
    /// `handle_excused`).
    handle_unlocked: HashMap<(usize, String), Instant>,
    restarted_empty: bool,
    /// Owner fields of a name a guard of which was dropped: until its client's background
    /// releases are done, the other guards of that hold learn what that release did (a TTL set,
    /// the hold freed when its other parts had ended) only when its reply comes (the in-flight
    /// window of a release, not a stale deadline).
    dropped: HashSet<(usize, String)>,
    /// Fenced holds released: name, token, when.
    released_tokens: Vec<(usize, u64, Instant)>,
    trace: Vec<String>,
    /// The step under way (index into `keep`).
    at: Option<usize>,
}

type BoxFut = Pin<Box<dyn Future<Output = Acquired> + Send>>;

/// The acquisition future of `how` on `lock`.
fn acquisition<K: Kind>(lock: &Lock<K>, how: How, lease: Option<Duration>) -> BoxFut {
    let erase = |r: redisson_lock::Result<Option<redisson_lock::Guard<K>>>| {
        r.map(|g| g.map(|g| G::Lock(g.erase())))
    };
    match (how, lease) {
        (How::Lock, None) => {
            let f = lock.lock();
            Box::pin(async move { erase(f.await.map(Some)) })
        }
        (How::Lock, Some(l)) => {
            let f = lock.lock_with_lease(l);
            Box::pin(async move { erase(f.await.map(Some)) })
        }
        (How::Once, None) => {
            let f = lock.try_lock();
            Box::pin(async move { erase(f.await) })
        }
        (How::Once, Some(l)) => {
            let f = lock.try_lock_with_lease(Duration::ZERO, l);
            Box::pin(async move { erase(f.await) })
        }
        (How::For(w), None) => {
            let f = lock.try_lock_for(Duration::from_millis(w as u64));
            Box::pin(async move { erase(f.await) })
        }
        (How::For(w), Some(l)) => {
            let f = lock.try_lock_with_lease(Duration::from_millis(w as u64), l);
            Box::pin(async move { erase(f.await) })
        }
    }
}

impl<'a> Run<'a> {
    async fn start(case: &'a Case) -> Run<'a> {
        let server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
        let mut proxies = Vec::new();
        let mut clients = Vec::new();
        for _ in 0..case.clients {
            let proxy = Proxy::start(server.port()).await;
            let client = Client::connect(&proxy.url(), config())
                .await
                .expect("client through its proxy");
            proxies.push(proxy);
            clients.push(client);
        }
        let admin = admin(server.port()).await;
        let names: Vec<String> = (0..case.families.len())
            .map(|i| format!("explore:{}:n{i}", case.seed))
            .collect();
        for (i, fam) in case.families.iter().enumerate() {
            if *fam == Family::Permits {
                let sem = clients[0].get_permit_expirable_semaphore(&names[i]);
                assert!(sem.try_set_permits(case.permits).await.unwrap());
            }
        }
        let lag = Arc::new(Mutex::new(Vec::new()));
        let lag_task = {
            let lag = lag.clone();
            tokio::spawn(async move {
                loop {
                    let t = Instant::now();
                    tokio::time::sleep(5 * MS).await;
                    let late = t.elapsed().saturating_sub(5 * MS);
                    if late >= 50 * MS {
                        lag.lock().unwrap().push((Instant::now(), late));
                    }
                }
            })
        };
        let now = Instant::now();
        Run {
            case,
            t0: now,
            server,
            proxies,
            clients,
            admin,
            tracks: vec![
                Track {
                    free_since: None,
                    last_busy: now,
                    runs_out: None,
                    expired: false,
                    places: HashMap::new(),
                    left: HashMap::new(),
                };
                names.len()
            ],
            names,
            holdings: Vec::new(),
            pending: Vec::new(),
            kept: HashMap::new(),
            kept_permits: HashMap::new(),
            faults: Faults::default(),
            lag,
            lag_task,
            handle_unlocked: HashMap::new(),
            restarted_empty: false,
            dropped: HashSet::new(),
            released_tokens: Vec::new(),
            trace: Vec::new(),
            at: None,
        }
    }

    fn rel(&self, t: Instant) -> String {
        if t >= self.t0 {
            format!("+{}ms", (t - self.t0).as_millis())
        } else {
            format!("-{}ms", (self.t0 - t).as_millis())
        }
    }

    fn note(&mut self, what: String) {
        let line = format!("{:>8} {what}", self.rel(Instant::now()));
        self.trace.push(line);
    }

    fn family(&self, n: usize) -> Family {
        self.case.families[n]
    }

    fn kind_of(&self, who: &Who) -> String {
        format!("{}{}", self.family(who.n), who.half)
    }

    /// A violation about one hold: its signature also says its lease mode.
    fn hold_violation(&self, check: &str, m: &Meta, detail: String) -> Violation {
        let mode = if m.watchdog { "watchdog" } else { "lease" };
        Violation {
            sig: format!("{check} {} ({mode})", self.kind_of(&m.who)),
            detail,
            step: self.at,
        }
    }

    fn violation(&self, check: &str, who: &Who, detail: String) -> Violation {
        Violation {
            sig: format!("{check} {}", self.kind_of(who)),
            detail,
            step: self.at,
        }
    }

    /// The longest stall seen in `[from, to]`.
    fn lag_in(&self, from: Instant, to: Instant) -> Duration {
        self.lag
            .lock()
            .unwrap()
            .iter()
            .filter(|(at, len)| *at >= from && at.checked_sub(*len).is_none_or(|s| s <= to))
            .map(|(_, len)| *len)
            .max()
            .unwrap_or_default()
    }

    /// Whether the hold of `h` has a part the watchdog renews (a guard of it or a kept part).
    fn renewed(&self, h: &Meta) -> bool {
        h.watchdog
            || self
                .holdings
                .iter()
                .any(|o| o.meta.who.n == h.who.n && o.meta.field == h.field && o.meta.watchdog)
            || (self.family(h.who.n) != Family::Permits
                && self.kept.get(&h.who).is_some_and(|k| k.iter().any(|&w| w)))
    }

    /// A `DEL` of the guard's name may have deleted its hold, and the crate may not know yet:
    /// until a renewal could have found it gone, or, for a hold nothing renews, ever (its
    /// deadline ends it).
    fn del_excused(&self, h: &Meta, now: Instant) -> bool {
        let renewed = self.renewed(h);
        self.faults.dels.iter().any(|&(n, sent, done)| {
            n == h.who.n
                && sent <= now
                && done >= h.began
                && (!renewed || now <= done + renewal_bound())
        })
    }

    /// What explains a guard told `InDoubt` or `Lost`: a fault of its client or a restart since
    /// shortly before it was taken (a hold is born in a doubt under way), a `DEL` of its name, a
    /// `lock.unlock()` of its owner's while it was out, or a stall of the runtime.
    fn loss_explained(&self, h: &Meta, now: Instant) -> Option<String> {
        if self.faults.any_in(
            Some(h.who.c),
            h.began.checked_sub(WATCHDOG).unwrap_or(h.began),
            now,
        ) {
            return Some("a fault of its client or a restart".into());
        }
        if self
            .faults
            .dels
            .iter()
            .any(|&(n, sent, done)| n == h.who.n && sent <= now && done >= h.began)
        {
            return Some("a DEL of its name".into());
        }
        if self.handle_excused(h.who.n, &h.field, h.began) {
            return Some("a lock.unlock() of its owner".into());
        }
        let lag = self.lag_in(h.began, now);
        if lag >= LAG_EXCUSE {
            return Some(format!("a stall of {lag:?}"));
        }
        None
    }

    // -----------------------------------------------------------------------------------------
    // Steps

    async fn step(&mut self, index: usize, step: &Step) -> Result<(), Violation> {
        self.at = Some(index);
        self.note(format!("step {index}: {step}"));
        match step {
            Step::Acquire { who, how, lease } => {
                let lease = lease.map(|ms| Duration::from_millis(ms as u64));
                self.acquire(index, *who, *how, lease).await?;
            }
            Step::Unlock { who, pick } => {
                if let Some(i) = self.select(who, *pick) {
                    let h = self.holdings.remove(i);
                    self.unlock(h).await?;
                } else {
                    self.note("  (no guard)".into());
                }
            }
            Step::Drop { who, pick } => {
                if let Some(i) = self.select(who, *pick) {
                    let h = self.holdings.remove(i);
                    self.note(format!("  dropped the guard of step {}", h.meta.step));
                    self.dropped.insert((h.meta.who.n, h.meta.field.clone()));
                    drop(h);
                } else {
                    self.note("  (no guard)".into());
                }
            }
            Step::Keep { who, pick } => {
                if let Some(i) = self.select(who, *pick) {
                    let h = self.holdings.remove(i);
                    self.note(format!("  kept the guard of step {}", h.meta.step));
                    match h.guard {
                        G::Lock(g) => {
                            self.kept
                                .entry(h.meta.who)
                                .or_default()
                                .push(h.meta.watchdog);
                            g.keep();
                        }
                        G::Permit(g) => {
                            let id = g.keep();
                            self.kept_permits.entry(h.meta.who).or_default().push(id);
                        }
                    }
                } else {
                    self.note("  (no guard)".into());
                }
            }
            Step::HandleUnlock { who } => self.handle_unlock(*who).await?,
            Step::Wait(ms) => self.pass(Duration::from_millis(*ms as u64)).await?,
            Step::Freeze { c, ms } => {
                self.proxies[*c].freeze();
                self.faults.client.push((*c, Instant::now(), None));
                let i = self.faults.client.len() - 1;
                let held = self.pass(Duration::from_millis(*ms as u64)).await;
                self.proxies[*c].unfreeze();
                self.faults.client[i].2 = Some(Instant::now());
                held?;
            }
            Step::Reset(c) => {
                let now = Instant::now();
                self.proxies[*c].reset();
                self.faults.client.push((*c, now, Some(Instant::now())));
            }
            Step::Del(n) => {
                if self.family(*n) == Family::Permits {
                    self.note("  (a semaphore's keys are not deleted)".into());
                } else {
                    let sent = Instant::now();
                    let _: Option<i64> = self.admin.del(self.names[*n].as_str()).await.ok();
                    self.faults.dels.push((*n, sent, Instant::now()));
                    // The kept holds of the name are gone: a user who knows it does not
                    // unlock them (a handle's unlock counts as Java's: it would release
                    // another hold of the owner, one a guard stands for).
                    self.kept.retain(|who, _| who.n != *n);
                }
            }
            Step::Restart { empty } => {
                let start = Instant::now();
                self.faults.server.push((start, None));
                let i = self.faults.server.len() - 1;
                let server = &mut self.server;
                tokio::task::block_in_place(|| {
                    if *empty {
                        server.restart_empty()
                    } else {
                        server.restart()
                    }
                });
                if *empty {
                    self.restarted_empty = true;
                    // Every kept hold is gone (see `Step::Del`).
                    self.kept.clear();
                    self.set_permits_again().await;
                }
                self.faults.server[i].1 = Some(Instant::now());
            }
        }
        self.round().await
    }

    /// A semaphore lost with the data is set again (as its owner would), announced.
    async fn set_permits_again(&mut self) {
        for (i, fam) in self.case.families.iter().enumerate() {
            if *fam != Family::Permits {
                continue;
            }
            let name = self.names[i].clone();
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                let set = cmd(
                    &self.admin,
                    "SET",
                    vec![
                        name.as_str().into(),
                        (self.case.permits as i64).into(),
                        "NX".into(),
                    ],
                )
                .await;
                if set.is_some() {
                    let _: Result<i64, _> = self
                        .admin
                        .publish(format!("redisson_sc:{{{name}}}"), self.case.permits as i64)
                        .await;
                    break;
                }
                tokio::time::sleep(50 * MS).await;
            }
        }
    }

    /// The `pick`-th guard of `who` (permits: of its client and name), in the order taken.
    fn select(&self, who: &Who, pick: usize) -> Option<usize> {
        let matching: Vec<usize> = self
            .holdings
            .iter()
            .enumerate()
            .filter(|(_, h)| h.meta.who == *who)
            .map(|(i, _)| i)
            .collect();
        (!matching.is_empty()).then(|| matching[pick % matching.len()])
    }

    async fn acquire(
        &mut self,
        index: usize,
        who: Who,
        how: How,
        lease: Option<Duration>,
    ) -> Result<(), Violation> {
        let client = self.clients[who.c].clone();
        let name = self.names[who.n].clone();
        let owner = Owner::from_id(1000 + who.o as u64);
        let fut: BoxFut = match self.family(who.n) {
            Family::Reentrant => acquisition(&client.get_lock_with_owner(&name, owner), how, lease),
            Family::Fair => acquisition(&client.get_fair_lock_with_owner(&name, owner), how, lease),
            Family::Fenced => {
                acquisition(&client.get_fenced_lock_with_owner(&name, owner), how, lease)
            }
            Family::ReadWrite => {
                let rw = client.get_read_write_lock_with_owner(&name, owner);
                match who.half {
                    Half::Write => acquisition(rw.write_lock(), how, lease),
                    _ => acquisition(rw.read_lock(), how, lease),
                }
            }
            Family::Permits => {
                let sem = client.get_permit_expirable_semaphore(&name);
                Box::pin(async move {
                    let g = match how {
                        How::Lock => sem.acquire(lease).await.map(Some),
                        How::Once => sem.try_acquire(lease).await,
                        How::For(w) => {
                            sem.try_acquire_for(Duration::from_millis(w as u64), lease)
                                .await
                        }
                    };
                    g.map(|g| g.map(G::Permit))
                })
            }
        };
        let began = Instant::now();
        let deadline = match how {
            How::Lock => None,
            How::Once => Some(began),
            How::For(w) => Some(began + Duration::from_millis(w as u64)),
        };
        self.pending.push(Pending {
            step: index,
            who,
            lease,
            began,
            deadline,
            task: tokio::spawn(fut),
        });
        if !matches!(how, How::For(_)) {
            // Waits for it a moment, checking.
            let until = began + SETTLE;
            while Instant::now() < until
                && self
                    .pending
                    .iter()
                    .any(|p| p.step == index && !p.task.is_finished())
            {
                self.round().await?;
                tokio::time::sleep(POLL).await;
            }
        }
        Ok(())
    }

    async fn unlock(&mut self, h: Holding) -> Result<(), Violation> {
        let Holding { meta, guard, .. } = h;
        let (state, until) = (guard.state(), guard.valid_until());
        // A background release of the same hold in flight may end it before its other guards
        // learn so (see `dropped`).
        let in_flight = self.clients[meta.who.c].stats().background_releases > 0
            && self.dropped.contains(&(meta.who.n, meta.field.clone()));
        let sent = Instant::now();
        let found_nothing = match guard {
            G::Lock(g) => {
                let outcome = tokio::time::timeout(Duration::from_secs(10), g.unlock()).await;
                self.note(format!(
                    "  unlock of step {}'s guard: {outcome:?}",
                    meta.step
                ));
                matches!(&outcome, Ok(Err(e)) if e.kind() == ErrorKind::NotHeld)
            }
            G::Permit(g) => {
                let outcome = tokio::time::timeout(Duration::from_secs(10), g.release()).await;
                self.note(format!(
                    "  release of step {}'s permit: {outcome:?}",
                    meta.step
                ));
                matches!(&outcome, Ok(Ok(false)))
            }
        };
        self.released(&meta);
        if found_nothing && !in_flight && state == HoldState::Held && until > sent + 250 * MS {
            let now = Instant::now();
            if !self.del_excused(&meta, now) && self.loss_explained(&meta, now).is_none() {
                // What the server holds now: a hold left behind, or none.
                let name = self.names[meta.who.n].as_str();
                let fields = cmd(&self.admin, "HGETALL", vec![name.into()]).await;
                let pttl = cmd(&self.admin, "PTTL", vec![name.into()]).await;
                return Err(self.hold_violation(
                    "unlock-found-nothing",
                    &meta,
                    format!(
                        "step {}'s guard ({}) said Held until {} ({:?} ahead) when its unlock \
                         was sent at {}, and the unlock found nothing to release; the server \
                         now: {:?}, pttl {:?}",
                        meta.step,
                        meta.field,
                        self.rel(until),
                        until - sent,
                        self.rel(sent),
                        fields.map(pairs),
                        pttl.as_ref().and_then(int)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A fenced hold released now: every later acquisition's token must be higher.
    fn released(&mut self, meta: &Meta) {
        if let Some(token) = meta.token {
            self.released_tokens
                .push((meta.who.n, token, Instant::now()));
        }
    }

    async fn handle_unlock(&mut self, who: Who) -> Result<(), Violation> {
        let client = self.clients[who.c].clone();
        let name = self.names[who.n].clone();
        let owner = Owner::from_id(1000 + who.o as u64);
        let bound = Duration::from_secs(10);
        if self.family(who.n) == Family::Permits {
            let Some(id) = self.kept_permits.get_mut(&who).and_then(Vec::pop) else {
                self.note("  (no kept permit)".into());
                return Ok(());
            };
            let sem = client.get_permit_expirable_semaphore(&name);
            let outcome = tokio::time::timeout(bound, sem.try_release(id)).await;
            self.note(format!("  release({id}): {outcome:?}"));
            return Ok(());
        }
        let Some(parts) = self.kept.get_mut(&who).filter(|p| !p.is_empty()) else {
            self.note("  (no kept hold)".into());
            return Ok(());
        };
        // The crate lets a renewed part go first (`Watchdog::let_go`).
        let i = parts.iter().position(|&w| w).unwrap_or(0);
        parts.remove(i);
        let field = format!("{}:{}", self.clients[who.c].id(), 1000 + who.o);
        let field = match who.half {
            Half::Write => format!("{field}:write"),
            _ => field,
        };
        let outcome = match self.family(who.n) {
            Family::Reentrant => {
                tokio::time::timeout(bound, client.get_lock_with_owner(&name, owner).unlock()).await
            }
            Family::Fair => {
                tokio::time::timeout(
                    bound,
                    client.get_fair_lock_with_owner(&name, owner).unlock(),
                )
                .await
            }
            Family::Fenced => {
                tokio::time::timeout(
                    bound,
                    client.get_fenced_lock_with_owner(&name, owner).unlock(),
                )
                .await
            }
            _ => {
                let rw = client.get_read_write_lock_with_owner(&name, owner);
                match who.half {
                    Half::Write => tokio::time::timeout(bound, rw.write_lock().unlock()).await,
                    _ => tokio::time::timeout(bound, rw.read_lock().unlock()).await,
                }
            }
        };
        self.note(format!("  lock.unlock(): {outcome:?}"));
        // The owner's guards and acquisitions under way until now are excused from here on.
        self.handle_unlocked.insert((who.n, field), Instant::now());
        Ok(())
    }

    /// A Java-style unlock counts as Java's (docs/locks.md): it releases one hold of its owner,
    /// whichever. When the kept hold it was meant for is gone (a `DEL`, a restart, its lease
    /// run out), it may take a hold one of the owner's guards stands for, and the client
    /// cannot tell which guard: the guards of that owner on that name whose acquisition began
    /// before the unlock's answer are not judged against the server (the guards acquired after
    /// are).
    fn handle_excused(&self, n: usize, field: &str, began: Instant) -> bool {
        self.handle_unlocked
            .get(&(n, field.to_string()))
            .is_some_and(|&t| began <= t)
    }

    /// Lets `d` pass, checking every `POLL`.
    async fn pass(&mut self, d: Duration) -> Result<(), Violation> {
        let until = Instant::now() + d;
        loop {
            self.round().await?;
            let now = Instant::now();
            if now >= until {
                return Ok(());
            }
            tokio::time::sleep(POLL.min(until - now)).await;
        }
    }

    // -----------------------------------------------------------------------------------------
    // Checks

    /// Takes the acquisitions that finished.
    async fn harvest(&mut self) -> Result<(), Violation> {
        let mut i = 0;
        while i < self.pending.len() {
            if !self.pending[i].task.is_finished() {
                i += 1;
                continue;
            }
            let mut p = self.pending.remove(i);
            let result = (&mut p.task).await;
            match result {
                Err(e) => {
                    return Err(self.violation(
                        "task-panicked",
                        &p.who,
                        format!("step {}'s acquisition task: {e}", p.step),
                    ))
                }
                Ok(Ok(Some(guard))) => {
                    let (field, watchdog, token) = match &guard {
                        G::Lock(g) => (g.owner_field().to_string(), g.is_watchdog(), g.token()),
                        G::Permit(g) => (g.id().to_string(), g.is_watchdog(), None),
                    };
                    self.note(format!(
                        "  step {}'s acquisition ({}): held, {field}{}",
                        p.step,
                        p.who,
                        token.map(|t| format!(", token {t}")).unwrap_or_default()
                    ));
                    if let Some(t) = token {
                        self.check_token(&p, t)?;
                    }
                    self.holdings.push(Holding {
                        meta: Meta {
                            token,
                            step: p.step,
                            who: p.who,
                            field,
                            watchdog,
                            lease: p.lease,
                            began: p.began,
                        },
                        guard,
                        loss_seen: false,
                    });
                }
                Ok(Ok(None)) => self.note(format!(
                    "  step {}'s acquisition ({}): not acquired",
                    p.step, p.who
                )),
                Ok(Err(e)) => self.note(format!(
                    "  step {}'s acquisition ({}): error {e}",
                    p.step, p.who
                )),
            }
        }
        Ok(())
    }

    /// A fencing token is never given twice, and is above every token released before the
    /// acquisition began (while the counter survives: not across an empty restart).
    fn check_token(&mut self, p: &Pending, token: u64) -> Result<(), Violation> {
        if !self.restarted_empty {
            let repeated = self
                .holdings
                .iter()
                .any(|h| h.meta.who.n == p.who.n && h.meta.token == Some(token))
                || self
                    .released_tokens
                    .iter()
                    .any(|&(n, t, _)| n == p.who.n && t == token);
            let before = self
                .released_tokens
                .iter()
                .filter(|&&(n, _, at)| n == p.who.n && at < p.began)
                .map(|&(_, t, _)| t)
                .max();
            if repeated || before.is_some_and(|b| b >= token) {
                return Err(self.violation(
                    "token-not-increasing",
                    &p.who,
                    format!(
                        "step {}'s acquisition got token {token}; repeated: {repeated}, \
                         highest released before it began: {before:?}",
                        p.step
                    ),
                ));
            }
        }
        Ok(())
    }

    fn states(&self) -> Vec<(HoldState, Instant)> {
        self.holdings
            .iter()
            .map(|h| (h.guard.state(), h.guard.valid_until()))
            .collect()
    }

    /// One round of checks: the guards' states, the server, the guards' states again.
    async fn round(&mut self) -> Result<(), Violation> {
        self.harvest().await?;
        let before = self.states();
        let sent = Instant::now();
        let Some(snap) = self.snapshot().await else {
            return Ok(()); // the server is down (a restart)
        };
        let answered = Instant::now();
        if answered - sent >= 150 * MS {
            self.lag.lock().unwrap().push((answered, answered - sent));
        }
        let releasing: Vec<bool> = self
            .clients
            .iter()
            .map(|c| c.stats().background_releases > 0)
            .collect();
        let after = self.states();
        self.check_held(&snap, &before, &after, answered, &releasing)?;
        self.check_exclusion(&before, &after)?;
        self.check_losses(&after).await?;
        self.check_wakeups(&snap, sent, answered).await
    }

    async fn snapshot(&self) -> Option<Vec<NameSnap>> {
        let mut args: Vec<Value> = vec![SNAPSHOT.into(), ((2 * self.names.len()) as i64).into()];
        let mut kinds = Vec::new();
        for (i, name) in self.names.iter().enumerate() {
            let (aux, kind) = match self.family(i) {
                Family::Permits => (format!("{{{name}}}:timeout"), "p"),
                Family::ReadWrite => (format!("{{{name}}}"), "rw"),
                Family::Fair => (format!("redisson_lock_timeout:{{{name}}}"), "f"),
                _ => (name.clone(), "l"),
            };
            args.push(name.as_str().into());
            args.push(aux.into());
            kinds.push(kind);
        }
        args.extend(kinds.into_iter().map(Value::from));
        let reply = cmd(&self.admin, "EVAL", args).await?;
        let mut out = Vec::new();
        for (i, per) in array(reply).into_iter().enumerate() {
            let mut per = array(per).into_iter();
            if self.family(i) == Family::Permits {
                let available = per.next().and_then(|v| int(&v));
                let scores = per
                    .next()
                    .map(pairs)
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|(id, s)| Some((id, s.as_string()?.parse::<f64>().ok()?)))
                    .collect();
                out.push(NameSnap::Permits { available, scores });
            } else {
                let fields = per
                    .next()
                    .map(pairs)
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|(f, v)| Some((f, int(&v)?)))
                    .collect();
                let pttl = per.next().and_then(|v| int(&v)).unwrap_or(-2);
                let reads = per
                    .next()
                    .map(pairs)
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|(f, v)| Some((f, int(&v)?)))
                    .collect();
                let places = per
                    .next()
                    .map(pairs)
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|(f, v)| {
                        let v = v.as_string()?;
                        let (head, deadline) = match v.strip_prefix('h') {
                            Some(d) => (true, d),
                            None => (false, v.as_str()),
                        };
                        Some((f, (deadline.parse::<f64>().ok()?, head)))
                    })
                    .collect();
                out.push(NameSnap::Lock {
                    fields,
                    pttl,
                    reads,
                    places,
                });
            }
        }
        (out.len() == self.names.len()).then_some(out)
    }

    /// Whether holding `i` said `Held` on both sides of the server's read, and until when (the
    /// earlier of the two: a deadline moved in between was moved by a call the read may
    /// precede).
    fn held_across(
        &self,
        i: usize,
        before: &[(HoldState, Instant)],
        after: &[(HoldState, Instant)],
        at: Instant,
    ) -> Option<Instant> {
        let ((sb, vb), (sa, va)) = (before[i], after[i]);
        let until = vb.min(va);
        (sb == HoldState::Held && sa == HoldState::Held && until > at).then_some(until)
    }

    /// Check 1: a `Held` guard's hold is on the server and outlives its deadline.
    fn check_held(
        &self,
        snap: &[NameSnap],
        before: &[(HoldState, Instant)],
        after: &[(HoldState, Instant)],
        answered: Instant,
        releasing: &[bool],
    ) -> Result<(), Violation> {
        let mut guards: HashMap<(usize, &str), (usize, &Meta)> = HashMap::new();
        for (i, h) in self.holdings.iter().enumerate() {
            let Some(until) = self.held_across(i, before, after, answered) else {
                continue;
            };
            let m = &h.meta;
            // A `DEL`, or a background release of the same hold in flight (its other guards
            // learn what it did when its reply comes).
            if self.del_excused(m, answered)
                || (releasing[m.who.c] && self.dropped.contains(&(m.who.n, m.field.clone())))
                || self.handle_excused(m.who.n, &m.field, m.began)
            {
                continue;
            }
            let says = format!(
                "step {}'s guard ({}, {}) says Held until {} ({}ms ahead of the reply at {})",
                m.step,
                m.field,
                m.lease.map_or("watchdog".to_string(), |l| format!(
                    "lease {}ms",
                    l.as_millis()
                )),
                self.rel(until),
                (until - answered).as_millis(),
                self.rel(answered)
            );
            match &snap[m.who.n] {
                NameSnap::Lock {
                    fields,
                    pttl,
                    reads,
                    ..
                } => {
                    if fields.get(&m.field).is_none_or(|&c| c <= 0) {
                        return Err(self.hold_violation(
                            "held-without-field",
                            m,
                            format!("{says}, but its field is not on the server: {fields:?}, pttl {pttl}"),
                        ));
                    }
                    guards.entry((m.who.n, &m.field)).or_insert((0, m)).0 += 1;
                    if *pttl >= 0 && answered + Duration::from_millis(*pttl as u64) < until {
                        return Err(self.hold_violation(
                            "ttl-below-deadline",
                            m,
                            format!(
                                "{says}, but the key expires by {} (pttl {pttl}); fields {fields:?}",
                                self.rel(answered + Duration::from_millis(*pttl as u64))
                            ),
                        ));
                    }
                    if m.who.half == Half::Read {
                        let best = reads.get(&m.field).copied().unwrap_or(-2);
                        if best < 0 || answered + Duration::from_millis(best as u64) < until {
                            return Err(self.hold_violation(
                                "read-ttl-below-deadline",
                                m,
                                format!(
                                    "{says}, but its longest read timeout key has pttl {best}; \
                                     fields {fields:?}"
                                ),
                            ));
                        }
                    }
                }
                NameSnap::Permits { scores, .. } => match scores.get(&m.field) {
                    None => {
                        return Err(self.hold_violation(
                            "permit-missing",
                            m,
                            format!("{says}, but its id is not in the timeout set: {scores:?}"),
                        ))
                    }
                    Some(&score) if score < epoch_ms(until).floor() - 1.0 => {
                        return Err(self.hold_violation(
                            "permit-deadline",
                            m,
                            format!(
                                "{says}, but its deadline on the server is {:.0} ms before that",
                                epoch_ms(until) - score
                            ),
                        ))
                    }
                    _ => {}
                },
            }
        }
        for ((n, field), (count, m)) in guards {
            if let NameSnap::Lock { fields, .. } = &snap[n] {
                let on_server = fields.get(field).copied().unwrap_or(0);
                if on_server < count as i64 {
                    return Err(self.violation(
                        "count-below-guards",
                        &m.who,
                        format!(
                            "{count} guards of {field} on n{n} say Held, the server counts \
                             {on_server}"
                        ),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Check 2: no two owners inside exclusive holds at once (readers share; a writer's own
    /// reads are its own); no more permits held than there are.
    fn check_exclusion(
        &self,
        before: &[(HoldState, Instant)],
        after: &[(HoldState, Instant)],
    ) -> Result<(), Violation> {
        let now = Instant::now();
        for n in 0..self.names.len() {
            let held: Vec<&Meta> = self
                .holdings
                .iter()
                .enumerate()
                .filter(|(i, h)| {
                    h.meta.who.n == n
                        && self.held_across(*i, before, after, now).is_some()
                        && !self.del_excused(&h.meta, now)
                })
                .map(|(_, h)| &h.meta)
                .collect();
            let Some(first) = held.first() else { continue };
            let list = || {
                held.iter()
                    .map(|m| format!("step {}'s {} ({})", m.step, m.who, m.field))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let broken = match self.family(n) {
                Family::Permits => held.len() as u64 > self.case.permits,
                Family::ReadWrite => {
                    let writers: HashSet<&str> = held
                        .iter()
                        .filter(|m| m.who.half == Half::Write)
                        .map(|m| m.field.trim_end_matches(":write"))
                        .collect();
                    writers.len() > 1
                        || writers.iter().next().is_some_and(|w| {
                            held.iter()
                                .any(|m| m.who.half == Half::Read && m.field != *w)
                        })
                }
                _ => held.iter().any(|m| m.field != first.field),
            };
            if broken {
                return Err(self.violation(
                    "exclusion",
                    &first.who,
                    format!("at {} these all say Held: {}", self.rel(now), list()),
                ));
            }
        }
        Ok(())
    }

    /// Check 5: a guard told `InDoubt` or `Lost` has a fault (or its own lease's end) to explain
    /// it. A candidate is looked at again after a moment: the lag monitor may not have woken
    /// yet after a stall of the whole process.
    async fn check_losses(&mut self, after: &[(HoldState, Instant)]) -> Result<(), Violation> {
        let now = Instant::now();
        let mut suspects = Vec::new();
        for (i, h) in self.holdings.iter().enumerate() {
            let state = after[i].0;
            if h.loss_seen || state == HoldState::Held {
                continue;
            }
            let m = &h.meta;
            let own_end = m.lease.map(|l| m.began + l.saturating_sub(drift(l)));
            let explained = (state == HoldState::Lost && own_end.is_some_and(|e| now >= e))
                || self.loss_explained(m, now).is_some();
            suspects.push((i, state, explained));
        }
        if suspects.iter().any(|s| !s.2) {
            tokio::time::sleep(40 * MS).await;
        }
        for (i, state, explained) in suspects {
            let m = self.holdings[i].meta.clone();
            if explained || self.loss_explained(&m, Instant::now()).is_some() {
                self.holdings[i].loss_seen = true;
                continue;
            }
            let check = match state {
                HoldState::InDoubt => "unexplained-in-doubt",
                _ => "unexplained-loss",
            };
            return Err(self.hold_violation(
                check,
                &m,
                format!(
                    "step {}'s guard ({}, {}) was {state:?} at {}, {}ms after its acquisition \
                     began, with no fault, DEL or stall since to explain it (valid_until {})",
                    m.step,
                    m.field,
                    m.lease.map_or("watchdog".to_string(), |l| format!(
                        "lease {}ms",
                        l.as_millis()
                    )),
                    self.rel(now),
                    (now - m.began).as_millis(),
                    self.rel(self.holdings[i].guard.valid_until())
                ),
            ));
        }
        Ok(())
    }

    /// Check 3: a waiter with time left does not sleep on a name that a release freed on the
    /// server longer than `WAKE_BOUND` ago, unless a `DEL` freed it (nothing is published), a
    /// fault may have held up a release's message or a renewal since shortly before it was
    /// last seen busy, or the runtime stalled. A lock whose TTL ran out was not freed by a
    /// release: an expiry publishes nothing (Redisson's protocol), and a waiter sleeps out the
    /// TTL it last read, which a partial release may have shortened since (Redisson's re-arm
    /// does too); only a lock found free before the TTL last seen could run out is judged.
    async fn check_wakeups(
        &mut self,
        snap: &[NameSnap],
        sent: Instant,
        answered: Instant,
    ) -> Result<(), Violation> {
        for (n, s) in snap.iter().enumerate() {
            let free = match s {
                NameSnap::Lock { pttl, .. } => *pttl == -2,
                NameSnap::Permits { available, .. } => available.is_some_and(|a| a > 0),
            };
            let track = &mut self.tracks[n];
            if let NameSnap::Lock { places, .. } = s {
                let seen = epoch_ms(sent);
                for (f, &(deadline, head)) in &track.places {
                    if !places.contains_key(f) {
                        track.left.insert(f.clone(), (deadline, head, seen));
                    }
                }
                for f in places.keys() {
                    track.left.remove(f);
                }
                track.places = places.clone();
            }
            if !free {
                if track.free_since.take().is_some() {
                    track.runs_out = None; // busy again: a new hold
                }
                track.last_busy = sent;
                match s {
                    NameSnap::Lock { pttl, .. } if *pttl >= 3 => {
                        track.runs_out = Some(sent + Duration::from_millis(*pttl as u64));
                    }
                    // The last 3 ms of a TTL (or `PEXPIRE 1`): the earlier reading stands.
                    NameSnap::Lock { pttl, .. } if *pttl >= 0 => {}
                    _ => track.runs_out = None,
                }
                continue;
            }
            if track.free_since.is_none() {
                track.free_since = Some(answered);
                // Found free no earlier than the TTL last seen could run out: it expired.
                track.expired = track.runs_out.is_some_and(|e| answered + 2 * MS >= e);
            }
            let since = track.free_since.unwrap_or(answered);
            let (last_busy, runs_out) = (track.last_busy, track.runs_out);
            if track.expired || sent < since + WAKE_BOUND {
                continue;
            }
            let Some(p) = self.pending.iter().find(|p| {
                p.who.n == n
                    && !p.task.is_finished()
                    && sent >= p.began + WAKE_BOUND
                    && p.deadline.is_none_or(|d| d > sent + 20 * MS)
            }) else {
                continue;
            };
            let (who, step, began, deadline) = (p.who, p.step, p.began, p.deadline);
            // A fair lock's waiter whose place is no longer in the queue, and did not leave it
            // as the head with time left (an acquisition of its owner, a bug), was dropped by
            // the queue's protocol: its place ran out (it is kept `fair_lock_wait_timeout` past
            // the lock's expected end, and the holds ran longer). No release can reach it; it
            // finds its way back when it polls again, by the TTL it last read (Redisson's fair
            // lock does the same).
            if self.family(n) == Family::Fair {
                let field = format!("{}:{}", self.clients[who.c].id(), 1000 + who.o);
                let track = &self.tracks[n];
                let dropped = !track.places.contains_key(&field)
                    && track
                        .left
                        .get(&field)
                        .is_none_or(|&(d, head, seen)| !(head && d > seen + 50.0));
                if dropped {
                    continue;
                }
            }
            let explained = |run: &Run| {
                let now = Instant::now();
                run.faults
                    .dels
                    .iter()
                    .any(|&(dn, _, done)| dn == n && done >= last_busy)
                    || run.faults.any_in(
                        None,
                        last_busy.checked_sub(WATCHDOG).unwrap_or(last_busy),
                        now,
                    )
                    || run.lag_in(since.checked_sub(100 * MS).unwrap_or(since), now) >= LAG_EXCUSE
            };
            if explained(self) {
                continue;
            }
            tokio::time::sleep(40 * MS).await;
            if explained(self) {
                continue;
            }
            return Err(self.violation(
                "wake",
                &who,
                format!(
                    "n{n} ({}) has been free on the server since {} ({}ms; last seen busy at \
                     {}, to run out at {}) while step {step}'s waiter {who} (began {}, gives up \
                     {}) still waits",
                    self.family(n),
                    self.rel(since),
                    (sent - since).as_millis(),
                    self.rel(last_busy),
                    runs_out.map_or("no TTL".to_string(), |e| self.rel(e)),
                    self.rel(began),
                    deadline.map_or("never".to_string(), |d| self.rel(d))
                ),
            ));
        }
        Ok(())
    }

    // -----------------------------------------------------------------------------------------
    // The end of a case

    async fn release_quietly(&mut self, h: Holding) {
        let Holding { meta, guard, .. } = h;
        let bound = Duration::from_secs(10);
        let outcome = match guard {
            G::Lock(g) => format!("{:?}", tokio::time::timeout(bound, g.unlock()).await),
            G::Permit(g) => format!("{:?}", tokio::time::timeout(bound, g.release()).await),
        };
        self.released(&meta);
        self.note(format!(
            "  end: released step {}'s guard: {outcome}",
            meta.step
        ));
    }

    /// Check 4: everything released and every task done, the clients keep nothing and the
    /// server keeps no lock key.
    async fn finish(&mut self) -> Result<(), Violation> {
        self.at = None;
        self.note("end: release everything".into());
        while let Some(h) = self.holdings.pop() {
            self.release_quietly(h).await;
        }
        for (who, parts) in std::mem::take(&mut self.kept) {
            for _ in parts {
                self.kept.insert(who, vec![true]);
                self.handle_unlock(who).await?;
            }
        }
        self.kept.clear();
        for (who, ids) in std::mem::take(&mut self.kept_permits) {
            for id in ids {
                self.kept_permits.insert(who, vec![id]);
                self.handle_unlock(who).await?;
            }
        }
        let deadline = Instant::now() + END_BOUND;
        while let Some(p) = self.pending.first() {
            if Instant::now() > deadline {
                let (who, step) = (p.who, p.step);
                return Err(self.violation(
                    "end-waiter",
                    &who,
                    format!(
                        "step {step}'s acquisition ({who}) still waits {END_BOUND:?} after \
                         everything was released"
                    ),
                ));
            }
            self.round().await?;
            while let Some(h) = self.holdings.pop() {
                self.release_quietly(h).await;
            }
            tokio::time::sleep(POLL).await;
        }
        self.round().await?;
        let deadline = Instant::now() + END_BOUND;
        loop {
            let busy: Vec<(usize, redisson_lock::Stats)> = self
                .clients
                .iter()
                .map(Client::stats)
                .enumerate()
                .filter(|(_, s)| {
                    s.watchdog_holds
                        + s.subscribed_channels
                        + s.waiters
                        + s.owner_entries
                        + s.wait_lines
                        + s.background_releases
                        > 0
                })
                .collect();
            if busy.is_empty() {
                break;
            }
            if Instant::now() > deadline {
                return Err(Violation {
                    sig: "end-stats".into(),
                    detail: format!("{END_BOUND:?} after the end the clients keep {busy:?}"),
                    step: None,
                });
            }
            self.round().await?;
            tokio::time::sleep(50 * MS).await;
        }
        let deadline = Instant::now() + END_BOUND;
        loop {
            let left = self.leftover_keys().await;
            if left.is_empty() {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(Violation {
                    sig: "end-keys".into(),
                    detail: format!("{END_BOUND:?} after the end the server keeps {left:?}"),
                    step: None,
                });
            }
            tokio::time::sleep(50 * MS).await;
        }
    }

    /// Lock keys left on the server, and semaphores that do not add up to their permits. A
    /// permit whose deadline passed stays in its set until an acquisition reclaims it (Redisson's
    /// rule): it counts as given back.
    async fn leftover_keys(&self) -> Vec<String> {
        let Some(keys) = cmd(&self.admin, "KEYS", vec!["*".into()]).await else {
            return vec!["(the server did not answer KEYS)".into()];
        };
        let now = epoch_ms(Instant::now());
        let mut left = Vec::new();
        for key in array(keys).iter().filter_map(Value::as_string) {
            if key.starts_with("redisson_unlock_latch:") || key.starts_with("redisson_lock_token:")
            {
                continue;
            }
            let permits = self
                .names
                .iter()
                .enumerate()
                .find(|(i, name)| {
                    self.family(*i) == Family::Permits
                        && (key == **name || key == format!("{{{name}}}:timeout"))
                })
                .map(|(_, name)| name.clone());
            let Some(name) = permits else {
                left.push(key);
                continue;
            };
            if key != name {
                continue; // the timeout set: judged with its semaphore below
            }
            let available = cmd(&self.admin, "GET", vec![name.as_str().into()])
                .await
                .and_then(|v| int(&v))
                .unwrap_or(-1);
            let ids = cmd(
                &self.admin,
                "ZRANGE",
                vec![
                    format!("{{{name}}}:timeout").into(),
                    0.into(),
                    (-1).into(),
                    "WITHSCORES".into(),
                ],
            )
            .await
            .map(pairs)
            .unwrap_or_default();
            let live = ids
                .iter()
                .filter(|(_, s)| {
                    s.as_string()
                        .and_then(|s| s.parse::<f64>().ok())
                        .is_none_or(|s| s > now)
                })
                .count();
            let expired = ids.len() - live;
            if live > 0 || available + expired as i64 != self.case.permits as i64 {
                left.push(format!(
                    "{name}: {available} available, {live} live and {expired} expired permits \
                     of {}",
                    self.case.permits
                ));
            }
        }
        left
    }

    async fn teardown(mut self) {
        self.lag_task.abort();
        for p in self.pending.drain(..) {
            p.task.abort();
        }
        for c in &self.clients {
            let _ = tokio::time::timeout(Duration::from_secs(5), c.shutdown()).await;
        }
        self.holdings.clear();
    }
}

// ---------------------------------------------------------------------------------------------
// Exploring, shrinking, reporting

struct Outcome {
    result: Result<(), Violation>,
    trace: Vec<String>,
    took: Duration,
}

/// Runs the steps `keep` of `case` against a server of their own, then (`finish`) the end of
/// the case.
async fn run_case(case: &Case, keep: &[usize], finish: bool) -> Outcome {
    let started = Instant::now();
    let mut run = Run::start(case).await;
    let mut result = Ok(());
    for &i in keep {
        if let Err(v) = run.step(i, &case.steps[i]).await {
            result = Err(v);
            break;
        }
    }
    if result.is_ok() && finish {
        result = run.finish().await;
    }
    if let Err(v) = &result {
        run.note(format!("VIOLATION {}: {}", v.sig, v.detail));
    }
    let trace = std::mem::take(&mut run.trace);
    run.teardown().await;
    Outcome {
        result,
        trace,
        took: started.elapsed(),
    }
}

/// Steps after the one a violation was found at do not matter.
fn cut(keep: Vec<usize>, v: &Violation) -> Vec<usize> {
    match v.step {
        Some(s) => keep.into_iter().filter(|&i| i <= s).collect(),
        None => keep,
    }
}

struct Shrunk {
    keep: Vec<usize>,
    violation: Violation,
    trace: Vec<String>,
    runs: usize,
    took: Duration,
}

/// Removes steps while the case still fails with the same signature (re-run against a live
/// server: a candidate counts only if it fails again), halves of the sequence first, then
/// smaller pieces, down to single steps; stops after `budget`.
async fn shrink(
    case: &Case,
    from: Vec<usize>,
    first: &Violation,
    trace: Vec<String>,
    budget: Duration,
) -> Shrunk {
    let start = Instant::now();
    let mut best = Shrunk {
        keep: cut(from, first),
        violation: first.clone(),
        trace,
        runs: 0,
        took: Duration::ZERO,
    };
    let mut chunk = (best.keep.len() / 2).max(1);
    'outer: loop {
        let mut progressed = false;
        let mut i = 0;
        while i < best.keep.len() {
            if start.elapsed() > budget {
                break 'outer;
            }
            let mut candidate = best.keep.clone();
            candidate.drain(i..(i + chunk).min(best.keep.len()));
            if candidate.is_empty() {
                i += chunk;
                continue;
            }
            // A failure found before the end needs no end to fail again.
            let out = run_case(case, &candidate, first.step.is_none()).await;
            best.runs += 1;
            match out.result {
                Err(v) if v.sig == first.sig => {
                    println!(
                        "  shrink: {} steps still fail ({}, {:?})",
                        candidate.len(),
                        v.sig,
                        out.took
                    );
                    best.keep = cut(candidate, &v);
                    best.violation = v;
                    best.trace = out.trace;
                    progressed = true;
                }
                _ => i += chunk,
            }
        }
        if chunk == 1 {
            if !progressed {
                break;
            }
        } else {
            chunk /= 2;
        }
    }
    best.took = start.elapsed();
    best
}

fn env<T: std::str::FromStr>(name: &str) -> Option<T> {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok())
}

fn report(case: &Case, found_after: Duration, cases: usize, s: &Shrunk) -> String {
    let mut out = format!(
        "EXPLORER FAILURE {} after {:.1}s of exploring ({cases} cases)\n  case {case}\n  {}\n  \
         shrunk in {} runs ({:.0}s) to {} steps:\n",
        s.violation.sig,
        found_after.as_secs_f64(),
        s.violation.detail,
        s.runs,
        s.took.as_secs_f64(),
        s.keep.len()
    );
    for &i in &s.keep {
        out += &format!("    {i:>3}: {}\n", case.steps[i]);
    }
    out += "  trace of the last failing run:\n";
    for line in &s.trace {
        out += &format!("    {line}\n");
    }
    let keep: Vec<String> = s.keep.iter().map(usize::to_string).collect();
    out += &format!(
        "  replay: EXPLORER_SEED={} EXPLORER_KEEP={} cargo test --all-features --test explorer \
         -- --nocapture\n",
        case.seed,
        keep.join(",")
    );
    out
}

/// The explorer: random cases for `EXPLORER_SECS` (or the replay of one), failing with the
/// shrunk sequence of the first failure (with `EXPLORER_ALL`, of each distinct one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_sequences_of_locks_releases_and_faults_keep_every_guard_true_to_the_server() {
    let shrink_budget = Duration::from_secs(env("EXPLORER_SHRINK_SECS").unwrap_or(150));
    if let Some(seed) = env::<u64>("EXPLORER_SEED") {
        let case = generate(seed);
        let keep: Vec<usize> = match std::env::var("EXPLORER_KEEP") {
            Ok(list) => list
                .split(',')
                .filter_map(|i| i.trim().parse().ok())
                .collect(),
            Err(_) => (0..case.steps.len()).collect(),
        };
        println!("replay of {case}, steps {keep:?}");
        for &i in &keep {
            println!("    {i:>3}: {}", case.steps[i]);
        }
        let repeat = env("EXPLORER_REPEAT").unwrap_or(1);
        let mut failures = Vec::new();
        for k in 0..repeat {
            let out = run_case(&case, &keep, true).await;
            println!(
                "run {k}: {:?} in {:?}",
                out.result.as_ref().err().map(|v| &v.sig),
                out.took
            );
            for line in &out.trace {
                println!("    {line}");
            }
            if let Err(v) = out.result {
                if env::<u8>("EXPLORER_SHRINK").unwrap_or(0) == 1 {
                    // Shrink the replayed steps further.
                    let shrunk = shrink(&case, keep.clone(), &v, out.trace, shrink_budget).await;
                    println!("{}", report(&case, Duration::ZERO, 1, &shrunk));
                }
                failures.push(v);
            }
        }
        assert!(failures.is_empty(), "{failures:#?}");
        return;
    }
    let budget = Duration::from_secs(env("EXPLORER_SECS").unwrap_or(75));
    let all = env::<u8>("EXPLORER_ALL").unwrap_or(0) == 1;
    // Explore (as `EXPLORER_ALL`) until a failure whose signature contains one of these
    // (comma-separated) is found.
    let until: Option<String> = std::env::var("EXPLORER_UNTIL").ok();
    let first_seed = env("EXPLORER_FIRST_SEED").unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    println!("exploring for {budget:?} from EXPLORER_FIRST_SEED={first_seed}");
    let mut seeds = Rng(first_seed);
    let mut exploring = Duration::ZERO;
    let mut cases = 0;
    let mut found: BTreeMap<String, String> = BTreeMap::new();
    while exploring < budget {
        let case = generate(seeds.next());
        let all_steps: Vec<usize> = (0..case.steps.len()).collect();
        let out = run_case(&case, &all_steps, true).await;
        exploring += out.took;
        cases += 1;
        match out.result {
            Ok(()) => println!("case {cases}: {case}: ok in {:.1}s", out.took.as_secs_f64()),
            Err(v) => {
                println!(
                    "case {cases}: {case}: FAILED {} in {:.1}s at {:.1}s of exploring",
                    v.sig,
                    out.took.as_secs_f64(),
                    exploring.as_secs_f64()
                );
                println!("  {}", v.detail);
                if found.contains_key(&v.sig) {
                    // Seen before: the end of its trace, to tell its cause from the first's.
                    for line in out.trace.iter().rev().take(30).rev() {
                        println!("    {line}");
                    }
                    continue;
                }
                let wanted = until
                    .as_ref()
                    .is_none_or(|u| u.split(',').any(|u| v.sig.contains(u)));
                if !wanted {
                    // Looking for another signature: this one is listed, not shrunk.
                    found.insert(
                        v.sig.clone(),
                        format!("{} (not shrunk): {}", v.sig, v.detail),
                    );
                    continue;
                }
                let shrunk = shrink(&case, all_steps, &v, out.trace, shrink_budget).await;
                let text = report(&case, exploring, cases, &shrunk);
                println!("{text}");
                found.insert(v.sig.clone(), text);
                if !all || until.is_some() {
                    break;
                }
            }
        }
    }
    println!(
        "explored {cases} cases in {:.1}s; {} distinct failures",
        exploring.as_secs_f64(),
        found.len()
    );
    assert!(
        found.is_empty(),
        "the explorer found:\n{}",
        found.values().cloned().collect::<Vec<_>>().join("\n")
    );
}
