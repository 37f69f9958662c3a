//! Benchmark: `cargo run --release -p compat-tests --example bench`
//!
//! Uses `REDIS_URL` when set, otherwise starts a throwaway redis-server on a free port; then
//! starts a throwaway 3+3 Redis Cluster and reports the cluster figures beside the standalone
//! ones (skip with `BENCH_NO_CLUSTER=1`), and the replica-sync figures on a master with one
//! replica behind a loopback proxy. `BENCH_ONLY=standalone,cluster,replica` (any subset) runs
//! only those sections.
//! Speeds are reported as ratios against baselines measured in the same run on the same Redis,
//! so that machine noise cancels out: a raw pair of EVALSHA round trips (the crate's own acquire
//! and release scripts, sent with a bare fred client) for latency, and the server's pipelined
//! script ceiling (64 tasks sending the acquire script on one connection) for throughput. Each
//! row also reports the server commands it cost per lock+unlock (`INFO commandstats`).
//!
//! The profile section counts the client's own cost per uncontended lock+unlock: heap
//! allocations (a counting global allocator), and CPU time of the whole process (user + system,
//! fred's I/O included) divided by the operations.
//!
//! The cross-process row starts two `lock-peer` processes (built beside this example:
//! `cargo build --release -p compat-tests --bin lock-peer`) and has each run `bench contended 8`
//! at the same time on the same lock name.
//!
//! The fairness section (`BENCH_ONLY=fairness`) puts two clients with 3 owners each on one lock,
//! every owner looping lock → hold 100 ms → unlock, all starting together, and prints each
//! side's share of the acquisitions while both still had owners waiting and each side's longest
//! single wait in holds: two `lock-peer` processes; a `lock-peer` beside a Redisson-like client
//! (raw commands: a waiter attempts only on an unlock message or when the TTL it was told runs
//! out, no local queue: Java Redisson's behaviour); and the reference, two Redisson-like clients.
//! `BENCH_PEER_BEFORE=<path of another lock-peer>` adds the first two rows with that binary
//! (e.g. one built before a change), in the same run.

#[path = "../../tests/common/redis_server.rs"]
mod redis_server;

#[path = "../../tests/common/cluster.rs"]
mod cluster;

#[path = "../../tests/common/proxy.rs"]
mod proxy;

#[path = "../../tests/common/replica.rs"]
mod replica;

use std::{
    alloc::{GlobalAlloc, Layout, System},
    io::{BufRead, BufReader, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{
        atomic::{AtomicI64, AtomicU64, Ordering},
        Arc,
    },
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use compat_tests::bench::{self, Mode, Stats};
use fred::{
    clients::SubscriberClient,
    interfaces::{ClientLike, EventInterface, LuaInterface, PubsubInterface},
    types::{config::Config as FredConfig, Value},
};
use redisson_lock::{Client, Config};

/// Counts heap allocations of the whole process (the profile section).
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

/// CPU time (user + system) of this process so far, from /proc/self/stat (clock ticks of 10 ms
/// resolution: measure over many operations).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
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

const ACQUIRE: &str = include_str!("../../lua/lock_acquire.lua");
const RELEASE: &str = concat!(
    include_str!("../../lua/notify.lua"),
    "\n",
    include_str!("../../lua/lock_release.lua")
);

/// The baseline: the crate's acquire and release scripts as two bare EVALSHAs on one fred
/// client, for the lock `name` (on a cluster, routed to the node that owns `name`).
async fn raw_pairs(redis: &fred::clients::Client, name: &str, publish: &str, n: usize) -> Vec<u64> {
    let (acq, rel) = if redis.is_clustered() {
        let acq: String = redis.script_load_cluster(ACQUIRE).await.unwrap();
        let rel: String = redis.script_load_cluster(RELEASE).await.unwrap();
        (acq, rel)
    } else {
        let acq: String = redis.script_load(ACQUIRE).await.unwrap();
        let rel: String = redis.script_load(RELEASE).await.unwrap();
        (acq, rel)
    };
    // The brace rule: `prefix:{name}`, or `prefix:name` when the name has a `{`.
    let braced = if name.contains('{') {
        name.to_owned()
    } else {
        format!("{{{name}}}")
    };
    let channel = format!("redisson_lock__channel:{braced}");
    let latch = format!("redisson_unlock_latch:{braced}:0");
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let _: Value = redis
            .evalsha(&acq, vec![name], vec!["30000", "raw-owner:1"])
            .await
            .unwrap();
        let _: Value = redis
            .evalsha(
                &rel,
                vec![name, channel.as_str(), latch.as_str()],
                vec!["0", "30000", "raw-owner:1", publish, "1"],
            )
            .await
            .unwrap();
        samples.push(t.elapsed().as_micros() as u64);
    }
    samples
}

/// Uncontended p50 of the crate against the raw pair on the same node, in alternating rounds
/// so that drift on a noisy machine hits both alike. Returns (raw, crate).
async fn uncontended(
    client: &Client,
    raw: &fred::clients::Client,
    name: &str,
    publish: &str,
) -> (Stats, Stats) {
    raw_pairs(raw, &format!("{name}:raw"), publish, 500).await;
    crate_pairs(client, name, 500).await;
    let (mut base, mut ours) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        base.extend(raw_pairs(raw, &format!("{name}:raw"), publish, 1000).await);
        ours.extend(crate_pairs(client, name, 1000).await);
    }
    (
        Stats::from_samples(base, Duration::from_secs(1)),
        Stats::from_samples(ours, Duration::from_secs(1)),
    )
}

