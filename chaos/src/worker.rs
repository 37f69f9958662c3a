//! A worker process: one client, several owners, each looping acquire → register → release
//! and writing every event to its history file (format: the library's doc).

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
    Client, Config, FairGuard, FencedGuard, HoldState, LockGuard, Owner, RedLock, RedLockGuard,
    WriteGuard,
};
use redisson_lock_chaos::clock::{instant_ns, now_ns};
use tokio::io::AsyncBufReadExt;

use crate::{lock_names, Rng, WorkerArgs, VARIANTS};

/// Enter the register: who was inside is returned, this hold is now inside.
const ENTER: &str = "local p = redis.call('GET', KEYS[1]); redis.call('SET', KEYS[1], ARGV[1]); \
                     return p or '-'";
/// Leave the register if still the occupant.
const LEAVE: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end; return 1";
/// A fenced write: rejected unless its token is higher than the highest accepted, or equal to
/// it and from the same hold (a hold writes more than once).
const FENCED_WRITE: &str = "local cur = redis.call('HMGET', KEYS[1], 'token', 'hold'); \
     local t = tonumber(ARGV[1]); local top = tonumber(cur[1] or '-1'); \
     if t < top or (t == top and cur[2] ~= ARGV[2]) then return 0 end; \
     redis.call('HSET', KEYS[1], 'token', ARGV[1], 'hold', ARGV[2]); return 1";

/// The history file of this process.
#[derive(Clone)]
struct History {
    process: u32,
    out: Arc<Mutex<LineWriter<File>>>,
}

impl History {
    fn emit(&self, kind: &str, owner: u32, seq: u64, t: u64, rest: &str) {
        let line = format!("{kind} {} {owner} {seq} {t} {rest}\n", self.process);
        let mut out = self.out.lock().unwrap_or_else(|e| e.into_inner());
        let _ = out.write_all(line.as_bytes());
    }
}

/// A hold of any variant.
enum Held {
    Reentrant(LockGuard, Option<LockGuard>),
    Fair(FairGuard),
    Write(WriteGuard),
    Fenced(FencedGuard),
    Red(RedLockGuard),
    /// A recipe's hold (`recipes.rs`).
    Recipe(crate::recipes::RecipeHeld),
}

impl Held {
    fn state(&self) -> HoldState {
        match self {
            Held::Reentrant(g, _) => g.state(),
            Held::Fair(g) => g.state(),
            Held::Write(g) => g.state(),
            Held::Fenced(g) => g.state(),
            Held::Red(g) => g.state(),
            Held::Recipe(r) => r.state(),
        }
    }

    fn valid_until(&self) -> Instant {
        match self {
            Held::Reentrant(g, _) => g.valid_until().into_std(),
            Held::Fair(g) => g.valid_until().into_std(),
            Held::Write(g) => g.valid_until().into_std(),
            Held::Fenced(g) => g.valid_until().into_std(),
            Held::Red(g) => g.valid_until().into_std(),
            Held::Recipe(r) => r.valid_until(),
        }
    }

    fn token(&self) -> Option<u64> {
        match self {
            Held::Fenced(g) => Some(g.token()),
            Held::Recipe(r) => r.token(),
            _ => None,
        }
    }

    /// Resolves when the holder is told its hold is in doubt or lost.
    async fn told(&self) {
        match self {
            Held::Reentrant(g, _) => g.lost().await,
            Held::Fair(g) => g.lost().await,
            Held::Write(g) => g.lost().await,
            Held::Fenced(g) => g.lost().await,
            Held::Recipe(r) => r.told().await,
            // A RedLock guard has no loss future: its validity and state, polled.
            Held::Red(g) => loop {
                if g.is_lost() || g.state() != HoldState::Held {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(5)).await;
            },
        }
    }

