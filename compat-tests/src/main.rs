//! `lock-peer`: drives the crate from standard input per `shared/peer-protocol.md`, so other
//! processes (tests, scripts, peers built on other clients such as Java Redisson) can share
//! locks with it.

use std::{
    collections::HashMap,
    io::Write,
    str::FromStr,
    sync::Arc,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use compat_tests::bench;

mod scale_commands;
mod sync_commands;
use redisson_lock::{
    AnyGuard, Client, Config, Error, ErrorKind, FairLock, FencedLock, GroupLock, LocalHandOff,
    NonReentrantFairLock, NonReentrantLock, Owner, RLock, ReadWriteLock, ShardedSubscriptionMode,
    SpinLock,
};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    sync::{mpsc, oneshot},
};

fn epoch_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis()
}

/// One output line at a time, flushed at once.
fn emit(line: &str) {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn one_line(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

enum Job {
    Command(Vec<String>),
    /// A command that is not run: its reply is `ERR INVALID: <message>`.
    Invalid(String, String),
    Barrier(oneshot::Sender<()>),
}

struct Args {
    watchdog_ms: u64,
    fair_wait_ms: u64,
    batch: usize,
    timeout_ms: u64,
    cluster: bool,
    sharded: ShardedSubscriptionMode,
    sentinel: Option<String>,
    tls_ca: Option<String>,
    /// `None`: the crate's default (on where replicas exist, 1 s); `Some(0)`: off.
    replica_sync_ms: Option<u64>,
    /// `--local-hand-off off|unbounded|<budget ms>`: the hand-off policy (else the default),
    /// for measurements and the fairness tests' negative controls.
    hand_off: Option<LocalHandOff>,
    url: String,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        watchdog_ms: 30_000,
        fair_wait_ms: 300_000,
        batch: 100,
        timeout_ms: 3_000,
        cluster: false,
        sharded: ShardedSubscriptionMode::Auto,
        sentinel: None,
        tls_ca: None,
        replica_sync_ms: None,
        hand_off: None,
        url: String::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut num = |name: &str| -> Result<u64, String> {
            it.next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("{name} needs a number"))
        };
        match arg.as_str() {
            "--watchdog-ms" => a.watchdog_ms = num("--watchdog-ms")?,
            "--fair-wait-ms" => a.fair_wait_ms = num("--fair-wait-ms")?,
            "--watchdog-batch" => a.batch = num("--watchdog-batch")? as usize,
            "--timeout-ms" => a.timeout_ms = num("--timeout-ms")?,
            "--cluster" => a.cluster = true,
            "--sharded-pubsub" => {
                a.sharded = match it.next().as_deref() {
                    Some("auto") => ShardedSubscriptionMode::Auto,
                    Some("on") => ShardedSubscriptionMode::On,
                    Some("off") => ShardedSubscriptionMode::Off,
                    Some("both") => ShardedSubscriptionMode::Both,
                    _ => return Err("--sharded-pubsub takes auto, on, off or both".into()),
                }
            }
            "--replica-sync-ms" => a.replica_sync_ms = Some(num("--replica-sync-ms")?),
            "--sentinel" => {
                a.sentinel = Some(it.next().ok_or("--sentinel needs the master's name")?)
            }
            "--tls-ca" => a.tls_ca = Some(it.next().ok_or("--tls-ca needs a PEM file")?),
            "--local-hand-off" => {
                a.hand_off = Some(match it.next().as_deref() {
                    Some("off") => LocalHandOff::Off,
                    Some("unbounded") => LocalHandOff::Unbounded,
                    Some(ms) => {
                        LocalHandOff::Bounded(Duration::from_millis(ms.parse().map_err(|_| {
                            "--local-hand-off takes off, unbounded or a budget in ms"
                        })?))
                    }
                    None => return Err("--local-hand-off needs a policy".into()),
                })
            }
            url if !url.starts_with("--") => a.url = url.to_owned(),
            other => return Err(format!("unknown option {other}")),
        }
    }
    if a.url.is_empty() {
        return Err("usage: lock-peer [options] redis://127.0.0.1:PORT".into());
    }
    Ok(a)
}