async fn crate_pairs(client: &Client, name: &str, n: usize) -> Vec<u64> {
    let lock = client.get_lock(name);
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let g = lock.lock().await.unwrap();
        g.unlock().await.unwrap();
        samples.push(t.elapsed().as_micros() as u64);
    }
    samples
}

/// EVALSHA/s of `tasks` tasks sending the acquire script back to back on one connection, each
/// on its own key (so every call takes the lock anew after a forced delete is not needed: the
/// re-entrant path runs the same commands).
async fn script_ceiling(redis: &fred::clients::Client, tasks: usize, for_: Duration) -> f64 {
    let acq: String = redis.script_load(ACQUIRE).await.unwrap();
    let deadline = Instant::now() + for_;
    let started = Instant::now();
    let mut handles = Vec::new();
    for i in 0..tasks {
        let (redis, acq) = (redis.clone(), acq.clone());
        handles.push(tokio::spawn(async move {
            let key = format!("bench:ceiling:{i}");
            let mut n = 0u64;
            while Instant::now() < deadline {
                let _: Value = redis
                    .evalsha(&acq, vec![key.as_str()], vec!["30000", "ceiling:1"])
                    .await
                    .unwrap();
                n += 1;
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
/// commands a script runs are counted there too, and the crate sends no other command on
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
                    | "ssubscribe"
                    | "sunsubscribe"
                    | "pubsub|numsub"
                    | "pubsub|shardnumsub"
            )
            .then_some(calls)
        })
        .sum()
}

/// Runs one closed-loop row and reports it with its server commands per lock+unlock.
async fn row(
    client: &Client,
    raw: &fred::clients::Client,
    mode: Mode,
    owners: usize,
    secs: Duration,
) -> (Stats, f64) {
    let before = sent_commands(raw).await;
    let s = bench::run(client, mode, owners, secs, 1).await.unwrap();
    let after = sent_commands(raw).await;
    let per_op = (after - before) as f64 / s.ops.max(1) as f64;
    (s, per_op)
}

/// `owners` tasks looping acquire(1) → release(1) on one semaphore of `permits` permits for
/// `secs`: pairs/s and the pair latency, and the server commands per pair.
async fn semaphore_row(
    client: &Client,
    raw: &fred::clients::Client,
    permits: u64,
    owners: usize,
    secs: Duration,
) -> (Stats, f64) {
    let name = format!("bench:semaphore:{permits}");
    let sem = client.get_semaphore(&name);
    sem.delete().await.unwrap();
    assert!(sem.try_set_permits(permits).await.unwrap());
    let before = sent_commands(raw).await;
    let started = Instant::now();
    let deadline = started + secs;
    let mut tasks = Vec::new();
    for _ in 0..owners {
        let sem = sem.clone();
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            while Instant::now() < deadline {
                let t = Instant::now();
                sem.acquire(1).await.unwrap();
                sem.release(1).await.unwrap();
                samples.push(t.elapsed().as_micros() as u64);
            }
            samples
        }));
    }
    let mut samples = Vec::new();
    for t in tasks {
        samples.extend(t.await.unwrap());
    }
    let s = Stats::from_samples(samples, started.elapsed());
    let after = sent_commands(raw).await;
    assert_eq!(sem.available_permits().await.unwrap(), permits as i64);
    (s, (after - before) as f64 / s.ops.max(1) as f64)
}

/// `waiters` tasks waiting on one count-down latch; the time from the count-down's return to
/// each waiter's return.
async fn latch_wake(client: &Client, waiters: usize) -> Stats {
    let latch = client.get_count_down_latch("bench:latch");
    latch.delete().await.unwrap();
    assert!(latch.try_set_count(1).await.unwrap());
    let channel = "redisson_countdownlatch__channel__{bench:latch}";
    let mut tasks = Vec::new();
    for _ in 0..waiters {
        let latch = latch.clone();
        tasks.push(tokio::spawn(async move {
            latch.wait().await.unwrap();
            Instant::now()
        }));
    }
    while client.stats().channels.get(channel).copied() != Some(waiters) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let started = Instant::now();
    latch.count_down().await.unwrap();
    let opened = Instant::now();
    let mut samples = Vec::new();
    for t in tasks {
        let woke = t.await.unwrap();
        samples.push(woke.saturating_duration_since(opened).as_micros() as u64);
    }
    Stats::from_samples(samples, started.elapsed())
}

