//! A worker process: one client, several owners, each looping acquire → register → release
//! and writing every event to its history file (format: the library's doc).
//!
//! The owners' kinds: `reentrant` (re-entered at once, or a nested re-entry after part of the
//! work: the Java-style `lock()` … `unlock()` on the same handle, with whatever loss came in
//! between), `fair`, `rw` (a read lock two times in three, several readers per client, else the
//! write lock of the same names), `fenced`, `group` (one or two values of a group), `multi` (a
//! `MultiLock` over two locks) and `redlock`; every kind but RedLock takes one hold in three
//! with a lease (RedLock always does), the rest with the watchdog. The work lasts 5–60 ms, or
//! 0.3–2.5 s one time in five; with `--long-holds N`, one watchdog hold in N works for two to
//! three leases (it lives only by its renewals). A hold in doubt is watched until it is
//! confirmed or lost (the work pauses); a lost one ends the work (a fenced holder still writes
//! once more, as a paused one would).

use std::{
    fs::File,
    io::{LineWriter, Write},
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::{Duration, Instant},
};

use fred::{
    clients::Client as FredClient,
    interfaces::{ClientLike, LuaInterface},
    types::{config::Config as FredConfig, Value},
};
use redisson_lock::{
    AnyGuard, Client, Config, HoldState, Kind, Lock, MultiGuard, MultiLock, Owner, RedLock,
    RedLockGuard,
};
use redisson_lock_chaos::clock::{instant_ns, now_ns};
use tokio::io::AsyncBufReadExt;

use crate::{lock_names, owner_kinds, Rng, WorkerArgs, GROUP_VALUES, KINDS};

/// Enter the register: who was inside is returned, this hold is now inside.
pub(crate) const ENTER: &str =
    "local p = redis.call('GET', KEYS[1]); redis.call('SET', KEYS[1], ARGV[1]); \
                     return p or '-'";
/// Leave the register if still the occupant.
pub(crate) const LEAVE: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end; return 1";
/// A fenced write: rejected unless its token is higher than the highest accepted, or equal to
/// it and from the same hold (a hold writes more than once).
pub(crate) const FENCED_WRITE: &str = "local cur = redis.call('HMGET', KEYS[1], 'token', 'hold'); \
     local t = tonumber(ARGV[1]); local top = tonumber(cur[1] or '-1'); \
     if t < top or (t == top and cur[2] ~= ARGV[2]) then return 0 end; \
     redis.call('HSET', KEYS[1], 'token', ARGV[1], 'hold', ARGV[2]); return 1";

/// The history file of this process.
#[derive(Clone)]
pub(crate) struct History {
    pub(crate) process: u32,
    pub(crate) out: Arc<Mutex<LineWriter<File>>>,
}

impl History {
    pub(crate) fn create(process: u32, path: &str) -> Result<History, String> {
        let file = File::create(path).map_err(|e| format!("{path}: {e}"))?;
        Ok(History {
            process,
            out: Arc::new(Mutex::new(LineWriter::new(file))),
        })
    }

    pub(crate) fn emit(&self, kind: &str, owner: u32, seq: u64, t: u64, rest: &str) {
        let line = format!("{kind} {} {owner} {seq} {t} {rest}\n", self.process);
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = out.write_all(line.as_bytes());
    }

    pub(crate) fn flush(&self) {
        let _ = self.out.lock().map(|mut o| o.flush());
    }
}

/// The register (an unfaulted server): who is inside each lock, and the fenced writes.
#[derive(Clone)]
pub(crate) struct Register {
    client: FredClient,
    history: History,
}

impl Register {
    pub(crate) async fn connect(url: &str, history: History) -> Result<Register, String> {
        let cfg = FredConfig::from_url(url).map_err(|e| e.to_string())?;
        let client = FredClient::new(cfg, None, None, None);
        client.init().await.map_err(|e| e.to_string())?;
        Ok(Register { client, history })
    }

    fn me(&self, owner: u32, seq: u64) -> String {
        format!("{}/{owner}/{seq}", self.history.process)
    }

