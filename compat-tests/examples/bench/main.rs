//! Benchmark: `cargo run --release -p compat-tests --example bench`
//!
//! Uses `REDIS_URL` when set, otherwise starts a throwaway redis-server on a free port. Sections
//! (`BENCH_ONLY=redisson,scale,client,cluster,replica,fairness` runs any subset; without it
//! every section runs, `BENCH_NO_CLUSTER=1` leaving out the cluster):
//!
//! * `redisson` (`versus.rs`): the crate beside real Java Redisson, row by row, in one run on
//!   one server. Each side is a process driven by the same line-protocol command (`bench <mode>
//!   <owners> <millis>`): the crate's `lock-peer` and the Java driver (`compat-tests/java/`) of
//!   Redisson `REDISSON_CLASSPATH` (and `REDISSON_CLASSPATH_ALT`, a second version), taking
//!   turns in rounds, with the server's pipelined ceiling for the same script pair measured in
//!   every round. Without a class path the Redisson side is skipped (and said so).
//! * `scale` (`scale.rs`): many holds (1k to 100k), many waiters (1k, 10k on distinct locks)
//!   and churn, the crate beside real Redisson in one run: memory per hold and per waiter, the
//!   renewals' cost on the server, what each client kept or lost.
//! * `client` (`client.rs`): the crate's own costs, in this process: the uncontended latency
//!   against a raw EVALSHA pair, the synchronizers, two `lock-peer` processes on one lock,
//!   server commands, allocations and CPU per lock+unlock, memory per held lock, the watchdog.
//! * `cluster`, `replica` (`client.rs`): the same latency on a 3+3 cluster; what the replica
//!   sync's `WAIT` costs.
//! * `fairness` (`fairness.rs`): two processes × 3 owners on one hot lock, beside real Java:
//!   shares and longest waits, Java beside Java as the reference, crate beside crate.
//!
//! The crate's side runs in `lock-peer` (`cargo build --release -p compat-tests --bin
//! lock-peer`; the bench builds it itself when run by `cargo run`), or the binary in
//! `BENCH_PEER`.

mod client;
mod fairness;
mod scale;
mod versus;

use compat_tests::peer;
use redisson_lock_test_kit::{cluster, redis_server, replica};
use std::{
    alloc::{GlobalAlloc, Layout, System},
    path::PathBuf,
    process::Command,
    sync::atomic::{AtomicI64, AtomicU64, Ordering},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use compat_tests::java::{Java, CLASSPATH, CLASSPATH_ALT};
use fred::{
    interfaces::{ClientLike, KeysInterface, LuaInterface},
    types::Value,
};

/// Counts heap allocations of the whole process (the client section's profile).
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);
static ALLOC_BYTES: AtomicU64 = AtomicU64::new(0);
/// Heap bytes allocated and not yet freed (requested sizes, without the allocator's overhead).
static LIVE_BYTES: AtomicI64 = AtomicI64::new(0);

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        ALLOC_BYTES.fetch_add(layout.size() as u64, Ordering::Relaxed);
        LIVE_BYTES.fetch_add(layout.size() as i64, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        ALLOC_BYTES.fetch_add(new_size as u64, Ordering::Relaxed);
        LIVE_BYTES.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// CPU time (user + system, all threads) of process `pid` so far (`None`: this process), from
/// /proc (clock ticks of 10 ms: measure over many operations). Zero when it cannot be read.
fn cpu_time(pid: Option<u32>) -> Duration {
    let path = pid.map_or("/proc/self/stat".to_owned(), |p| format!("/proc/{p}/stat"));
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    let after_name = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // Fields 14 and 15 of stat (utime, stime) are 11 and 12 after the name.
    Duration::from_millis((ticks(11) + ticks(12)) * 10)
}

/// The machine's load average (1, 5, 15 minutes), as `/proc/loadavg` has it.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

const ACQUIRE: &str = include_str!("../../../lua/lock_acquire.lua");
const RELEASE: &str = concat!(
    include_str!("../../../lua/notify.lua"),
    "\n",
    include_str!("../../../lua/lock_release.lua")
);

/// The crate's acquire and release scripts loaded on `redis`: their SHA1s.
async fn load_scripts(redis: &fred::clients::Client) -> (String, String) {
    if redis.is_clustered() {
        let acq: String = redis.script_load_cluster(ACQUIRE).await.unwrap();
        let rel: String = redis.script_load_cluster(RELEASE).await.unwrap();
        (acq, rel)
    } else {
        let acq: String = redis.script_load(ACQUIRE).await.unwrap();
        let rel: String = redis.script_load(RELEASE).await.unwrap();
        (acq, rel)
    }
}

/// The unlock latch a bare pair's release writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Latch {
    /// One latch key per lock, `redisson_unlock_latch:{name}:0`, with a 1 ms PX: nothing of
    /// it lingers, nothing deletes it.
    Fixed,
    /// A receipt per unlock request (`redisson_unlock_latch:{name}:<32 hex digits>`, unique),
    /// with the crate's PX (the command timeout and retry delay times the attempts), UNLINKed
    /// in batches of 512 by a task of its own: what the wire has each unlock write, and what the
    /// crate sends.
    PerUnlock,
}