    async fn unlock(self) -> Result<(), String> {
        let kind = |e: redisson_lock::Error| format!("{:?}", e.kind());
        match self {
            Held::Reentrant(g, inner) => {
                if let Some(i) = inner {
                    i.unlock().await.map_err(kind)?;
                }
                g.unlock().await.map(drop).map_err(kind)
            }
            Held::Fair(g) => g.unlock().await.map(drop).map_err(kind),
            Held::Write(g) => g.unlock().await.map(drop).map_err(kind),
            Held::Fenced(g) => g.unlock().await.map(drop).map_err(kind),
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

/// Runs the worker until a line `stop` (or the end) on standard input.
pub async fn run(args: WorkerArgs) -> Result<(), String> {
    let file = File::create(&args.history).map_err(|e| format!("{}: {e}", args.history))?;
    let history = History {
        process: args.process,
        out: Arc::new(Mutex::new(LineWriter::new(file))),
    };
    let client = connect(&args).await?;
    let mut red_clients = Vec::new();
    for url in args.redlock.split(',').filter(|u| !u.is_empty()) {
        let c = Client::connect(url, config(&args).check_lock_synced_replicas(false))
            .await
            .map_err(|e| e.to_string())?;
        red_clients.push(c);
    }
    let register = {
        let cfg = FredConfig::from_url(&args.register).map_err(|e| e.to_string())?;
        let r = FredClient::new(cfg, None, None, None);
        r.init().await.map_err(|e| e.to_string())?;
        r
    };
    let variants: Vec<String> = args
        .variants
        .split(',')
        .filter(|v| {
            (VARIANTS.contains(v) || crate::recipes::VARIANTS.contains(v))
                && (*v != "redlock" || !red_clients.is_empty())
        })
        .map(str::to_owned)
        .collect();
    if variants.is_empty() {
        return Err("no usable variant".into());
    }
    let stop = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for owner in 0..args.owners {
        let variant = variants[(owner as usize + args.process as usize) % variants.len()].clone();
        let ctx = Owner_ {
            owner,
            variant,
            client: client.clone(),
            red: red_clients.clone(),
            register: register.clone(),
            history: history.clone(),
            stop: stop.clone(),
            rng: Rng::new(args.seed ^ ((args.process as u64) << 32) ^ owner as u64),
            wait: Duration::from_millis(args.wait_ms),
            lease: Duration::from_millis(args.watchdog_ms),
            locks_per_variant: args.locks,
        };
        tasks.push(tokio::spawn(ctx.run()));
    }
    println!("ready");
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if line.trim() == "stop" {
            break;
        }
    }
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
    let _ = history.out.lock().map(|mut o| o.flush());
    if died.is_empty() {
        Ok(())
    } else {
        Err(format!("owner task(s) died: {}", died.join("; ")))
    }
}

#[allow(non_camel_case_types)]
struct Owner_ {
    owner: u32,
    variant: String,
    client: Client,
    red: Vec<Client>,
    register: FredClient,
    history: History,
    stop: Arc<AtomicBool>,
    rng: Rng,
    wait: Duration,
    lease: Duration,
    locks_per_variant: u32,
}

impl Owner_ {
    async fn run(mut self) {
        let owner = Owner::new();
        let names = lock_names(&self.variant, self.locks_per_variant);
        let mut seq = 0u64;
        while !self.stop.load(Ordering::SeqCst) {
            seq += 1;
            let name = names[self.rng.below(names.len() as u64) as usize].clone();
            let h = self.history.clone();
            h.emit(
                "B",
                self.owner,
                seq,
                now_ns(),
                &format!("{name} {}", self.variant),
            );
            let got = self.acquire(&name, owner).await;
            let mut held = match got {
                Ok(Some(held)) => held,
                Ok(None) => {
                    h.emit("N", self.owner, seq, now_ns(), "none");
                    continue;
                }
                Err(kind) => {
                    h.emit("N", self.owner, seq, now_ns(), &kind);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let t = now_ns();
            let token = held
                .token()
                .map_or_else(|| "-".to_owned(), |t| t.to_string());
            let deadline = instant_ns(held.valid_until());
            // The state it came back in: a hold taken across a connection loss or a failover
            // starts in doubt, which tells its holder as much as `lost()` later would.
            let state = held.state();
            h.emit(
                "A",
                self.owner,
                seq,
                t,
                &format!("{token} {deadline} {state:?}"),
            );
            self.critical_section(&name, seq, owner, &mut held).await;
            h.emit("E", self.owner, seq, now_ns(), "");
            let me = format!("{}/{}/{seq}", h.process, self.owner);
            let _: Result<Value, _> = self
                .register
                .eval(LEAVE, vec![format!("occ:{name}")], vec![me])
                .await;
            let outcome = match held.unlock().await {
                Ok(()) => "ok".to_owned(),
                Err(kind) => kind,
            };
            h.emit("R", self.owner, seq, now_ns(), &outcome);
            // A short think time, so that waiters get their turn.
            let think = self.rng.below(20);
            tokio::time::sleep(Duration::from_millis(think)).await;
        }
    }

    async fn acquire(&mut self, name: &str, owner: Owner) -> Result<Option<Held>, String> {
        let kind = |e: redisson_lock::Error| format!("{:?}", e.kind());
        let wait = self.wait;
        Ok(match self.variant.as_str() {
            "reentrant" => {
                let lock = self.client.get_lock_with_owner(name, owner);
                // Re-entered in the critical section (hold count 2).
                lock.try_lock_for(wait)
                    .await
                    .map_err(kind)?
                    .map(|g| Held::Reentrant(g, None))
            }
            "fair" => self
                .client
                .get_fair_lock_with_owner(name, owner)
                .try_lock_for(wait)
                .await
                .map_err(kind)?
                .map(Held::Fair),
            "write" => self
                .client
                .get_read_write_lock_with_owner(name, owner)
                .write_lock()
                .try_lock_for(wait)
                .await
                .map_err(kind)?
                .map(Held::Write),
            "fenced" => self
                .client
                .get_fenced_lock_with_owner(name, owner)
                .try_lock_for(wait)
                .await
                .map_err(kind)?
                .map(Held::Fenced),
            "redlock" => {
                let parts = self
                    .red
                    .iter()
                    .map(|c| c.get_lock_with_owner(name, owner).into())
                    .collect();
                let red = RedLock::new(parts).map_err(kind)?;
                red.try_lock_with_lease(wait, self.lease)
                    .await
                    .map_err(kind)?
                    .map(Held::Red)
            }
            other => crate::recipes::acquire(&self.client, other, name, wait)
                .await?
                .map(Held::Recipe),
        })
    }

    /// Inside the lock: enter the register, work (a short or a long hold, looking at the hold
    /// every 200 ms and stopping early when told), fenced writes at the start and at the end
    /// (the end one without looking first: a pause can fall between a check and a write, which
    /// is what fencing is for).
    async fn critical_section(&mut self, name: &str, seq: u64, owner: Owner, held: &mut Held) {
        let h = self.history.clone();
        let me = format!("{}/{}/{seq}", h.process, self.owner);
        let prev: String = match self
            .register
            .eval::<Value, _, _, _>(ENTER, vec![format!("occ:{name}")], vec![me])
            .await
        {
            Ok(v) => v.as_string().unwrap_or_else(|| "-".into()),
            Err(_) => "-".into(),
        };
        h.emit("G", self.owner, seq, now_ns(), &prev);
        let mut told = false;
        if let Held::Reentrant(..) = held {
            // The same owner again: at once, a second hold on the same lock. It can take up to
            // the wait (a failover under way): the first hold's loss notice is listened to
            // meanwhile, as during the work.
            let lock = self.client.get_lock_with_owner(name, owner);
            let again = lock.try_lock_for(self.wait);
            tokio::pin!(again);
            let result = loop {
                if told {
                    break again.as_mut().await;
                }
                tokio::select! {
                    r = again.as_mut() => break r,
                    _ = held.told() => {
                        told = true;
                        h.emit("T", self.owner, seq, now_ns(), &format!("{:?}", held.state()));
                    }
                }
            };
            match result {
                Ok(g) => {
                    if let Held::Reentrant(_, inner) = held {
                        *inner = g;
                    }
                }
                Err(e) => h.emit(
                    "X",
                    self.owner,
                    seq,
                    now_ns(),
                    &format!("reentry:{:?}", e.kind()),
                ),
            }
        }
        let token = held.token();
        if let Some(tok) = token {
            self.fenced_write(name, seq, tok).await;
        }
        let hold_ms = if self.rng.below(5) == 0 {
            300 + self.rng.below(2200)
        } else {
            5 + self.rng.below(55)
        };
        // A careful holder told during the re-entry does no work.
        let hold_ms = if told && token.is_none() { 0 } else { hold_ms };
        let until = tokio::time::Instant::now() + Duration::from_millis(hold_ms);
        loop {
            let now = tokio::time::Instant::now();
            if now >= until {
                break;
            }
            let step = (until - now).min(Duration::from_millis(200));
            if told {
                tokio::time::sleep(step).await;
            } else {
                tokio::select! {
                    _ = tokio::time::sleep(step) => {}
                    _ = held.told() => {
                        let t = now_ns();
                        told = true;
                        h.emit("T", self.owner, seq, t, &format!("{:?}", held.state()));
                        // A careful holder stops working; the fenced one writes once more
                        // below, as a paused one would.
                        if token.is_none() {
                            break;
                        }
                    }
                }
            }
            let state = held.state();
            let deadline = instant_ns(held.valid_until());
            h.emit(
                "O",
                self.owner,
                seq,
                now_ns(),
                &format!("{state:?} {deadline}"),
            );
        }
        if let Some(tok) = token {
            self.fenced_write(name, seq, tok).await;
        }
    }

    async fn fenced_write(&self, name: &str, seq: u64, token: u64) {
        let sent = now_ns();
        let r: Result<Value, _> = self
            .register
            .eval(
                FENCED_WRITE,
                vec![format!("fence:{name}")],
                vec![
                    token.to_string(),
                    format!("{}/{}/{seq}", self.history.process, self.owner),
                ],
            )
            .await;
        let reply = now_ns();
        let accepted = match r {
            Ok(v) => v.as_i64() == Some(1),
            Err(_) => return,
        };
        self.history.emit(
            "W",
            self.owner,
            seq,
            sent,
            &format!("{reply} {token} {}", u8::from(accepted)),
        );
    }
}