#[tokio::main]
async fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            emit(&format!("- ready ERR INVALID: {e}"));
            std::process::exit(2);
        }
    };
    let mut config = Config::default()
        .lock_watchdog_timeout(Duration::from_millis(args.watchdog_ms))
        .fair_lock_wait_timeout(Duration::from_millis(args.fair_wait_ms))
        .lock_watchdog_batch_size(args.batch)
        .timeout(Duration::from_millis(args.timeout_ms))
        .sharded_subscription_mode(args.sharded);
    if let Some(policy) = args.hand_off {
        config = config.local_hand_off(policy);
    }
    match args.replica_sync_ms {
        None => {}
        Some(0) => config = config.check_lock_synced_replicas(false),
        Some(ms) => {
            config = config
                .check_lock_synced_replicas(true)
                .replicas_sync_timeout(Duration::from_millis(ms))
        }
    }
    if let Some(ca) = &args.tls_ca {
        config = config.tls(redisson_lock::TlsSettings::new().ca_file(ca));
    }
    let connected = match &args.sentinel {
        Some(master) => {
            let sentinels: Vec<&str> = args.url.split(',').collect();
            Client::connect_sentinel(master, &sentinels, config).await
        }
        None if args.cluster => {
            let seeds: Vec<&str> = args.url.split(',').collect();
            Client::connect_cluster(&seeds, config).await
        }
        None => Client::connect(&args.url, config).await,
    };
    let client = match connected {
        Ok(c) => c,
        Err(e) => {
            emit(&format!(
                "- ready ERR {}: {}",
                kind_word(&e),
                one_line(&e.to_string())
            ));
            std::process::exit(1);
        }
    };
    emit(&format!(
        "- ready OK id={} version={} watchdog_ms={} fair_wait_ms={} watchdog_batch={} timeout_ms={}",
        client.id(),
        env!("CARGO_PKG_VERSION"),
        args.watchdog_ms,
        args.fair_wait_ms,
        args.batch,
        args.timeout_ms
    ));

    let mut threads: HashMap<String, mpsc::UnboundedSender<Job>> = HashMap::new();
    let mut scale = scale_commands::Scale::default();
    let mut input = BufReader::new(tokio::io::stdin());
    let mut raw = Vec::new();
    loop {
        raw.clear();
        match input.read_until(b'\n', &mut raw).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let line = match std::str::from_utf8(strip_newline(&raw)) {
            Ok(line) => line.trim(),
            Err(_) => {
                reject_invalid_utf8(&raw, &client, &mut threads);
                continue;
            }
        };
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let words: Vec<String> = line.split_whitespace().map(str::to_owned).collect();
        match words[0].as_str() {
            "id" => emit(&format!("- id OK {}", client.id())),
            "sleep" => {
                let ms = words.get(1).and_then(|v| v.parse().ok()).unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                emit("- sleep OK");
            }
            "await" => {
                let Some(name) = words.get(1) else {
                    emit("- await ERR INVALID: await needs a thread");
                    continue;
                };
                if let Some(tx) = threads.get(name) {
                    let (done, wait) = oneshot::channel();
                    if tx.send(Job::Barrier(done)).is_ok() {
                        let _ = wait.await;
                    }
                }
                emit(&format!("- await OK {name}"));
            }
            "bench" => emit(&run_bench(&client, &words[1..]).await),
            "scale" => emit(&scale.run(&client, &words[1..]).await),
            "quit" => break,
            "halt" => std::process::exit(137),
            thread => {
                let _ = thread_queue(&mut threads, &client, thread)
                    .send(Job::Command(words[1..].to_vec()));
            }
        }
    }
    // quit (or end of input): release nothing on purpose, stop the watchdog, shut down cleanly.
    client.shutdown().await;
    emit("- quit OK");
    std::process::exit(0);
}

/// The queue of a logical thread, started on first use.
fn thread_queue<'a>(
    threads: &'a mut HashMap<String, mpsc::UnboundedSender<Job>>,
    client: &Client,
    thread: &str,
) -> &'a mpsc::UnboundedSender<Job> {
    threads.entry(thread.to_owned()).or_insert_with(|| {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run_thread(client.clone(), thread.to_owned(), rx));
        tx
    })
}

/// A line without its `\n` or `\r\n`.
fn strip_newline(raw: &[u8]) -> &[u8] {
    let raw = raw.strip_suffix(b"\n").unwrap_or(raw);
    raw.strip_suffix(b"\r").unwrap_or(raw)
}

const NOT_UTF8: &str = "input line is not valid UTF-8";