/// Two `lock-peer` processes, each running `bench contended 8` on the same lock at once.
fn cross_process(url: &str, millis: u64) -> Option<Vec<String>> {
    let exe = std::env::current_exe().ok()?;
    let peer = exe.parent()?.parent()?.join("lock-peer");
    if !peer.exists() {
        println!(
            "cross-process row skipped: {} not built (cargo build --release -p compat-tests --bin lock-peer)",
            peer.display()
        );
        return None;
    }
    let mut children = Vec::new();
    for _ in 0..2 {
        let mut child = Command::new(&peer)
            .arg(url)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .ok()?;
        let mut out = BufReader::new(child.stdout.take()?);
        let mut ready = String::new();
        out.read_line(&mut ready).ok()?;
        if !ready.contains("ready OK") {
            println!("lock-peer did not start: {ready}");
            return None;
        }
        children.push((child, out));
    }
    for (child, _) in &mut children {
        let stdin = child.stdin.as_mut()?;
        writeln!(stdin, "bench contended 8 {millis}").ok()?;
        stdin.flush().ok()?;
    }
    let mut lines = Vec::new();
    for (child, out) in &mut children {
        let mut line = String::new();
        out.read_line(&mut line).ok()?;
        lines.push(line.trim().to_owned());
        if let Some(stdin) = child.stdin.as_mut() {
            let _ = writeln!(stdin, "quit");
        }
        let _ = child.wait();
    }
    Some(lines)
}

/// A value of a `key=value` pair in a `lock-peer` bench line.
fn field(line: &str, key: &str) -> f64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0.0)
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// Whether the section `name` runs (`BENCH_ONLY` unset: every section).
fn runs(name: &str) -> bool {
    match std::env::var("BENCH_ONLY") {
        Ok(only) => only.split(',').any(|s| s.trim() == name),
        Err(_) => name != "cluster" || std::env::var("BENCH_NO_CLUSTER").is_err(),
    }
}