/// One lock+unlock as two bare EVALSHAs of the crate's own scripts on `redis` (watchdog-mode
/// lease, 30 s), for the lock `name` with the owner field `owner`; its release writes the
/// latch `latch` with the PX `px`.
async fn raw_pair_with(
    redis: &fred::clients::Client,
    (acq, rel): (&str, &str),
    name: &str,
    owner: &str,
    publish: &str,
    (latch, px): (&str, &str),
) {
    let braced = braced(name);
    let channel = format!("redisson_lock__channel:{braced}");
    let _: Value = redis
        .evalsha(acq, vec![name], vec!["30000", owner])
        .await
        .unwrap();
    let _: Value = redis
        .evalsha(
            rel,
            vec![name, channel.as_str(), latch],
            vec!["0", "30000", owner, publish, px],
        )
        .await
        .unwrap();
}

/// The brace rule: `{name}`, or `name` when the name has a `{`.
fn braced(name: &str) -> String {
    if name.contains('{') {
        name.to_owned()
    } else {
        format!("{{{name}}}")
    }
}

/// [`raw_pair_with`] and a fixed latch ([`Latch::Fixed`]).
async fn raw_pair(
    redis: &fred::clients::Client,
    scripts: (&str, &str),
    name: &str,
    owner: &str,
    publish: &str,
) {
    let latch = format!("redisson_unlock_latch:{}:0", braced(name));
    raw_pair_with(redis, scripts, name, owner, publish, (&latch, "1")).await;
}

/// The server's pipelined ceiling for a lock+unlock's scripts: `tasks` tasks on one bare fred
/// client (one connection, whose writes fred batches while commands queue), each looping
/// [`raw_pair_with`] on a lock of its own for `for_`, each release writing `latch`. Pairs per
/// second.
async fn pair_ceiling(
    redis: &fred::clients::Client,
    tasks: usize,
    for_: Duration,
    latch: Latch,
) -> f64 {
    let (acq, rel) = load_scripts(redis).await;
    let defaults = redisson_lock::Config::default();
    let px = ((defaults.get_timeout() + defaults.get_retry_delay())
        * defaults.get_retry_attempts().max(1))
    .as_millis()
    .to_string();
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let started = Instant::now();
    let deadline = started + for_;
    let mut handles = Vec::new();
    for i in 0..tasks {
        let (redis, acq, rel, px) = (redis.clone(), acq.clone(), rel.clone(), px.clone());
        handles.push(tokio::spawn(async move {
            let name = format!("bench:ceiling:{i}");
            let braced = braced(&name);
            let fixed = format!("redisson_unlock_latch:{braced}:0");
            let mut spent = Vec::new();
            let mut n = 0u64;
            while Instant::now() < deadline {
                let scripts = (acq.as_str(), rel.as_str());
                match latch {
                    Latch::Fixed => {
                        raw_pair_with(
                            &redis,
                            scripts,
                            &name,
                            "ceiling:1",
                            "publish",
                            (&fixed, "1"),
                        )
                        .await
                    }
                    Latch::PerUnlock => {
                        let id = NEXT.fetch_add(1, Ordering::Relaxed);
                        let receipt = format!("redisson_unlock_latch:{braced}:{id:032x}");
                        raw_pair_with(
                            &redis,
                            scripts,
                            &name,
                            "ceiling:1",
                            "publish",
                            (&receipt, &px),
                        )
                        .await;
                        spent.push(receipt);
                        if spent.len() == 512 {
                            let (redis, keys) = (redis.clone(), std::mem::take(&mut spent));
                            tokio::spawn(async move {
                                let _: Result<i64, _> = redis.unlink(keys).await;
                            });
                        }
                    }
                }
                n += 1;
            }
            if !spent.is_empty() {
                let _: Result<i64, _> = redis.unlink(spent).await;
            }
            n
        }));
    }
    let mut total = 0;
    for h in handles {
        total += h.await.unwrap();
    }
    total as f64 / started.elapsed().as_secs_f64()
}