/// Answers a line that is not valid UTF-8 with `ERR INVALID`; nothing of it runs. When its first
/// two words are valid UTF-8 and name a thread command, the reply is that thread's (in order with
/// the thread's other replies); otherwise it is a global reply.
fn reject_invalid_utf8(
    raw: &[u8],
    client: &Client,
    threads: &mut HashMap<String, mpsc::UnboundedSender<Job>>,
) {
    let mut words = strip_newline(raw)
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty())
        .map(std::str::from_utf8);
    match (words.next(), words.next()) {
        (Some(Ok(thread)), Some(Ok(command))) if !GLOBAL_COMMANDS.contains(&thread) => {
            let _ = thread_queue(threads, client, thread)
                .send(Job::Invalid(command.to_owned(), NOT_UTF8.to_owned()));
        }
        (Some(Ok(command)), _) => emit(&format!("- {command} ERR INVALID: {NOT_UTF8}")),
        _ => emit(&format!("- ? ERR INVALID: {NOT_UTF8}")),
    }
}

const GLOBAL_COMMANDS: [&str; 7] = ["id", "sleep", "await", "bench", "scale", "quit", "halt"];

async fn run_bench(client: &Client, args: &[String]) -> String {
    let parsed = (|| {
        let mode = bench::Mode::from_str(args.first()?).ok()?;
        let owners: usize = args.get(1)?.parse().ok()?;
        let millis: u64 = args.get(2)?.parse().ok()?;
        let locks: usize = args.get(3).map_or(Some(1), |v| v.parse().ok())?;
        Some((mode, owners, millis, locks))
    })();
    let Some((mode, owners, millis, locks)) = parsed else {
        return "- bench ERR INVALID: bench <uncontended|contended|leased> <threads> <millis> [locks]"
            .into();
    };
    match bench::run(client, mode, owners, Duration::from_millis(millis), locks).await {
        Ok(stats) => format!("- bench OK {}", stats.render()),
        Err(e) => format!(
            "- bench ERR {}: {}",
            kind_word(&e),
            one_line(&e.to_string())
        ),
    }
}

/// A lock of any family, as a logical thread holds it.
enum AnyLock {
    Reentrant(RLock),
    Fair(FairLock),
    Fenced(FencedLock),
    Spin(SpinLock),
    NonReentrant(NonReentrantLock),
    NonReentrantFair(NonReentrantFairLock),
    /// `glock` & co: one handle per (group, values) of a thread.
    Group(GroupLock),
    /// `r`/`w` share one read-write lock per name, so a thread can downgrade.
    ReadWrite(ReadWriteLock),
}

/// Runs `$body` with `$l` bound to the right lock handle (`$write` picks the write half).
macro_rules! with_lock {
    ($lock:expr, $write:expr, $l:ident => $body:expr) => {
        match $lock {
            AnyLock::Reentrant($l) => $body,
            AnyLock::Fair($l) => $body,
            AnyLock::Fenced($l) => $body,
            AnyLock::Spin($l) => $body,
            AnyLock::NonReentrant($l) => $body,
            AnyLock::NonReentrantFair($l) => $body,
            AnyLock::Group($l) => $body,
            AnyLock::ReadWrite(rw) if $write => {
                let $l = rw.write_lock();
                $body
            }
            AnyLock::ReadWrite(rw) => {
                let $l = rw.read_lock();
                $body
            }
        }
    };
}

/// A guard the peer keeps for one hold of a logical thread, to answer `lost` and `validms`.
/// Holds are released only by `unlock` (Java style), never by dropping: dropping a `Kept` keeps
/// the lock held.
struct Kept(Option<AnyGuard>);

impl Kept {
    fn guard(&self) -> &AnyGuard {
        self.0.as_ref().expect("a kept guard until dropped")
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        if let Some(g) = self.0.take() {
            g.keep();
        }
    }
}