#[tokio::main]
async fn main() {
    if runs("standalone") {
        standalone_figures().await;
    }
    if runs("cluster") {
        cluster_figures().await;
    }
    if runs("replica") {
        replica_figures().await;
    }
    if runs("fairness") {
        fairness_figures().await;
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

async fn standalone_figures() {
    let (_server, url) = server_url();
    let client = Client::connect(&url, Config::default()).await.unwrap();
    let raw = fred::clients::Client::new(FredConfig::from_url(&url).unwrap(), None, None, None);
    raw.init().await.unwrap();

    let (base, ours) = uncontended(&client, &raw, "bench:crate", "publish").await;
    println!("uncontended lock+unlock, one owner (10 x 1000 alternating rounds)");
    println!(
        "  raw EVALSHA pair : p50 {} us  p99 {} us",
        base.p50_us, base.p99_us
    );
    println!(
        "  redisson-lock    : p50 {} us  p99 {} us",
        ours.p50_us, ours.p99_us
    );
    println!(
        "  ratio p50        : {:.2}x (target <= 1.2x)",
        ours.p50_us as f64 / base.p50_us.max(1) as f64
    );

    let secs = Duration::from_secs(3);
    // The server's pipelined script ceiling, measured now: 64 tasks issuing the acquire
    // script back to back on one connection (half of a lock+unlock pair each).
    let ceiling = script_ceiling(&raw, 64, secs).await;
    let pairs_ceiling = ceiling / 2.0;
    println!(
        "pipelined script ceiling: {ceiling:.0} EVALSHA/s = {pairs_ceiling:.0} lock+unlock pairs/s"
    );
    let of_ceiling = |ops: f64| ops / pairs_ceiling * 100.0;
    // Java Redisson 3.52 on this kind of machine: the best of issue 11's side-by-side runs.
    const REDISSON_16_DISTINCT: f64 = 6_500.0;
    const REDISSON_16_ONE_LOCK: f64 = 1_800.0;
    const REDISSON_16_LEASED: f64 = 7_500.0;
    // The pipelined script ceiling of the server in the run where those were measured; a
    // loaded machine lowers the ceiling and the crate alike, so the bench also prints each
    // ratio scaled by this run's ceiling over that one.
    const REDISSON_RUN_CEILING: f64 = 110_000.0;
    let scale = ceiling / REDISSON_RUN_CEILING;

    let (s, cmds) = row(&client, &raw, Mode::Uncontended, 16, secs).await;
    println!("16 owners, distinct locks : {}", s.render());
    println!(
        "  {:.1} % of the ceiling; {:.1}x Redisson's best 6.5k/s, {:.1}x at this run's ceiling (target >= 5x); {cmds:.2} commands/op",
        of_ceiling(s.ops_per_s),
        s.ops_per_s / REDISSON_16_DISTINCT,
        s.ops_per_s / (REDISSON_16_DISTINCT * scale)
    );
    let (s, cmds) = row(&client, &raw, Mode::Contended, 16, secs).await;
    println!("16 owners, one lock        : {}", s.render());
    println!(
        "  {:.1} % of the ceiling; {:.1}x Redisson's best 1.8k hand-overs/s, {:.1}x at this run's ceiling (target >= 3x); p99 {:.1} ms (target <= 20 ms; Redisson ~83 ms); {cmds:.2} commands/op",
        of_ceiling(s.ops_per_s),
        s.ops_per_s / REDISSON_16_ONE_LOCK,
        s.ops_per_s / (REDISSON_16_ONE_LOCK * scale),
        s.p99_us as f64 / 1000.0
    );
    let (s, cmds) = row(&client, &raw, Mode::Leased, 16, secs).await;
    println!("16 owners, leased          : {}", s.render());
    println!(
        "  {:.1} % of the ceiling; {:.1}x Redisson's best 7.5k/s, {:.1}x at this run's ceiling (target >= 5x); {cmds:.2} commands/op",
        of_ceiling(s.ops_per_s),
        s.ops_per_s / REDISSON_16_LEASED,
        s.ops_per_s / (REDISSON_16_LEASED * scale)
    );
    let (s, cmds) = row(&client, &raw, Mode::Uncontended, 64, secs).await;
    println!("64 owners, distinct locks : {}", s.render());
    println!(
        "  {:.1} % of the ceiling (target >= 50 %); {cmds:.2} commands/op",
        of_ceiling(s.ops_per_s)
    );

    // Synchronizers: semaphore acquire+release pairs with 16 owners (16 permits: nobody
    // waits; 4 permits: 12 owners wait on the release messages), and the latch's wake-up.
    for permits in [16, 4] {
        let (s, cmds) = semaphore_row(&client, &raw, permits, 16, secs).await;
        println!("16 owners, semaphore of {permits:>2}: {}", s.render());
        println!(
            "  {:.1} % of the ceiling (pairs/s over the pipelined script ceiling's pairs/s); {cmds:.2} commands/op",
            of_ceiling(s.ops_per_s)
        );
    }
    let wake = latch_wake(&client, 100).await;
    println!(
        "count-down latch, 100 waiters: wake-up after the count-down p50 {} us  p99 {} us  max {} us",
        wake.p50_us, wake.p99_us, wake.max_us
    );

    // Two processes contending for one lock: 2 lock-peer processes x 8 owners.
    let before = sent_commands(&raw).await;
    if let Some(lines) = cross_process(&url, 3000) {
        let after = sent_commands(&raw).await;
        let ops: f64 = lines.iter().map(|l| field(l, "ops")).sum();
        let rate: f64 = lines.iter().map(|l| field(l, "ops_per_s")).sum();
        let p99 = lines.iter().map(|l| field(l, "p99_us")).fold(0.0, f64::max);
        println!("2 processes x 8 owners, one lock:");
        for l in &lines {
            println!("  {l}");
        }
        println!(
            "  together {rate:.0} hand-overs/s = {:.1}x Redisson's best 1.8k; worse p99 {:.1} ms (target <= 20 ms); share {:.0} % / {:.0} %; {:.2} commands/op",
            rate / REDISSON_16_ONE_LOCK,
            p99 / 1000.0,
            field(&lines[0], "ops") / ops.max(1.0) * 100.0,
            field(&lines[1], "ops") / ops.max(1.0) * 100.0,
            (after - before) as f64 / ops.max(1.0)
        );
    }

    // Server commands per uncontended lock+unlock (commands the client sends: script calls,
    // batched latch UNLINKs, PINGs), from INFO commandstats around a 2 000-pair run.
    let before = sent_commands(&raw).await;
    crate_pairs(&client, "bench:cost", 2000).await;
    tokio::time::sleep(Duration::from_millis(150)).await; // the last latch batch
    let after = sent_commands(&raw).await;
    println!(
        "commands per uncontended lock+unlock: {:.3} (target <= 2.1; was 3 with one DEL per release)",
        (after - before) as f64 / 2000.0
    );

    // The client's own cost per uncontended lock+unlock: allocations and process CPU.
    let n = 20_000u64;
    let (a0, b0, c0) = (
        ALLOCS.load(Ordering::Relaxed),
        ALLOC_BYTES.load(Ordering::Relaxed),
        cpu_time(),
    );
    let wall = Instant::now();
    crate_pairs(&client, "bench:profile", n as usize).await;
    let wall = wall.elapsed();
    let (a1, b1, c1) = (
        ALLOCS.load(Ordering::Relaxed),
        ALLOC_BYTES.load(Ordering::Relaxed),
        cpu_time(),
    );
    println!(
        "client cost per uncontended lock+unlock: {:.1} allocations ({:.0} bytes), {:.1} us CPU of {:.1} us wall",
        (a1 - a0) as f64 / n as f64,
        (b1 - b0) as f64 / n as f64,
        (c1 - c0).as_secs_f64() * 1e6 / n as f64,
        wall.as_secs_f64() * 1e6 / n as f64
    );
    let (a0, c0) = (ALLOCS.load(Ordering::Relaxed), cpu_time());
    let wall = Instant::now();
    raw_pairs(&raw, "bench:profile:raw", "publish", n as usize).await;
    let wall = wall.elapsed();
    let (a1, c1) = (ALLOCS.load(Ordering::Relaxed), cpu_time());
    println!(
        "  (the raw EVALSHA pair on a bare fred client: {:.1} allocations, {:.1} us CPU of {:.1} us wall)",
        (a1 - a0) as f64 / n as f64,
        (c1 - c0).as_secs_f64() * 1e6 / n as f64,
        wall.as_secs_f64() * 1e6 / n as f64
    );

    // Client memory per held watchdog lock (registration + guard).
    let n = 10_000;
    let before = rss_bytes();
    let live_before = LIVE_BYTES.load(Ordering::Relaxed);
    let mut guards = Vec::with_capacity(n);
    for i in 0..n {
        guards.push(
            client
                .get_lock(&format!("bench:mem:{i}"))
                .lock()
                .await
                .unwrap(),
        );
    }
    let after = rss_bytes();
    let live_after = LIVE_BYTES.load(Ordering::Relaxed);
    println!(
        "memory: {} held watchdog locks added {:.0} bytes of RSS per lock (target <= 1024); {:.0} bytes of live heap per lock (requested sizes, the guards' Vec included)",
        n,
        after.saturating_sub(before) as f64 / n as f64,
        (live_after - live_before) as f64 / n as f64
    );
    let calls = client.stats().renewal_calls;
    tokio::time::sleep(Duration::from_millis(10_500)).await;
    println!(
        "watchdog: {} renewal script calls in one 10 s period for {} locks (batch 100)",
        client.stats().renewal_calls - calls,
        n
    );
    drop(guards);
    client.shutdown().await;
}

/// The same uncontended ratio and 16-owner throughput on a 3+3 cluster (sharded pub/sub), the
/// baseline being a raw EVALSHA pair routed to the same node.
async fn cluster_figures() {
    let c = cluster::RedisCluster::start();
    let seeds = c.seed_urls();
    let seeds: Vec<&str> = seeds.iter().map(String::as_str).collect();
    let client = Client::connect_cluster(&seeds, Config::default())
        .await
        .unwrap();
    let raw = fred::clients::Client::new(
        FredConfig::from_url(&c.cluster_url()).unwrap(),
        None,
        None,
        None,
    );
    raw.init().await.unwrap();
    let (base, ours) = uncontended(&client, &raw, "{bench}:crate", "spublish").await;
    println!("cluster (3 masters + 3 replicas, sharded pub/sub):");
    println!(
        "  uncontended p50: raw EVALSHA pair {} us, redisson-lock {} us = {:.2}x",
        base.p50_us,
        ours.p50_us,
        ours.p50_us as f64 / base.p50_us.max(1) as f64
    );
    let s = bench::run(&client, Mode::Uncontended, 16, Duration::from_secs(3), 1)
        .await
        .unwrap();
    println!(
        "  16 owners, distinct locks (spread over the masters): {}",
        s.render()
    );
    client.shutdown().await;
}

/// One round of other tasks' lock traffic that writes no new hold, on `client`: a busy
/// `try_lock` (the acquire script, on a replica-sync connection when the master has replicas),
/// `is_locked` and an `unlock` of a lock not held (the release script, on the command
/// connection). `tasks` tasks in a closed loop for `for_`; returns per-round latencies (µs).
async fn other_traffic(client: &Client, busy: &str, tasks: usize, for_: Duration) -> Vec<u64> {
    let deadline = Instant::now() + for_;
    let mut handles = Vec::new();
    for i in 0..tasks {
        let busy = client.get_lock(busy);
        let mine = client.get_lock(&format!("bench:replica:other:{i}"));
        handles.push(tokio::spawn(async move {
            let mut samples = Vec::new();
            while Instant::now() < deadline {
                let t = Instant::now();
                assert!(busy.try_lock().await.unwrap().is_none());
                assert!(!mine.is_locked().await.unwrap());
                assert!(mine.unlock().await.is_err());
                samples.push(t.elapsed().as_micros() as u64);
            }
            samples
        }));
    }
    let mut all = Vec::new();
    for h in handles {
        all.extend(h.await.unwrap());
    }
    all
}

/// Uncontended lock+unlock p50 with and without replica sync, in alternating rounds.
async fn wait_cost(synced: &Client, unsynced: &Client, link: &str) {
    crate_pairs(synced, "bench:replica:warm", 200).await;
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        on.extend(crate_pairs(synced, "bench:replica:on", 400).await);
        off.extend(crate_pairs(unsynced, "bench:replica:off", 400).await);
    }
    let on = Stats::from_samples(on, Duration::from_secs(1));
    let off = Stats::from_samples(off, Duration::from_secs(1));
    println!(
        "  uncontended lock+unlock p50, replica {link}: synced {} us, unsynced {} us = {:.2}x \
         (the WAIT)",
        on.p50_us,
        off.p50_us,
        on.p50_us as f64 / off.p50_us.max(1) as f64
    );
}

/// Replica sync: what a `WAIT` costs an acquisition, and that an acquisition blocked in `WAIT`
/// (a frozen replica, 1 s sync timeout) does not hold up the client's other traffic.
async fn replica_figures() {
    let set = replica::ReplicaSet::start().await;
    let synced = Client::connect(&set.url(), Config::default())
        .await
        .unwrap();
    let unsynced = Client::connect(
        &set.url(),
        Config::default().check_lock_synced_replicas(false),
    )
    .await
    .unwrap();
    let busy = "bench:replica:busy";
    let _held = unsynced.get_lock(busy).lock().await.unwrap();

    println!("replica sync (master + 1 replica):");
    // The cost of the WAIT (healthy replica), alternating rounds: through the proxy, and with
    // the replica linked directly.
    wait_cost(&synced, &unsynced, "through the proxy").await;
    {
        let direct = replica::ReplicaSet::start_direct().await;
        let on = Client::connect(&direct.url(), Config::default())
            .await
            .unwrap();
        let off = Client::connect(
            &direct.url(),
            Config::default().check_lock_synced_replicas(false),
        )
        .await
        .unwrap();
        wait_cost(&on, &off, "linked directly").await;
        on.shutdown().await;
        off.shutdown().await;
    }

    // Other tasks' traffic on the synced client, without and while one acquisition waits 1 s
    // for a frozen replica (measured for 700 ms inside that second), 3 rounds each.
    let (mut quiet, mut blocked) = (Vec::new(), Vec::new());
    let mut stuck_ms = Vec::new();
    for _ in 0..3 {
        set.await_in_sync().await;
        quiet.extend(other_traffic(&synced, busy, 8, Duration::from_millis(700)).await);
        set.proxy.freeze();
        let stuck_lock = synced.get_lock("bench:replica:stuck");
        let started = Instant::now();
        let stuck = tokio::spawn(async move {
            let r = stuck_lock.try_lock().await;
            (r.map(|g| g.is_some()), started.elapsed())
        });
        replica::until(
            "the acquisition in WAIT",
            Duration::from_secs(10),
            || async { set.blocked_clients().await >= 1 },
        )
        .await;
        blocked.extend(other_traffic(&synced, busy, 8, Duration::from_millis(700)).await);
        let (outcome, took) = stuck.await.unwrap();
        assert!(outcome.is_err(), "the frozen replica never acknowledged");
        stuck_ms.push(took.as_millis());
        set.proxy.unfreeze();
    }
    let quiet = Stats::from_samples(quiet, Duration::from_secs(1));
    let blocked = Stats::from_samples(blocked, Duration::from_secs(1));
    println!(
        "  other tasks' lock traffic (busy try_lock + is_locked + unlock not held, 8 tasks): \
         p50 {} us without, {} us while one acquisition waits 1 s for a frozen replica \
         (it failed NotReplicated after {:?} ms) = {:.2}x (target <= 2x)",
        quiet.p50_us,
        blocked.p50_us,
        stuck_ms,
        blocked.p50_us as f64 / quiet.p50_us.max(1) as f64
    );
    synced.shutdown().await;
    unsynced.shutdown().await;
}

/// Owners per side in the fairness rows.
const FAIR_OWNERS: usize = 3;
/// Rounds (lock → hold → unlock) per owner in the fairness rows.
const FAIR_ROUNDS: usize = 25;
/// The hold of every owner in the fairness rows.
const FAIR_HOLD: Duration = Duration::from_millis(100);
/// The pause of every owner between its unlock and its next lock in the fairness rows. Java's
/// `unlock()` returns to the calling thread through a hop from the I/O thread, and its next
/// `lock()` goes back through one, about as long as a waiter's wake-up by the unlock message
/// takes; a raw client's owner would otherwise re-take the lock it just released every time
/// (its next attempt reaches Redis before any woken waiter's), which no Java client does.
const FAIR_PAUSE_MS: u64 = 1;

/// One acquisition of a fairness run: when (ms since the epoch), and how long the owner waited.
#[derive(Debug, Clone, Copy)]
struct Got {
    at_ms: f64,
    waited_ms: f64,
}

fn epoch_ms() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
        * 1000.0
}