    /// Enters the register of `name` and writes who was still inside (`G`).
    pub(crate) async fn enter(&self, name: &str, owner: u32, seq: u64) {
        let prev: String = match self
            .client
            .eval::<Value, _, _, _>(
                ENTER,
                vec![format!("occ:{name}")],
                vec![self.me(owner, seq)],
            )
            .await
        {
            Ok(v) => v.as_string().unwrap_or_else(|| "-".into()),
            Err(_) => "-".into(),
        };
        self.history.emit("G", owner, seq, now_ns(), &prev);
    }

    pub(crate) async fn leave(&self, name: &str, owner: u32, seq: u64) {
        let _: Result<Value, _> = self
            .client
            .eval(
                LEAVE,
                vec![format!("occ:{name}")],
                vec![self.me(owner, seq)],
            )
            .await;
    }

    /// A fenced write of `token` for `name`, with its outcome (`W`).
    pub(crate) async fn fenced_write(&self, name: &str, owner: u32, seq: u64, token: u64) {
        let sent = now_ns();
        let r: Result<Value, _> = self
            .client
            .eval(
                FENCED_WRITE,
                vec![format!("fence:{name}")],
                vec![token.to_string(), self.me(owner, seq)],
            )
            .await;
        let reply = now_ns();
        let accepted = match r {
            Ok(v) => v.as_i64() == Some(1),
            Err(_) => return,
        };
        self.history.emit(
            "W",
            owner,
            seq,
            sent,
            &format!("{reply} {token} {}", u8::from(accepted)),
        );
    }

    pub(crate) async fn quit(&self) {
        let _ = self.client.quit().await;
    }
}

/// How long one hold's work lasts: 5–60 ms, or 0.3–2.5 s one time in five.
pub(crate) fn hold_ms(rng: &mut Rng) -> u64 {
    if rng.below(5) == 0 {
        300 + rng.below(2200)
    } else {
        5 + rng.below(55)
    }
}

/// One or two values of a group, e.g. `a,c`.
pub(crate) fn group_values(rng: &mut Rng) -> Vec<&'static str> {
    let first = rng.below(GROUP_VALUES.len() as u64) as usize;
    let mut v = vec![GROUP_VALUES[first]];
    if rng.below(2) == 0 {
        let second =
            (first + 1 + rng.below(GROUP_VALUES.len() as u64 - 1) as usize) % GROUP_VALUES.len();
        v.push(GROUP_VALUES[second]);
    }
    v.sort_unstable();
    v
}

/// A hold of any kind.
enum Held {
    /// A plain guard, and the guard of an immediate re-entry (boxed, as a recipe's hold: a
    /// multi-lock's and a RedLock's guards are small).
    One(Box<AnyGuard>, Option<Box<AnyGuard>>),
    Multi(MultiGuard),
    Red(RedLockGuard),
    /// A recipe's hold (`recipes.rs`).
    Recipe(Box<crate::recipes::RecipeHeld>),
}

impl Held {
    fn state(&self) -> HoldState {
        match self {
            Held::One(g, _) => g.state(),
            Held::Multi(g) => g.state(),
            Held::Red(g) => g.state(),
            Held::Recipe(r) => r.state(),
        }
    }

    /// The validity deadline in the history's clock; `u64::MAX` for a hold told no deadline
    /// (a run-once job's).
    fn deadline_ns(&self) -> u64 {
        let at = match self {
            Held::One(g, _) => g.valid_until().into_std(),
            Held::Multi(g) => g
                .parts()
                .iter()
                .map(|p| p.valid_until().into_std())
                .min()
                .unwrap_or_else(Instant::now),
            Held::Red(g) => g.valid_until().into_std(),
            Held::Recipe(r) => match r.valid_until() {
                Some(at) => at,
                None => return u64::MAX,
            },
        };
        instant_ns(at)
    }

    fn token(&self) -> Option<u64> {
        match self {
            Held::One(g, _) => g.token(),
            Held::Recipe(r) => r.token(),
            _ => None,
        }
    }

    /// Whether the holder has been told: the hold is in doubt or lost (a RedLock also when its
    /// validity ran out).
    fn is_told(&self) -> bool {
        self.state() != HoldState::Held || matches!(self, Held::Red(g) if g.is_lost())
    }

    /// Whether the hold is gone for good: lost (a RedLock also when its validity ran out).
    fn is_gone(&self) -> bool {
        self.state() == HoldState::Lost || matches!(self, Held::Red(g) if g.is_lost())
    }