/// Commands lock clients send, summed from INFO commandstats: script calls, latch `UNLINK`s,
/// (un)subscriptions, their `PING` barriers and `PUBSUB NUMSUB`. (Not every command: the
/// commands a script runs are counted there too, and neither client sends another command on
/// these paths.)
async fn sent_commands(redis: &fred::clients::Client) -> u64 {
    let info: String = redis
        .info(Some(fred::types::InfoKind::CommandStats))
        .await
        .unwrap();
    info.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("cmdstat_")?;
            let (name, stats) = rest.split_once(":calls=")?;
            let calls: u64 = stats.split(',').next()?.parse().ok()?;
            matches!(
                name,
                "evalsha"
                    | "eval"
                    | "unlink"
                    | "ping"
                    | "subscribe"
                    | "unsubscribe"
                    | "psubscribe"
                    | "punsubscribe"
                    | "ssubscribe"
                    | "sunsubscribe"
                    | "pubsub|numsub"
                    | "pubsub|shardnumsub"
            )
            .then_some(calls)
        })
        .sum()
}

/// The server's process id (`INFO server`), to read its CPU time.
async fn server_pid(redis: &fred::clients::Client) -> Option<u32> {
    let info: String = redis.info(Some(fred::types::InfoKind::Server)).await.ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|v| v.trim().parse().ok())
}

/// A value of a `key=value` pair in a `lock-peer` line.
fn field(line: &str, key: &str) -> f64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

fn epoch_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
        * 1000.0
}

/// A number from the environment, or `default`.
fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The median of `values` (0 when empty).
fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The smallest and largest of `values`.
fn spread(values: &[f64]) -> (f64, f64) {
    values
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(*v), hi.max(*v))
        })
}

/// Whether the section `name` runs (`BENCH_ONLY` unset: every section).
fn runs(name: &str) -> bool {
    match std::env::var("BENCH_ONLY") {
        Ok(only) => only.split(',').any(|s| s.trim() == name),
        Err(_) => name != "cluster" || std::env::var("BENCH_NO_CLUSTER").is_err(),
    }
}

/// `REDIS_URL`, or a throwaway server of this run (kept running while the value lives).
fn server_url() -> (Option<redis_server::RedisServer>, String) {
    match std::env::var("REDIS_URL") {
        Ok(u) => (None, u),
        Err(_) => {
            let server = redis_server::RedisServer::start();
            let url = server.url();
            (Some(server), url)
        }
    }
}

/// The crate's `lock-peer` to run beside this bench: `BENCH_PEER`, or the one of this build's
/// profile (`target/<profile>/lock-peer`), built first when the bench runs under `cargo run`
/// (so that a stale binary is never measured). `None` (said why) when there is none.
fn lock_peer() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("BENCH_PEER") {
        return Some(PathBuf::from(path));
    }
    let exe = std::env::current_exe().ok()?;
    let profile_dir = exe.parent()?.parent()?;
    let peer = profile_dir.join("lock-peer");
    if let Ok(cargo) = std::env::var("CARGO") {
        let mut build = Command::new(cargo);
        build.args(["build", "-q", "-p", "compat-tests", "--bin", "lock-peer"]);
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        match build.status() {
            Ok(s) if s.success() => {}
            other => println!("could not build lock-peer ({other:?})"),
        }
    }
    if !peer.exists() {
        println!(
            "{} not built (cargo build --release -p compat-tests --bin lock-peer)",
            peer.display()
        );
        return None;
    }
    Some(peer)
}

/// Real Java Redisson from `REDISSON_CLASSPATH` and `REDISSON_CLASSPATH_ALT`, each with the
/// driver compiled against it; says what it skips.
fn javas() -> Vec<Java> {
    let mut out = Vec::new();
    for var in [CLASSPATH, CLASSPATH_ALT] {
        match Java::classpath_from(var) {
            None => println!(
                "  {var} not set: no Redisson from it (README, \"Beside real Java Redisson\")"
            ),
            Some(cp) => match Java::build(&cp) {
                Ok(j) => out.push(j),
                Err(e) => println!("  {var}: {e}"),
            },
        }
    }
    out
}

/// The JVM options of the Java peers: `BENCH_JAVA_OPTS` (words), by default none (the JVM's
/// own choices, as a service would run it).
fn jvm_options() -> Vec<String> {
    std::env::var("BENCH_JAVA_OPTS")
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

#[tokio::main]
async fn main() {
    println!(
        "bench: {} (load average {})",
        std::env::var("BENCH_ONLY").map_or("every section".to_owned(), |s| s),
        load()
    );
    if runs("redisson") {
        versus::figures().await;
    }
    if runs("scale") {
        scale::figures().await;
    }
    if runs("client") {
        client::standalone_figures().await;
    }
    if runs("cluster") {
        client::cluster_figures().await;
    }
    if runs("replica") {
        client::replica_figures().await;
    }
    if runs("fairness") {
        fairness::figures().await;
    }
    println!("bench done (load average {})", load());
}