/// One side of a fairness run.
#[derive(Clone)]
enum Side {
    /// A `lock-peer` process (the crate), this binary.
    Peer(PathBuf),
    /// A Redisson-like client in this process (raw commands).
    RedissonLike,
}

/// A started `lock-peer`, ready for commands.
struct Peer {
    child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
}

fn start_peer(exe: &Path, url: &str) -> Peer {
    let mut child = Command::new(exe)
        .arg(url)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start lock-peer");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut ready = String::new();
    out.read_line(&mut ready).unwrap();
    assert!(
        ready.contains("ready OK"),
        "lock-peer did not start: {ready}"
    );
    Peer { child, out }
}

/// Drives a started peer: its owners `t1..t3` loop lock → sleep → unlock; returns every
/// acquisition (read from the `lock` replies: `at=` is when it completed, `elapsed_ms=` how
/// long it waited).
fn drive_peer(mut peer: Peer, name: &str) -> Vec<Got> {
    let stdin = peer.child.stdin.as_mut().unwrap();
    let mut script = String::new();
    for round in 0..FAIR_ROUNDS {
        for t in 1..=FAIR_OWNERS {
            let _ = round;
            script.push_str(&format!(
                "t{t} lock {name}\nt{t} sleep {}\nt{t} unlock {name}\nt{t} sleep {FAIR_PAUSE_MS}\n",
                FAIR_HOLD.as_millis()
            ));
        }
    }
    stdin.write_all(script.as_bytes()).unwrap();
    stdin.flush().unwrap();
    let mut got = Vec::new();
    let mut unlocks = 0;
    let mut line = String::new();
    while unlocks < FAIR_OWNERS * FAIR_ROUNDS {
        line.clear();
        if peer.out.read_line(&mut line).unwrap() == 0 {
            panic!("lock-peer ended early");
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        assert!(
            words.get(2) == Some(&"OK"),
            "fairness run: lock-peer failed: {line}"
        );
        match words.get(1) {
            Some(&"lock") => got.push(Got {
                at_ms: field(&line, "at"),
                waited_ms: field(&line, "elapsed_ms"),
            }),
            Some(&"unlock") => unlocks += 1,
            _ => {}
        }
    }
    let _ = writeln!(stdin, "quit");
    let _ = peer.child.wait();
    got
}

/// A client that behaves as Java Redisson's `RLock.lock()` does, from raw commands: one
/// subscription to the lock's channel, a semaphore that every unlock message gives one permit,
/// and owners that attempt, and when busy sleep on the semaphore for at most the TTL the
/// attempt returned, then attempt again. No local queue, no hand-over.
struct RedissonLike {
    redis: fred::clients::Client,
    sub: SubscriberClient,
    permits: Arc<tokio::sync::Semaphore>,
    acquire: String,
    release: String,
    id: String,
}

impl RedissonLike {
    async fn connect(url: &str, name: &str, id: &str) -> RedissonLike {
        let config = FredConfig::from_url(url).unwrap();
        let redis = fred::clients::Client::new(config.clone(), None, None, None);
        redis.init().await.unwrap();
        let sub = SubscriberClient::new(config, None, None, None);
        sub.init().await.unwrap();
        let acquire: String = redis.script_load(ACQUIRE).await.unwrap();
        let release: String = redis.script_load(RELEASE).await.unwrap();
        let permits = Arc::new(tokio::sync::Semaphore::new(0));
        let channel = format!("redisson_lock__channel:{{{name}}}");
        let mut messages = sub.message_rx();
        sub.subscribe(channel.clone()).await.unwrap();
        let _: Value = sub.ping(None).await.unwrap();
        let p = permits.clone();
        tokio::spawn(async move {
            while let Ok(msg) = messages.recv().await {
                // Redisson releases one permit per message whether or not a thread waits at
                // that moment (a waiter between its failed attempt and its wait must not miss
                // it); capped here so stale permits stay few.
                if *msg.channel == *channel && p.available_permits() < FAIR_OWNERS {
                    p.add_permits(1);
                }
            }
        });
        RedissonLike {
            redis,
            sub,
            permits,
            acquire,
            release,
            id: id.to_owned(),
        }
    }

    /// Runs the owners; returns every acquisition.
    async fn run(self, name: &str) -> Vec<Got> {
        let me = Arc::new(self);
        let mut tasks = Vec::new();
        for owner in 1..=FAIR_OWNERS {
            let (me, name) = (me.clone(), name.to_owned());
            tasks.push(tokio::spawn(async move {
                let field = format!("{}:{owner}", me.id);
                let channel = format!("redisson_lock__channel:{{{name}}}");
                let mut got = Vec::new();
                for round in 0..FAIR_ROUNDS {
                    let started = Instant::now();
                    loop {
                        let reply: Value = me
                            .redis
                            .evalsha(&me.acquire, vec![name.as_str()], vec!["30000", &field])
                            .await
                            .unwrap();
                        let Some(ttl) = reply.as_i64() else { break };
                        let wait = Duration::from_millis(ttl.max(1) as u64);
                        if let Ok(Ok(permit)) =
                            tokio::time::timeout(wait, me.permits.acquire()).await
                        {
                            permit.forget();
                        }
                    }
                    got.push(Got {
                        at_ms: epoch_ms(),
                        waited_ms: started.elapsed().as_secs_f64() * 1000.0,
                    });
                    tokio::time::sleep(FAIR_HOLD).await;
                    let latch =
                        format!("redisson_unlock_latch:{{{name}}}:{}:{owner}:{round}", me.id);
                    let _: Value = me
                        .redis
                        .evalsha(
                            &me.release,
                            vec![name.as_str(), channel.as_str(), latch.as_str()],
                            vec!["0", "30000", field.as_str(), "publish", "1000"],
                        )
                        .await
                        .unwrap();
                    tokio::time::sleep(Duration::from_millis(FAIR_PAUSE_MS)).await;
                }
                got
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await.unwrap());
        }
        let _ = me.sub.quit().await;
        let _ = me.redis.quit().await;
        all
    }
}

/// What one fairness run measured, per side.
struct Fairness {
    /// Share of the acquisitions (%) while both sides still had owners waiting.
    share: [f64; 2],
    /// Longest single wait, in holds.
    longest: [f64; 2],
    /// Longest run of consecutive acquisitions by one side.
    run: [usize; 2],
}

impl Fairness {
    fn of(sides: [Vec<Got>; 2]) -> Fairness {
        let hold = FAIR_HOLD.as_secs_f64() * 1000.0;
        // Both still had owners waiting until the first side's last acquisition.
        let end = sides
            .iter()
            .map(|g| g.iter().map(|x| x.at_ms).fold(0.0, f64::max))
            .fold(f64::MAX, f64::min);
        let mut all: Vec<(f64, usize)> = Vec::new();
        for (i, got) in sides.iter().enumerate() {
            all.extend(got.iter().filter(|g| g.at_ms <= end).map(|g| (g.at_ms, i)));
        }
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        let counts = [0, 1].map(|i| all.iter().filter(|(_, s)| *s == i).count() as f64);
        let total = (counts[0] + counts[1]).max(1.0);
        let mut run = [0usize; 2];
        let mut current = (usize::MAX, 0usize);
        for (_, side) in &all {
            current = if current.0 == *side {
                (*side, current.1 + 1)
            } else {
                (*side, 1)
            };
            run[*side] = run[*side].max(current.1);
        }
        Fairness {
            share: [counts[0] / total * 100.0, counts[1] / total * 100.0],
            longest: [0, 1]
                .map(|i| sides[i].iter().map(|g| g.waited_ms).fold(0.0, f64::max) / hold),
            run,
        }
    }

    fn render(&self) -> String {
        format!(
            "share {:.0} % / {:.0} %; longest wait {:.1} / {:.1} holds; longest run {} / {}",
            self.share[0],
            self.share[1],
            self.longest[0],
            self.longest[1],
            self.run[0],
            self.run[1]
        )
    }
}

/// One fairness run of two sides on a fresh lock name.
async fn fairness_run(url: &str, sides: [Side; 2], tag: &str) -> Fairness {
    let name = format!("bench:fair:{tag}:{}", epoch_ms() as u64);
    // Everyone connects first; then all owners start together.
    let mut peers = Vec::new();
    let mut likes = Vec::new();
    for (i, side) in sides.iter().enumerate() {
        match side {
            Side::Peer(exe) => peers.push((i, start_peer(exe, url))),
            Side::RedissonLike => likes.push((
                i,
                RedissonLike::connect(url, &name, &format!("java-{tag}-{i}")).await,
            )),
        }
    }
    let mut handles = Vec::new();
    for (i, peer) in peers {
        let name = name.clone();
        handles.push((
            i,
            tokio::task::spawn_blocking(move || drive_peer(peer, &name)),
        ));
    }
    for (i, like) in likes {
        let name = name.clone();
        handles.push((i, tokio::spawn(async move { like.run(&name).await })));
    }
    let mut got: [Vec<Got>; 2] = [Vec::new(), Vec::new()];
    for (i, h) in handles {
        got[i] = h.await.unwrap();
    }
    Fairness::of(got)
}

/// The fairness rows (see the module doc).
async fn fairness_figures() {
    let (_server, url) = server_url();
    let exe = std::env::current_exe().unwrap();
    let peer = exe.parent().unwrap().parent().unwrap().join("lock-peer");
    if !peer.exists() {
        println!(
            "fairness rows skipped: {} not built (cargo build --release -p compat-tests --bin lock-peer)",
            peer.display()
        );
        return;
    }
    println!(
        "fairness: two clients x {FAIR_OWNERS} owners, each looping lock -> hold {} ms -> unlock {FAIR_ROUNDS} times, one lock, all starting together",
        FAIR_HOLD.as_millis()
    );
    println!("  (share of the acquisitions while both sides had owners waiting; longest single wait in holds; longest run of consecutive acquisitions by one side)");
    let mut rows: Vec<(String, [Side; 2])> = vec![
        (
            "crate beside crate                  ".into(),
            [Side::Peer(peer.clone()), Side::Peer(peer.clone())],
        ),
        (
            "crate beside Redisson-like          ".into(),
            [Side::Peer(peer.clone()), Side::RedissonLike],
        ),
        (
            "Redisson-like beside Redisson-like  ".into(),
            [Side::RedissonLike, Side::RedissonLike],
        ),
    ];
    if let Ok(before) = std::env::var("BENCH_PEER_BEFORE") {
        let before = PathBuf::from(before);
        rows.push((
            "before: crate beside crate          ".into(),
            [Side::Peer(before.clone()), Side::Peer(before.clone())],
        ));
        rows.push((
            "before: crate beside Redisson-like  ".into(),
            [Side::Peer(before), Side::RedissonLike],
        ));
    }
    let mut results = Vec::new();
    for (i, (label, sides)) in rows.into_iter().enumerate() {
        let f = fairness_run(&url, sides, &format!("r{i}")).await;
        println!("  {label}: {}", f.render());
        results.push(f);
    }
    let reference = results[2].longest[0].max(results[2].longest[1]);
    for (label, f) in [
        ("crate beside crate", &results[0]),
        ("crate beside Redisson-like", &results[1]),
    ] {
        let smaller = f.share[0].min(f.share[1]);
        let longest = f.longest[0].max(f.longest[1]);
        println!(
            "  {label}: smaller share {smaller:.0} % (target >= 40 %); longest wait {longest:.1} holds vs the reference's {reference:.1} (target <= 1.25x = {:.1})",
            reference * 1.25
        );
    }
}