    /// Resolves when the holder is told its hold is in doubt or lost.
    async fn told(&self) {
        match self {
            Held::One(g, _) => g.lost().await,
            Held::Recipe(r) => r.told().await,
            // A multi-lock and a RedLock guard have no loss future: their state (and a
            // RedLock's validity), polled.
            Held::Multi(_) | Held::Red(_) => {
                while !self.is_told() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
            }
        }
    }

    async fn unlock(self) -> Result<(), String> {
        let kind = |e: redisson_lock::Error| format!("{:?}", e.kind());
        match self {
            Held::One(g, inner) => {
                if let Some(i) = inner {
                    (*i).unlock().await.map_err(kind)?;
                }
                g.unlock().await.map(drop).map_err(kind)
            }
            Held::Multi(g) => g.unlock().await.map_err(kind),
            Held::Red(g) => g.unlock().await.map_err(kind),
            Held::Recipe(r) => r.unlock().await,
        }
    }
}

fn config(args: &WorkerArgs) -> Config {
    Config::default()
        .lock_watchdog_timeout(Duration::from_millis(args.watchdog_ms))
        .timeout(Duration::from_millis(args.timeout_ms))
        .check_lock_synced_replicas(!args.no_replica_sync)
}

async fn connect(args: &WorkerArgs) -> Result<Client, String> {
    let cfg = config(args);
    let (kind, rest) = args
        .connect
        .split_once(':')
        .ok_or("--connect: expected <standalone|sentinel|cluster>:<urls>")?;
    let res = match kind {
        "standalone" => Client::connect(rest, cfg).await,
        "cluster" => {
            let seeds: Vec<&str> = rest.split(',').collect();
            Client::connect_cluster(&seeds, cfg).await
        }
        "sentinel" => {
            let (master, urls) = rest
                .split_once(':')
                .ok_or("--connect sentinel:<master>:<urls>")?;
            let urls: Vec<&str> = urls.split(',').collect();
            Client::connect_sentinel(master, &urls, cfg).await
        }
        other => return Err(format!("unknown topology {other:?}")),
    };
    res.map_err(|e| e.to_string())
}

/// Waits for a line `stop` (or the end) on standard input.
pub(crate) async fn until_stop() {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if line.trim() == "stop" {
            break;
        }
    }
}

/// Runs the crate's worker until a line `stop` (or the end) on standard input (the Java
/// worker, `--java-classes`, is `java::run`: `main` chooses).
pub async fn run(args: WorkerArgs) -> Result<(), String> {
    let history = History::create(args.process, &args.history)?;
    let client = connect(&args).await?;
    let mut red_clients = Vec::new();
    for url in args.redlock.split(',').filter(|u| !u.is_empty()) {
        let c = Client::connect(url, config(&args).check_lock_synced_replicas(false))
            .await
            .map_err(|e| e.to_string())?;
        red_clients.push(c);
    }
    let register = Register::connect(&args.register, history.clone()).await?;
    let wanted: Vec<&str> = args
        .variants
        .split(',')
        .filter(|v| {
            (KINDS.contains(v) || crate::recipes::VARIANTS.contains(v))
                && (*v != "redlock" || !red_clients.is_empty())
        })
        .collect();
    let kinds = owner_kinds(&wanted, args.process, args.owners);
    if kinds.is_empty() {
        return Err("no usable variant".into());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (owner, kind) in kinds.into_iter().enumerate() {
        let owner = owner as u32;
        let ctx = Owner_ {
            owner,
            kind: kind.to_owned(),
            client: client.clone(),
            red: red_clients.clone(),
            register: register.clone(),
            history: history.clone(),
            stop: stop.clone(),
            rng: Rng::new(args.seed ^ ((args.process as u64) << 32) ^ owner as u64),
            wait: Duration::from_millis(args.wait_ms),
            watchdog_ms: args.watchdog_ms,
            long_holds: args.long_holds,
            locks_per_variant: args.locks,
            seq: 0,
        };
        tasks.push(tokio::spawn(ctx.run()));
    }
    println!("ready");
    until_stop().await;
    stop.store(true, Ordering::SeqCst);
    // An owner that died (a panic) fails the worker, and with it the run.
    let mut died = Vec::new();
    for (owner, t) in tasks.into_iter().enumerate() {
        if let Err(e) = t.await {
            died.push(format!("owner {owner}: {e}"));
        }
    }
    client.shutdown().await;
    for c in &red_clients {
        c.shutdown().await;
    }
    register.quit().await;
    history.flush();
    if died.is_empty() {
        Ok(())
    } else {
        Err(format!("owner task(s) died: {}", died.join("; ")))
    }
}

/// How an attempt re-enters the lock it holds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reentry {
    None,
    /// At once, a second guard kept to the end (hold count 2 during the work).
    AtOnce,
    /// After part of the work: `lock` then `unlock` on the same handle (the Java style), with
    /// the outer hold looked at right after the inner acquisition.
    Nested,
}