/// What one logical thread knows: its owner, its lock handles, and the guards of its holds, per
/// (family, lock name), oldest first (one per acquisition still held).
struct ThreadState {
    owner: Owner,
    locks: HashMap<(&'static str, String), Arc<AnyLock>>,
    holds: HashMap<(&'static str, String), Vec<Kept>>,
}

impl ThreadState {
    /// Records a new hold. A hold already known lost is over for this thread (the lock expired
    /// or was taken away), so its guards are forgotten first: the new acquisition starts afresh.
    fn push_hold(&mut self, family: &'static str, name: &str, guard: AnyGuard) {
        let stack = self.holds.entry((family, name.to_owned())).or_default();
        if stack.last().is_some_and(|k| k.guard().is_lost()) {
            stack.clear();
        }
        stack.push(Kept(Some(guard)));
    }

    /// The guard of the most recent hold (its deadline is the one Redis follows).
    fn last_hold(&self, family: &'static str, name: &str) -> Option<&AnyGuard> {
        self.holds
            .get(&(family, name.to_owned()))
            .and_then(|stack| stack.last())
            .map(Kept::guard)
    }

    fn pop_hold(&mut self, family: &'static str, name: &str) {
        if let Some(stack) = self.holds.get_mut(&(family, name.to_owned())) {
            stack.pop();
        }
    }

    /// Forgets every hold of these families on `name`.
    fn clear_holds(&mut self, families: &[&'static str], name: &str) {
        for family in families {
            self.holds.remove(&(*family, name.to_owned()));
        }
    }
}

/// One logical thread: its own owner, its commands in order.
async fn run_thread(client: Client, thread: String, mut rx: mpsc::UnboundedReceiver<Job>) {
    let mut state = ThreadState {
        owner: Owner::new(),
        locks: HashMap::new(),
        holds: HashMap::new(),
    };
    while let Some(job) = rx.recv().await {
        let started = Instant::now();
        let (command, result) = match job {
            Job::Barrier(done) => {
                let _ = done.send(());
                continue;
            }
            Job::Invalid(command, msg) => (command, Err(invalid(&msg))),
            Job::Command(words) => {
                let Some(command) = words.first().cloned() else {
                    continue;
                };
                (command, execute(&client, &mut state, &words).await)
            }
        };
        let elapsed = started.elapsed().as_secs_f64() * 1000.0;
        let at = epoch_ms();
        let line = match result {
            Ok(v) => format!("{thread} {command} OK {v} elapsed_ms={elapsed:.3} at={at}"),
            Err((kind, msg)) => format!(
                "{thread} {command} ERR {kind}: {} elapsed_ms={elapsed:.3} at={at}",
                one_line(&msg)
            ),
        };
        emit(&line);
    }
}

type Reply = Result<String, (&'static str, String)>;

/// The one-word error kind of the peer protocol.
fn kind_word(e: &Error) -> &'static str {
    match e.kind() {
        ErrorKind::NotHeld => "NOT_HELD",
        ErrorKind::WrongType => "WRONG_TYPE",
        ErrorKind::InvalidArgument => "INVALID",
        ErrorKind::Timeout => "TIMEOUT",
        ErrorKind::Connection => "CONNECTION",
        ErrorKind::Ambiguous => "AMBIGUOUS",
        ErrorKind::PermissionDenied => "NO_PERMISSION",
        ErrorKind::LockLost => "LOCK_LOST",
        ErrorKind::Shutdown => "SHUTDOWN",
        ErrorKind::CrossSlot => "CROSS_SLOT",
        ErrorKind::Tls => "TLS",
        ErrorKind::NotReplicated => "NOT_REPLICATED",
        ErrorKind::Reentry => "REENTRY",
        _ => "REDIS",
    }
}

fn err(e: Error) -> (&'static str, String) {
    (kind_word(&e), format!("{e:#}"))
}

fn invalid(msg: &str) -> (&'static str, String) {
    ("INVALID", msg.to_owned())
}

fn millis_arg(words: &[String], i: usize) -> Result<Option<i64>, (&'static str, String)> {
    match words.get(i) {
        None => Ok(None),
        Some(v) => v
            .parse::<i64>()
            .map(Some)
            .map_err(|_| invalid(&format!("not a number: {v}"))),
    }
}

/// Splits `fencedtrylock` into (`fenced`, `trylock`); the longest prefix wins.
fn split_family(command: &str) -> Option<(&'static str, &str)> {
    for family in ["fenced", "spin", "nrf", "nr", "f", "r", "w", ""] {
        if let Some(op) = command.strip_prefix(family) {
            if is_operation(op) {
                return Some((family, op));
            }
        }
    }
    None
}

async fn execute(client: &Client, state: &mut ThreadState, words: &[String]) -> Reply {
    let owner = state.owner;
    let command = words[0].as_str();
    match command {
        "threadid" => return Ok(owner.id().to_string()),
        "lockname" => return Ok(format!("{}:{}", client.id(), owner.id())),
        "sleep" => {
            let ms = millis_arg(words, 1)?.unwrap_or(0).max(0) as u64;
            tokio::time::sleep(Duration::from_millis(ms)).await;
            return Ok("slept".into());
        }
        "glock" | "gtrylock" | "gunlock" => return group(client, state, words).await,
        _ => {}
    }
    if sync_commands::is_sync_command(command) {
        return sync_commands::execute(client, words).await;
    }
    let Some((family, op)) = split_family(command) else {
        return Err(("UNSUPPORTED", format!("unknown command {command}")));
    };
    let name = words
        .get(1)
        .ok_or_else(|| invalid("missing lock name"))?
        .clone();
    let target = Target {
        lock: lock_for(client, state, family, &name),
        family,
        name,
    };
    match op {
        "lock" | "trylock" => acquire(state, &target, op, words).await,
        "unlock" | "forceunlock" => release(state, &target, op).await,
        "lost" | "validms" => Ok(own_view(state, &target, op)),
        _ => query(&target, op).await,
    }
}

/// The lock a command names, as this thread sees it.
struct Target {
    lock: Arc<AnyLock>,
    family: &'static str,
    name: String,
}

impl Target {
    fn write(&self) -> bool {
        self.family == "w"
    }
    fn fenced(&self) -> bool {
        self.family == "fenced"
    }
}

/// `glock <group> <values> [leaseMs]`, `gtrylock <group> <values> [waitMs [leaseMs]]`,
/// `gunlock <group> <values>`: the group multi-lock over comma-separated string values.
async fn group(client: &Client, state: &mut ThreadState, words: &[String]) -> Reply {
    let (Some(group), Some(values)) = (words.get(1), words.get(2)) else {
        return Err(invalid("usage: <op> <group> <values> [...]"));
    };
    let values: Vec<&str> = values.split(',').filter(|v| !v.is_empty()).collect();
    if values.is_empty() {
        return Err(invalid("no values"));
    }
    let owner = state.owner;
    // One handle (and one record of holds) per group and value list.
    let name = format!("{group} {}", values.join(","));
    let lock = state
        .locks
        .entry(("g", name.clone()))
        .or_insert_with(|| {
            Arc::new(AnyLock::Group(
                client.get_group_lock_with_owner(group, &values, owner),
            ))
        })
        .clone();
    let target = Target {
        lock,
        family: "g",
        name,
    };
    match words[0].as_str() {
        "gunlock" => release(state, &target, "unlock").await,
        "glock" => acquire(state, &target, "lock", &words[1..]).await,
        _ => acquire(state, &target, "trylock", &words[1..]).await,
    }
}

/// The thread's handle for a family and name (`r`/`w` share one read-write lock per name, so
/// a thread can downgrade).
fn lock_for(
    client: &Client,
    state: &mut ThreadState,
    family: &'static str,
    name: &str,
) -> Arc<AnyLock> {
    let owner = state.owner;
    let slot = match family {
        "r" | "w" => "rw",
        other => other,
    };
    state
        .locks
        .entry((slot, name.to_owned()))
        .or_insert_with(|| {
            Arc::new(match slot {
                "f" => AnyLock::Fair(client.get_fair_lock_with_owner(name, owner)),
                "fenced" => AnyLock::Fenced(client.get_fenced_lock_with_owner(name, owner)),
                "spin" => AnyLock::Spin(client.get_spin_lock_with(
                    name,
                    owner,
                    redisson_lock::BackOff::default(),
                )),
                "nr" => {
                    AnyLock::NonReentrant(client.get_non_reentrant_lock_with_owner(name, owner))
                }
                "nrf" => AnyLock::NonReentrantFair(
                    client.get_non_reentrant_fair_lock_with_owner(name, owner),
                ),
                "rw" => AnyLock::ReadWrite(client.get_read_write_lock_with_owner(name, owner)),
                _ => AnyLock::Reentrant(client.get_lock_with_owner(name, owner)),
            })
        })
        .clone()
}

/// `lock` and `trylock`. A held lock stays held until `unlock`: the guard is kept for
/// `lost`/`validms`. Java semantics: a lease <= 0 means watchdog mode; a wait <= 0 means one
/// attempt.
async fn acquire(state: &mut ThreadState, t: &Target, op: &str, words: &[String]) -> Reply {
    let lease = |i| -> Result<Option<Duration>, (&'static str, String)> {
        Ok(millis_arg(words, i)?
            .filter(|ms| *ms > 0)
            .map(|ms| Duration::from_millis(ms as u64)))
    };
    let (write, fenced) = (t.write(), t.fenced());
    let mut held = |g: AnyGuard| -> String {
        let value = match g.token() {
            Some(t) if fenced => t.to_string(),
            _ => "locked".into(),
        };
        state.push_hold(t.family, &t.name, g);
        value
    };
    if op == "lock" {
        let lease = lease(2)?;
        let g = with_lock!(&*t.lock, write, l => match lease {
            Some(d) => l.lock_with_lease(d).await.map(|g| g.erase()),
            None => l.lock().await.map(|g| g.erase()),
        })
        .map_err(err)?;
        return Ok(held(g));
    }
    let wait = millis_arg(words, 2)?;
    let lease = lease(3)?;
    let g = with_lock!(&*t.lock, write, l => match (wait, lease) {
        (None, _) => l.try_lock().await,
        (Some(w), None) => l.try_lock_for(Duration::from_millis(w.max(0) as u64)).await,
        (Some(w), Some(d)) => {
            l.try_lock_with_lease(Duration::from_millis(w.max(0) as u64), d).await
        }
    }
    .map(|g| g.map(|g| g.erase())))
    .map_err(err)?;
    Ok(match g {
        Some(g) if fenced => held(g),
        Some(g) => {
            held(g);
            "true".into()
        }
        None if fenced => "null".into(),
        None => "false".into(),
    })
}

/// `unlock` and `forceunlock`, keeping the thread's record of its holds true.
async fn release(state: &mut ThreadState, t: &Target, op: &str) -> Reply {
    let write = t.write();
    if op == "forceunlock" {
        let freed = with_lock!(&*t.lock, write, l => l.force_unlock().await).map_err(err)?;
        if freed {
            // Every hold of the lock is gone, this thread's included (both halves of a
            // read-write lock).
            let both: &[&'static str] = &["r", "w"];
            let families: &[&'static str] = if matches!(t.family, "r" | "w") {
                both
            } else {
                &[t.family]
            };
            state.clear_holds(families, &t.name);
        }
        return Ok(freed.to_string());
    }
    match with_lock!(&*t.lock, write, l => l.unlock().await) {
        Ok(_) => {
            state.pop_hold(t.family, &t.name);
            Ok("unlocked".into())
        }
        Err(e) => {
            if matches!(e, Error::NotHeld { .. }) {
                // This thread holds nothing of it (any more).
                state.clear_holds(&[t.family], &t.name);
            }
            Err(err(e))
        }
    }
}

/// `islocked`, `holdcount`, `held`, `ttl`, `token`: one read from Redis.
async fn query(t: &Target, op: &str) -> Reply {
    let write = t.write();
    match op {
        "islocked" => with_lock!(&*t.lock, write, l => l.is_locked().await)
            .map(|b| b.to_string())
            .map_err(err),
        "holdcount" => with_lock!(&*t.lock, write, l => l.hold_count().await)
            .map(|n| n.to_string())
            .map_err(err),
        "held" => with_lock!(&*t.lock, write, l => l.is_held_by_current().await)
            .map(|b| b.to_string())
            .map_err(err),
        "ttl" => with_lock!(&*t.lock, write, l => l.remaining_ttl().await)
            .map(|t| t.as_pttl().to_string())
            .map_err(err),
        "token" => match &*t.lock {
            AnyLock::Fenced(l) => l.token().await.map(|t| t.to_string()).map_err(err),
            _ => Err(invalid("token is only defined for the fenced lock")),
        },
        other => Err((
            "UNSUPPORTED",
            format!("unknown command {}{other}", t.family),
        )),
    }
}

/// `lost` and `validms`: what the holder itself knows, from its guard; no Redis call.
fn own_view(state: &ThreadState, t: &Target, op: &str) -> String {
    match (op, state.last_hold(t.family, &t.name)) {
        ("lost", None) => "none".into(),
        ("lost", Some(g)) => g.is_lost().to_string(),
        (_, None) => "-1".into(),
        (_, Some(g)) => g
            .valid_until()
            .saturating_duration_since(tokio::time::Instant::now())
            .as_millis()
            .to_string(),
    }
}

fn is_operation(op: &str) -> bool {
    matches!(
        op,
        "lock"
            | "trylock"
            | "unlock"
            | "forceunlock"
            | "islocked"
            | "holdcount"
            | "held"
            | "ttl"
            | "token"
            | "lost"
            | "validms"
    )
}