#[allow(non_camel_case_types)]
struct Owner_ {
    owner: u32,
    kind: String,
    client: Client,
    red: Vec<Client>,
    register: Register,
    history: History,
    stop: Arc<AtomicBool>,
    rng: Rng,
    wait: Duration,
    watchdog_ms: u64,
    /// One watchdog hold in this many works for several leases (0: none).
    long_holds: u64,
    locks_per_variant: u32,
    seq: u64,
}

/// What one attempt is about, for its `B` line.
struct Attempt {
    name: String,
    variant: &'static str,
    lease: Option<Duration>,
    units: Option<String>,
    /// The inner acquisition of a nested re-entry.
    nested: bool,
    /// Its work lasts two to three leases (`--long-holds`).
    long: bool,
}

impl Attempt {
    fn begin_line(&self) -> String {
        let mut s = format!("{} {}", self.name, self.variant);
        if let Some(l) = self.lease {
            s.push_str(&format!(" lease={}", l.as_millis()));
        }
        if self.nested {
            s.push_str(" nested=1");
        }
        if self.long {
            s.push_str(" long=1");
        }
        if let Some(u) = &self.units {
            s.push_str(&format!(" units={u}"));
        }
        s
    }

    /// A single exclusive hold (the register's occupancy check applies).
    fn exclusive(&self) -> bool {
        self.units.is_none()
    }
}

/// Runs `fut` while watching `held` (hold `seq` of `owner`): `T` in `history` when it is told.
async fn watch_while<T>(
    history: &History,
    owner: u32,
    seq: u64,
    held: &Held,
    fut: impl std::future::Future<Output = T>,
) -> T {
    tokio::pin!(fut);
    loop {
        if held.is_told() {
            return fut.await;
        }
        tokio::select! {
            r = fut.as_mut() => return r,
            _ = held.told() => {
                history.emit("T", owner, seq, now_ns(), &format!("{:?}", held.state()));
            }
        }
    }
}

impl Owner_ {
    async fn run(mut self) {
        let owner = Owner::new();
        let names = lock_names(&self.kind, self.locks_per_variant);
        // A run-once owner: the last tick it tried.
        let mut last_tick = None;
        while !self.stop.load(Ordering::SeqCst) {
            let name = names[self.rng.below(names.len() as u64) as usize].clone();
            // One hold in three with a lease (4–7 s with the default 3 s watchdog: longer than
            // any work without a fault); RedLock always.
            let lease = (self.kind == "redlock" || self.rng.below(3) == 0).then(|| {
                Duration::from_millis(self.watchdog_ms + 1000 + self.rng.below(self.watchdog_ms))
            });
            let reentry = match self.rng.below(4) {
                0 => Reentry::AtOnce,
                1 | 2 => Reentry::Nested,
                _ => Reentry::None,
            };
            match self.kind.as_str() {
                "reentrant" => {
                    let lock = self.client.get_lock_with_owner(&name, owner);
                    self.one(&lock, name, "reentrant", lease, None, reentry)
                        .await
                }
                "fair" => {
                    let lock = self.client.get_fair_lock_with_owner(&name, owner);
                    self.one(&lock, name, "fair", lease, None, reentry).await
                }
                "rw" => {
                    let rw = self.client.get_read_write_lock_with_owner(&name, owner);
                    if self.rng.below(3) < 2 {
                        let units = Some(format!("{name}@r"));
                        self.one(rw.read_lock(), name, "read", lease, units, Reentry::None)
                            .await
                    } else {
                        self.one(rw.write_lock(), name, "write", lease, None, reentry)
                            .await
                    }
                }
                "fenced" => {
                    let lock = self.client.get_fenced_lock_with_owner(&name, owner);
                    self.one(&lock, name, "fenced", lease, None, Reentry::None)
                        .await
                }
                "group" => {
                    let values = group_values(&mut self.rng);
                    let lock = self.client.get_group_lock_with_owner(&name, &values, owner);
                    let units: Vec<String> = values.iter().map(|v| format!("{name}/{v}")).collect();
                    let units = Some(units.join(","));
                    self.one(&lock, name, "group", lease, units, Reentry::None)
                        .await
                }
                "multi" => self.multi(&names, owner, lease).await,
                "redlock" => self.redlock(name, owner, lease).await,
                "election" => self.recipe(name, "election").await,
                "permit" => self.recipe(name, "permit").await,
                "run-once" => self.run_once(&mut last_tick).await,
                _ => return,
            }
            // A short think time, so that waiters get their turn.
            let think = self.rng.below(20);
            tokio::time::sleep(Duration::from_millis(think)).await;
        }
    }

    fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Whether the next hold works for several leases (`--long-holds N`: one hold in N of
    /// those the watchdog keeps). Draws nothing without the flag, so that a seed gives the
    /// same choices as before it existed.
    fn long_hold(&mut self, watchdog: bool) -> bool {
        watchdog && self.long_holds > 0 && self.rng.below(self.long_holds) == 0
    }

    /// How long a hold's work lasts: two to three leases for a long one (it lives only by
    /// renewals), else [`hold_ms`].
    fn work_ms(&mut self, long: bool) -> u64 {
        if long {
            2 * self.watchdog_ms + self.rng.below(self.watchdog_ms)
        } else {
            hold_ms(&mut self.rng)
        }
    }

    /// `B`, then the acquisition's outcome: `Some` when it acquired (after the `A` line).
    async fn begin<F>(&mut self, a: &Attempt, acquire: F) -> Option<(u64, Held)>
    where
        F: std::future::Future<Output = Result<Option<Held>, String>>,
    {
        let seq = self.next_seq();
        let h = self.history.clone();
        h.emit("B", self.owner, seq, now_ns(), &a.begin_line());
        match acquire.await {
            Ok(Some(held)) => {
                let t = now_ns();
                let token = held
                    .token()
                    .map_or_else(|| "-".to_owned(), |t| t.to_string());
                let deadline = held.deadline_ns();
                // The state it came back in: a hold taken across a connection loss or a
                // failover starts in doubt, which tells its holder as much as `lost()` later
                // would.
                let state = held.state();
                h.emit(
                    "A",
                    self.owner,
                    seq,
                    t,
                    &format!("{token} {deadline} {state:?}"),
                );
                Some((seq, held))
            }
            Ok(None) => {
                h.emit("N", self.owner, seq, now_ns(), "none");
                None
            }
            Err(kind) => {
                h.emit("N", self.owner, seq, now_ns(), &kind);
                tokio::time::sleep(Duration::from_millis(50)).await;
                None
            }
        }
    }

    /// The end of a hold: `E`, leave the register, release, `R`.
    async fn end(&mut self, a: &Attempt, seq: u64, held: Held) {
        let h = self.history.clone();
        h.emit("E", self.owner, seq, now_ns(), "");
        if a.exclusive() {
            self.register.leave(&a.name, self.owner, seq).await;
        }
        let outcome = match held.unlock().await {
            Ok(()) => "ok".to_owned(),
            Err(kind) => kind,
        };
        h.emit("R", self.owner, seq, now_ns(), &outcome);
    }

    /// One hold of a plain lock of any kind.
    async fn one<K: Kind>(
        &mut self,
        lock: &Lock<K>,
        name: String,
        variant: &'static str,
        lease: Option<Duration>,
        units: Option<String>,
        reentry: Reentry,
    ) {
        let a = Attempt {
            name,
            variant,
            lease,
            units,
            nested: false,
            long: self.long_hold(lease.is_none()),
        };
        let wait = self.wait;
        let Some((seq, mut held)) = self
            .begin(&a, async {
                Ok(take(lock, wait, lease)
                    .await?
                    .map(|g| Held::One(Box::new(g), None)))
            })
            .await
        else {
            return;
        };
        if a.exclusive() {
            self.register.enter(&a.name, self.owner, seq).await;
        }
        let token = held.token();
        if let Some(tok) = token {
            self.register
                .fenced_write(&a.name, self.owner, seq, tok)
                .await;
        }
        let total = self.work_ms(a.long);
        match reentry {
            Reentry::None => {
                self.work(seq, &held, total, token.is_some()).await;
            }
            Reentry::AtOnce => {
                // The same owner again: at once, a second hold on the same lock. It can take up
                // to the wait (a failover under way): the first hold's state is watched
                // meanwhile.
                let again = take(lock, wait, lease);
                let got = self.watching(seq, &held, again).await;
                match got {
                    Ok(g) => {
                        if let Held::One(_, inner) = &mut held {
                            *inner = g.map(Box::new);
                        }
                    }
                    Err(kind) => self.history.emit(
                        "X",
                        self.owner,
                        seq,
                        now_ns(),
                        &format!("reentry:{kind}"),
                    ),
                }
                if !held.is_gone() {
                    self.work(seq, &held, total, token.is_some()).await;
                }
            }
            Reentry::Nested => {
                let first = total / 2;
                let going = self.work(seq, &held, first, token.is_some()).await;
                if going {
                    self.nested(lock, &a, seq, &held).await;
                    if !held.is_gone() {
                        self.work(seq, &held, total - first, token.is_some()).await;
                    }
                }
            }
        }
        if let Some(tok) = token {
            self.register
                .fenced_write(&a.name, self.owner, seq, tok)
                .await;
        }
        self.end(&a, seq, held).await;
    }

    /// The inner `lock` … `unlock` of a nested re-entry, on the same handle, as an attempt of
    /// its own; the outer hold is looked at right after the inner acquisition (if its key
    /// was lost in between, the inner one is a new hold and the outer one must be lost).
    async fn nested<K: Kind>(
        &mut self,
        lock: &Lock<K>,
        outer: &Attempt,
        outer_seq: u64,
        held: &Held,
    ) {
        let a = Attempt {
            name: outer.name.clone(),
            variant: outer.variant,
            lease: outer.lease,
            units: outer.units.clone(),
            nested: true,
            long: false,
        };
        let (wait, lease) = (self.wait, outer.lease);
        // The inner acquisition can wait up to the wait (another owner holds the lock once the
        // outer hold's key is gone): the outer hold is watched meanwhile, as any other work.
        let (history, owner) = (self.history.clone(), self.owner);
        let inner = self
            .begin(
                &a,
                watch_while(&history, owner, outer_seq, held, async {
                    Ok(take(lock, wait, lease)
                        .await?
                        .map(|g| Held::One(Box::new(g), None)))
                }),
            )
            .await;
        let h = self.history.clone();
        h.emit(
            "O",
            self.owner,
            outer_seq,
            now_ns(),
            &format!("{:?} {}", held.state(), held.deadline_ns()),
        );
        let Some((seq, Held::One(g, _))) = inner else {
            return;
        };
        h.emit("E", self.owner, seq, now_ns(), "");
        // Java style: the guard is given up and the handle unlocks (retried for up to the
        // retries' delays when the connection is lost: the outer hold is watched meanwhile).
        (*g).keep();
        let outcome = match watch_while(&h, self.owner, outer_seq, held, lock.unlock()).await {
            Ok(_) => "ok".to_owned(),
            Err(e) => format!("{:?}", e.kind()),
        };
        h.emit("R", self.owner, seq, now_ns(), &outcome);
    }

    /// Runs `fut` while watching `held`: `T` when it is told.
    async fn watching<T>(
        &mut self,
        seq: u64,
        held: &Held,
        fut: impl std::future::Future<Output = T>,
    ) -> T {
        watch_while(&self.history, self.owner, seq, held, fut).await
    }

    /// The work inside the lock, for `ms`: looking at the hold every 200 ms (every 50 ms while
    /// it is in doubt: the work pauses until it is confirmed or lost). Returns `false` when it
    /// stopped early: the hold was lost (a fenced holder goes on: its writes are fenced). Ends
    /// early, too, when the worker is asked to stop.
    async fn work(&mut self, seq: u64, held: &Held, ms: u64, fenced: bool) -> bool {
        let h = self.history.clone();
        let until = tokio::time::Instant::now() + Duration::from_millis(ms);
        loop {
            let now = tokio::time::Instant::now();
            // The run is over: the work ends early (a long hold would keep the run waiting).
            if now >= until || self.stop.load(Ordering::SeqCst) {
                return true;
            }
            let step = (until - now).min(Duration::from_millis(200));
            if !held.is_told() {
                tokio::select! {
                    _ = tokio::time::sleep(step) => {}
                    _ = held.told() => {
                        h.emit("T", self.owner, seq, now_ns(), &format!("{:?}", held.state()));
                    }
                }
            } else {
                tokio::time::sleep(step.min(Duration::from_millis(50))).await;
            }
            let state = held.state();
            let deadline = held.deadline_ns();
            h.emit(
                "O",
                self.owner,
                seq,
                now_ns(),
                &format!("{state:?} {deadline}"),
            );
            if held.is_gone() && !fenced {
                return false;
            }
        }
    }

    /// A `MultiLock` over two locks of the kind's names (each a reentrant lock).
    async fn multi(&mut self, names: &[String], owner: Owner, lease: Option<Duration>) {
        let i = self.rng.below(names.len() as u64) as usize;
        let j = (i + 1 + self.rng.below(names.len() as u64 - 1) as usize) % names.len();
        let (p, q) = if i < j { (i, j) } else { (j, i) };
        let parts = [names[p].clone(), names[q].clone()];
        let a = Attempt {
            name: parts.join("+"),
            variant: "multi",
            lease,
            units: Some(parts.join(",")),
            nested: false,
            long: self.long_hold(lease.is_none()),
        };
        let multi = match MultiLock::new(
            parts
                .iter()
                .map(|n| self.client.get_lock_with_owner(n, owner).into())
                .collect(),
        ) {
            Ok(m) => m,
            Err(_) => return,
        };
        let wait = self.wait;
        let Some((seq, held)) = self
            .begin(&a, async {
                let kind = |e: redisson_lock::Error| format!("{:?}", e.kind());
                let got = match lease {
                    Some(l) => multi.try_lock_with_lease(wait, l).await,
                    None => multi.try_lock_for(wait).await,
                };
                Ok(got.map_err(kind)?.map(Held::Multi))
            })
            .await
        else {
            return;
        };
        let ms = self.work_ms(a.long);
        self.work(seq, &held, ms, false).await;
        self.end(&a, seq, held).await;
    }

    /// A recipe's hold (`recipes.rs`): an election's leadership (its term fences the
    /// register's writes) or a watchdog permit of a one-permit semaphore.
    async fn recipe(&mut self, name: String, variant: &'static str) {
        let a = Attempt {
            name,
            variant,
            lease: None,
            units: None,
            nested: false,
            long: self.long_hold(true),
        };
        let (client, wait) = (self.client.clone(), self.wait);
        let Some((seq, held)) = self
            .begin(&a, async {
                Ok(crate::recipes::acquire(&client, variant, &a.name, wait)
                    .await?
                    .map(|r| Held::Recipe(Box::new(r))))
            })
            .await
        else {
            return;
        };
        self.register.enter(&a.name, self.owner, seq).await;
        let token = held.token();
        if let Some(tok) = token {
            self.register
                .fenced_write(&a.name, self.owner, seq, tok)
                .await;
        }
        let ms = self.work_ms(a.long);
        self.work(seq, &held, ms, token.is_some()).await;
        if let Some(tok) = token {
            self.register
                .fenced_write(&a.name, self.owner, seq, tok)
                .await;
        }
        self.end(&a, seq, held).await;
    }

    /// One run of a run-once job (`recipes.rs`): waits for the next tick this owner has not
    /// tried (to a random time in its first half), then `run_once` of the tick's name. The run
    /// is written as a hold of that name: `B` before `run_once`, `A` when the job starts (no
    /// deadline: the job is told only its state), the job's looks, `E` when the job ends (or
    /// is dropped at `at_most`), `R` when `run_once` returned (`ok`, or `TimedOut`); a skip is
    /// `N none`. The name stays held after `E` until `at_least` (the key's TTL), which the
    /// checker's `once_reruns` looks at.
    async fn run_once(&mut self, last_tick: &mut Option<u64>) {
        use crate::recipes::{once_name, once_tick, ONCE_AT_LEAST, ONCE_AT_MOST, ONCE_TICK_MS};
        use redisson_lock::RunOnce;
        let tick_ns = ONCE_TICK_MS * 1_000_000;
        let now = now_ns();
        let next = last_tick.map_or(once_tick(now), |l| (l + 1).max(once_tick(now)));
        let at = next * tick_ns + self.rng.below(tick_ns / 2);
        if at > now {
            tokio::time::sleep(Duration::from_nanos(at - now)).await;
        }
        if self.stop.load(Ordering::SeqCst) {
            return;
        }
        let tick = once_tick(now_ns());
        *last_tick = Some(tick);
        let a = Attempt {
            name: once_name(tick),
            variant: "run-once",
            lease: None,
            units: None,
            nested: false,
            long: false,
        };
        let seq = self.next_seq();
        let (h, owner, register) = (self.history.clone(), self.owner, self.register.clone());
        h.emit(
            "B",
            owner,
            seq,
            now_ns(),
            &format!("{} at_least={}", a.begin_line(), ONCE_AT_LEAST.as_millis()),
        );
        let ms = hold_ms(&mut self.rng);
        let client = self.client.clone();
        let name = a.name.clone();
        let me = &mut *self;
        let ran = client
            .run_once(&a.name, ONCE_AT_LEAST, ONCE_AT_MOST, |watch| async move {
                let held = Held::Recipe(Box::new(crate::recipes::RecipeHeld::Run(watch)));
                let state = held.state();
                h.emit(
                    "A",
                    owner,
                    seq,
                    now_ns(),
                    &format!("- {} {state:?}", u64::MAX),
                );
                // `E` when the job ends, or when `run_once` drops it at `at_most`.
                let end = EndMark(h.clone(), owner, seq);
                register.enter(&name, owner, seq).await;
                me.work(seq, &held, ms, false).await;
                drop(end);
                register.leave(&name, owner, seq).await;
            })
            .await;
        let h = self.history.clone();
        match ran {
            Ok(RunOnce::Ran(())) => h.emit("R", owner, seq, now_ns(), "ok"),
            Ok(RunOnce::TimedOut) => {
                self.register.leave(&a.name, owner, seq).await;
                h.emit("R", owner, seq, now_ns(), "TimedOut");
            }
            Ok(_) => h.emit("N", owner, seq, now_ns(), "none"),
            Err(e) => {
                h.emit("N", owner, seq, now_ns(), &format!("{:?}", e.kind()));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }

    /// A RedLock over the three independent nodes, with a lease.
    async fn redlock(&mut self, name: String, owner: Owner, lease: Option<Duration>) {
        let lease = lease.unwrap_or(Duration::from_millis(self.watchdog_ms));
        let a = Attempt {
            name,
            variant: "redlock",
            lease: Some(lease),
            units: None,
            nested: false,
            long: false,
        };
        let parts = self
            .red
            .iter()
            .map(|c| c.get_lock_with_owner(&a.name, owner).into())
            .collect();
        let Ok(red) = RedLock::new(parts) else {
            return;
        };
        let wait = self.wait;
        let Some((seq, held)) = self
            .begin(&a, async {
                let kind = |e: redisson_lock::Error| format!("{:?}", e.kind());
                Ok(red
                    .try_lock_with_lease(wait, lease)
                    .await
                    .map_err(kind)?
                    .map(Held::Red))
            })
            .await
        else {
            return;
        };
        self.register.enter(&a.name, self.owner, seq).await;
        let ms = hold_ms(&mut self.rng);
        self.work(seq, &held, ms, false).await;
        self.end(&a, seq, held).await;
    }
}

/// Writes `E` for a hold when dropped: a run-once job's end, also when `run_once` drops the
/// job at `at_most`.
struct EndMark(History, u32, u64);

impl Drop for EndMark {
    fn drop(&mut self) {
        self.0.emit("E", self.1, self.2, now_ns(), "");
    }
}

/// One acquisition of `lock`: waits at most `wait`, with a lease or the watchdog.
async fn take<K: Kind>(
    lock: &Lock<K>,
    wait: Duration,
    lease: Option<Duration>,
) -> Result<Option<AnyGuard>, String> {
    let kind = |e: redisson_lock::Error| format!("{:?}", e.kind());
    let got = match lease {
        Some(l) => lock.try_lock_with_lease(wait, l).await,
        None => lock.try_lock_for(wait).await,
    };
    Ok(got.map_err(kind)?.map(|g| g.erase()))
}
