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
//! every owner looping lock → hold 100 ms → unlock, all starting together, for a fixed time
//! (12 s, `BENCH_FAIR_SECS`), and prints each side's share of the acquisitions, each side's
//! longest and 95th-percentile single wait in holds (a wait still going on when the run ends
//! counts up to then) and each side's longest run of consecutive acquisitions. The pairs: two
//! `lock-peer` processes; a `lock-peer` beside a Redisson-like client; and the reference, two
//! Redisson-like clients. Each pair runs 4 times (`BENCH_FAIR_RUNS`), the pairs taking turns so
//! that the machine's load drifts over all of them alike; the section prints every run and then
//! the runs of each pair pooled (about 500 acquisitions a pair, in 2.5 minutes).
//! `BENCH_PEER_BEFORE=<path of another lock-peer>` adds the first two pairs with that binary
//! (e.g. one built before a change), in the same runs.
//!
//! Why the fairness runs are built this way:
//! * **A fixed time, not a fixed number of rounds.** With rounds, the side that goes faster ends
//!   first and the share is read up to that moment, so the statistic hinges on one side's
//!   finish; with a fixed time every owner of both sides contends from the first acquisition to
//!   the last one counted, and the share is a plain count. The runs end by stopping both sides
//!   (`halt` for a peer, aborted tasks for the stand-in) on a lock name of their own.
//! * **Repeats, pooled.** One side of such a pair keeps the lock for several holds in a row (a
//!   Java client's releasing thread races for the lock again at once, see below), so the
//!   acquisitions are correlated and 150 of them left the share ±15 points from run to run
//!   (the reference pair gave 23/77 % and 42/58 %). The runs of each pair are pooled (about 480
//!   acquisitions); the spread of the runs is printed beside.
//! * **The Redisson-like client is Java Redisson 3.52's `RLock.lock()` / `unlock()`**, from raw
//!   commands (`RedissonLike`): attempt; busy → subscribe (one lock entry per channel per
//!   client, shared by its threads inside `lock()`; the first in subscribes, the last out
//!   unsubscribes) → attempt again → wait on the entry's latch (a semaphore that every unlock
//!   message releases once, uncapped) for at most the returned TTL → attempt, and so on. After
//!   `unlock()` returns, the owner calls `lock()` at once, as a Java thread looping over
//!   `lock(); try { work } finally { unlock(); }` does: no pause between the two.
//! * **Its owners are OS threads, its I/O runs on the runtime's threads**, as a Java thread
//!   blocks on each call while Netty's threads do the I/O. So the hops are Java's: the
//!   releasing owner's next attempt waits for the release's reply and one thread wake-up (the
//!   I/O thread completes the call, the owner's thread runs on), a waiter's attempt for the
//!   unlock message and one thread wake-up (the pub/sub connection's reader, a raw RESP socket,
//!   releases the latch itself, as Redisson's I/O thread does; a client library's message
//!   stream would add a task in between), and both send through the client's I/O thread. The
//!   race on each release is then decided as in Java: the releasing client brings two attempts
//!   (the releasing thread's and the one its latch woke) against one from every other client,
//!   and Redis sends the reply a few microseconds before the message, so the releasing thread
//!   often wins. With owners as tasks (one wake-up less on the releasing side than on the
//!   waiting side) it won every race it entered: one owner kept the lock for a whole run, which
//!   no Java client does beside another (Java Redisson 3.52 beside itself: 53/47 %, longest
//!   waits 19 and 18 holds). An earlier version slept 1 ms after each unlock as a stand-in for
//!   the thread hops, and capped the latch's permits; Java does neither.

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
    interfaces::{ClientLike, LuaInterface},
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
/// The hold of every owner in the fairness rows.
const FAIR_HOLD: Duration = Duration::from_millis(100);
/// How long one fairness run lasts (`BENCH_FAIR_SECS` overrides it).
const FAIR_SECS: u64 = 12;
/// How many runs of each pair the section makes, the pairs taking turns (`BENCH_FAIR_RUNS`
/// overrides it).
const FAIR_RUNS: usize = 4;

/// A number from the environment, or `default`.
fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// One acquisition of a fairness run: when it completed (ms since the epoch), and how long the
/// owner waited for it.
#[derive(Debug, Clone, Copy)]
struct Got {
    at_ms: f64,
    waited_ms: f64,
}

/// What one owner did in a fairness run: its acquisitions, and since when it has been waiting
/// when its record ends (`None`: it held the lock then).
#[derive(Debug, Clone, Default)]
struct OwnerLog {
    got: Vec<Got>,
    waiting_since: Option<f64>,
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

/// A peer whose owners `t1..t3` are looping lock → sleep → unlock (with no pause between an
/// unlock and the next lock: each logical thread runs its next command at once), more rounds
/// than a run can use; its replies are read on a thread of their own.
struct Driven {
    child: std::process::Child,
    reader: std::thread::JoinHandle<Vec<String>>,
}

fn drive_peer(peer: Peer, name: &str, secs: u64) -> Driven {
    let Peer { mut child, mut out } = peer;
    // Even one owner holding for the whole run does fewer rounds than this.
    let rounds = (secs * 1000 / FAIR_HOLD.as_millis() as u64) as usize + 2;
    let mut script = String::new();
    for _ in 0..rounds {
        for t in 1..=FAIR_OWNERS {
            script.push_str(&format!(
                "t{t} lock {name}\nt{t} sleep {}\nt{t} unlock {name}\n",
                FAIR_HOLD.as_millis()
            ));
        }
    }
    let stdin = child.stdin.as_mut().unwrap();
    stdin.write_all(script.as_bytes()).unwrap();
    stdin.flush().unwrap();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        let mut line = String::new();
        while out.read_line(&mut line).unwrap_or(0) > 0 {
            lines.push(std::mem::take(&mut line));
        }
        lines
    });
    Driven { child, reader }
}

/// Stops a driven peer at once (`halt`: its holds stay behind on this run's own lock name) and
/// reads what its owners did; `start`: when the run started (ms since the epoch).
fn stop_peer(mut driven: Driven, start: f64) -> Vec<OwnerLog> {
    if let Some(stdin) = driven.child.stdin.as_mut() {
        let _ = writeln!(stdin, "halt");
        let _ = stdin.flush();
    }
    let _ = driven.child.wait();
    let lines = driven.reader.join().unwrap();
    let mut logs = vec![
        OwnerLog {
            got: Vec::new(),
            waiting_since: Some(start),
        };
        FAIR_OWNERS
    ];
    for line in &lines {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(owner) = words
            .first()
            .and_then(|t| t.strip_prefix('t')?.parse::<usize>().ok())
        else {
            continue;
        };
        assert!(
            words.get(2) == Some(&"OK"),
            "fairness run: lock-peer failed: {line}"
        );
        let log = &mut logs[owner - 1];
        match words.get(1) {
            Some(&"lock") => {
                log.got.push(Got {
                    at_ms: field(line, "at"),
                    waited_ms: field(line, "elapsed_ms"),
                });
                log.waiting_since = None;
            }
            Some(&"unlock") => log.waiting_since = Some(field(line, "at")),
            _ => {}
        }
    }
    logs
}

/// Java's `Semaphore` as Redisson's lock entry uses it for its latch: `release` adds a permit
/// and wakes one waiting thread; `try_acquire` waits at most `timeout` for a permit (or until
/// the run stops).
#[derive(Default)]
struct Latch {
    permits: std::sync::Mutex<usize>,
    woken: std::sync::Condvar,
}

impl Latch {
    fn release(&self) {
        *self.permits.lock().unwrap() += 1;
        self.woken.notify_one();
    }

    fn try_acquire(&self, timeout: Duration, stop: &std::sync::atomic::AtomicBool) -> bool {
        let until = Instant::now() + timeout;
        let mut permits = self.permits.lock().unwrap();
        loop {
            if *permits > 0 {
                *permits -= 1;
                return true;
            }
            let now = Instant::now();
            if now >= until || stop.load(Ordering::Acquire) {
                return false;
            }
            permits = self.woken.wait_timeout(permits, until - now).unwrap().0;
        }
    }
}

/// Java Redisson's lock entry of one channel (`RedissonLockEntry`): how many of the client's
/// threads are inside `lock()`, and its latch.
struct LockEntry {
    count: usize,
    latch: Arc<Latch>,
}

/// The latch of the current lock entry, where the message reader finds it.
type CurrentLatch = Arc<std::sync::Mutex<Option<Arc<Latch>>>>;

/// The stand-in's pub/sub connection, raw RESP on a socket. Its reader task stands for
/// Redisson's I/O thread: it releases the current latch once per message itself, so that a
/// waiting owner is one thread wake-up away from the message, as the releasing owner is one
/// thread wake-up away from its reply (a client library's message stream would put a task in
/// between).
struct RawSubscriber {
    writer: tokio::sync::Mutex<tokio::net::tcp::OwnedWriteHalf>,
    /// Confirmations of `SUBSCRIBE`/`UNSUBSCRIBE`, in order.
    confirmed: tokio::sync::Mutex<tokio::sync::mpsc::UnboundedReceiver<()>>,
    reader: tokio::task::JoinHandle<()>,
}

impl RawSubscriber {
    async fn connect(url: &str, channel: &str, latch: CurrentLatch) -> RawSubscriber {
        let addr = url.trim_start_matches("redis://").trim_end_matches('/');
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.set_nodelay(true).unwrap();
        let (read, write) = stream.into_split();
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let channel = channel.as_bytes().to_vec();
        let reader = tokio::spawn(async move {
            use tokio::io::{AsyncBufReadExt, AsyncReadExt};
            let mut read = tokio::io::BufReader::new(read);
            let mut line = Vec::new();
            let number = |line: &[u8]| -> usize {
                std::str::from_utf8(&line[1..line.len() - 2])
                    .unwrap()
                    .parse()
                    .unwrap()
            };
            loop {
                // Every push on a RESP2 subscriber connection is an array.
                line.clear();
                if read.read_until(b'\n', &mut line).await.unwrap_or(0) == 0 {
                    return;
                }
                let mut parts = Vec::new();
                for _ in 0..number(&line) {
                    line.clear();
                    read.read_until(b'\n', &mut line).await.unwrap();
                    if line[0] == b'$' {
                        let mut bulk = vec![0; number(&line) + 2];
                        read.read_exact(&mut bulk).await.unwrap();
                        bulk.truncate(bulk.len() - 2);
                        parts.push(bulk);
                    } else {
                        parts.push(line[1..line.len() - 2].to_vec());
                    }
                }
                match parts.first().map(Vec::as_slice) {
                    Some(b"message") if parts.get(1) == Some(&channel) => {
                        if let Some(latch) = latch.lock().unwrap().as_ref() {
                            latch.release();
                        }
                    }
                    Some(b"subscribe" | b"unsubscribe") => {
                        let _ = tx.send(());
                    }
                    _ => {}
                }
            }
        });
        RawSubscriber {
            writer: tokio::sync::Mutex::new(write),
            confirmed: tokio::sync::Mutex::new(rx),
            reader,
        }
    }

    /// Sends `SUBSCRIBE`/`UNSUBSCRIBE` of `channel` and waits for its confirmation.
    async fn command(&self, command: &str, channel: &str) {
        use tokio::io::AsyncWriteExt;
        let frame = format!(
            "*2\r\n${}\r\n{command}\r\n${}\r\n{channel}\r\n",
            command.len(),
            channel.len()
        );
        let mut confirmed = self.confirmed.lock().await;
        self.writer
            .lock()
            .await
            .write_all(frame.as_bytes())
            .await
            .unwrap();
        confirmed.recv().await;
    }
}

/// A client that does what Java Redisson 3.52's `RLock.lock()` / `unlock()` do, from raw
/// commands (`redisson-lock-protocol.md` §3.2, §4.7). Each owner is an OS thread that blocks on
/// every call, as a Java thread does, while the I/O runs on the runtime's threads, as
/// Redisson's runs on Netty's:
/// * `lock()`: attempt; busy → subscribe (one entry per channel per client, counted over the
///   threads inside `lock()`: the first subscribes, the last to leave unsubscribes, each in
///   turn under the channel's lock); attempt again; then loop: wait on the entry's latch for
///   at most the TTL the attempt returned, attempt.
/// * Every unlock message releases the latch once (one permit, uncapped: Redisson does not cap
///   it; a permit nobody waited for makes a later wait return at once, and one more attempt).
/// * `unlock()`: the release script, waited for; the owner's loop then calls `lock()` at once.
struct RedissonLike {
    redis: fred::clients::Client,
    sub: Arc<RawSubscriber>,
    acquire: String,
    release: String,
    id: String,
    channel: String,
    entry: Arc<tokio::sync::Mutex<Option<LockEntry>>>,
    latch: CurrentLatch,
    runtime: tokio::runtime::Handle,
    stop: std::sync::atomic::AtomicBool,
}

impl RedissonLike {
    async fn connect(url: &str, name: &str, id: &str) -> RedissonLike {
        let config = FredConfig::from_url(url).unwrap();
        let redis = fred::clients::Client::new(config, None, None, None);
        redis.init().await.unwrap();
        let acquire: String = redis.script_load(ACQUIRE).await.unwrap();
        let release: String = redis.script_load(RELEASE).await.unwrap();
        let channel = format!("redisson_lock__channel:{{{name}}}");
        let latch: CurrentLatch = Arc::default();
        let sub = Arc::new(RawSubscriber::connect(url, &channel, latch.clone()).await);
        RedissonLike {
            redis,
            sub,
            acquire,
            release,
            id: id.to_owned(),
            channel,
            entry: Arc::default(),
            latch,
            runtime: tokio::runtime::Handle::current(),
            stop: Default::default(),
        }
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// One attempt, from an owner's thread: `None` acquired, else the lock's TTL in ms.
    fn attempt(&self, name: &str, field: &str) -> Option<i64> {
        let reply: Value = self
            .runtime
            .block_on(
                self.redis
                    .evalsha(&self.acquire, vec![name], vec!["30000", field]),
            )
            .unwrap();
        reply.as_i64()
    }

    /// Joins the channel's entry (subscribing if it is the first); returns its latch.
    fn subscribe(&self) -> Arc<Latch> {
        self.runtime.block_on(async {
            let mut entry = self.entry.lock().await;
            if let Some(e) = entry.as_mut() {
                e.count += 1;
                return e.latch.clone();
            }
            let latch = Arc::new(Latch::default());
            *self.latch.lock().unwrap() = Some(latch.clone());
            self.sub.command("SUBSCRIBE", &self.channel).await;
            *entry = Some(LockEntry {
                count: 1,
                latch: latch.clone(),
            });
            latch
        })
    }

    /// Leaves the channel's entry without waiting (Java's `unsubscribe` is asynchronous: the
    /// count drops at once when the channel's lock is free, and the last one out sends
    /// `UNSUBSCRIBE` holding it).
    fn unsubscribe(self: &Arc<Self>) {
        let me = self.clone();
        let leave = move |mut entry: tokio::sync::OwnedMutexGuard<Option<LockEntry>>| {
            let e = entry.as_mut()?;
            e.count -= 1;
            if e.count > 0 {
                return None;
            }
            *entry = None;
            *me.latch.lock().unwrap() = None;
            let sub = me.sub.clone();
            let channel = me.channel.clone();
            Some(async move {
                sub.command("UNSUBSCRIBE", &channel).await;
                drop(entry);
            })
        };
        match self.entry.clone().try_lock_owned() {
            Ok(guard) => {
                if let Some(unsubscribe) = leave(guard) {
                    self.runtime.spawn(unsubscribe);
                }
            }
            Err(_) => {
                let entry = self.entry.clone();
                self.runtime.spawn(async move {
                    if let Some(unsubscribe) = leave(entry.lock_owned().await) {
                        unsubscribe.await;
                    }
                });
            }
        }
    }

    /// Java's `lock()`, from an owner's thread; `false`: the run stopped first.
    fn lock(self: &Arc<Self>, name: &str, field: &str) -> bool {
        if self.attempt(name, field).is_none() {
            return true;
        }
        let latch = self.subscribe();
        let mut acquired = false;
        while !self.stopped() {
            let Some(ttl) = self.attempt(name, field) else {
                acquired = true;
                break;
            };
            let wait = if ttl >= 0 {
                Duration::from_millis(ttl as u64)
            } else {
                Duration::MAX / 2
            };
            latch.try_acquire(wait, &self.stop);
        }
        self.unsubscribe();
        acquired
    }

    /// Java's `unlock()`, from an owner's thread (`request`: unique per call, as Redisson's
    /// request id: the release script keeps its answer under it for a retried release).
    fn unlock(&self, name: &str, field: &str, request: &str) {
        let latch = format!("redisson_unlock_latch:{{{name}}}:{request}");
        let _: Value = self
            .runtime
            .block_on(self.redis.evalsha(
                &self.release,
                vec![name, self.channel.as_str(), latch.as_str()],
                vec!["0", "30000", field, "publish", "1000"],
            ))
            .unwrap();
    }

    /// Runs the owners, each a thread looping lock → hold → unlock, until `deadline`; returns
    /// what each did (an owner still waiting then stops where it is).
    async fn run(self, name: &str, start: f64, deadline: Instant) -> Vec<OwnerLog> {
        let me = Arc::new(self);
        let mut threads = Vec::new();
        for owner in 0..FAIR_OWNERS {
            let (me, name) = (me.clone(), name.to_owned());
            threads.push(std::thread::spawn(move || {
                let field = format!("{}:{owner}", me.id);
                let mut log = OwnerLog {
                    got: Vec::new(),
                    waiting_since: Some(start),
                };
                for round in 0u64.. {
                    let started = Instant::now();
                    if !me.lock(&name, &field) {
                        break;
                    }
                    log.got.push(Got {
                        at_ms: epoch_ms(),
                        waited_ms: started.elapsed().as_secs_f64() * 1000.0,
                    });
                    log.waiting_since = None;
                    std::thread::sleep(FAIR_HOLD);
                    me.unlock(&name, &field, &format!("{field}:{round}"));
                    log.waiting_since = Some(epoch_ms());
                    if me.stopped() {
                        break;
                    }
                }
                log
            }));
        }
        tokio::time::sleep_until(deadline.into()).await;
        me.stop.store(true, Ordering::Release);
        if let Some(latch) = me.latch.lock().unwrap().as_ref() {
            let _guard = latch.permits.lock().unwrap();
            latch.woken.notify_all();
        }
        let logs = tokio::task::spawn_blocking(move || {
            threads
                .into_iter()
                .map(|t| t.join().unwrap())
                .collect::<Vec<_>>()
        })
        .await
        .unwrap();
        me.sub.reader.abort();
        let _ = me.redis.quit().await;
        logs
    }
}

/// What one fairness run measured, per side.
#[derive(Debug, Clone)]
struct Fairness {
    /// Acquisitions within the run (every owner of both sides contended all along).
    count: [usize; 2],
    /// Every wait, in holds: those that ended in an acquisition within the run, and those still
    /// going on when it ended (counted up to then).
    waits: [Vec<f64>; 2],
    /// Longest run of consecutive acquisitions by one side.
    run: [usize; 2],
}

impl Fairness {
    fn of(sides: [Vec<OwnerLog>; 2], start: f64, end: f64) -> Fairness {
        let hold = FAIR_HOLD.as_secs_f64() * 1000.0;
        let mut all: Vec<(f64, usize)> = Vec::new();
        let mut waits: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        for (i, owners) in sides.iter().enumerate() {
            for owner in owners {
                let mut still = owner.waiting_since;
                for g in &owner.got {
                    if g.at_ms <= end {
                        all.push((g.at_ms, i));
                        waits[i].push(g.waited_ms / hold);
                    } else {
                        // Acquired after the end: it was still waiting then.
                        still = Some(g.at_ms - g.waited_ms);
                        break;
                    }
                }
                if let Some(since) = still.filter(|s| *s < end) {
                    waits[i].push((end - since.max(start)) / hold);
                }
            }
        }
        all.sort_by(|a, b| a.0.total_cmp(&b.0));
        let count = [0, 1].map(|i| all.iter().filter(|(_, s)| *s == i).count());
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
        Fairness { count, waits, run }
    }

    /// Several runs of one pair taken together.
    fn pooled(runs: &[Fairness]) -> Fairness {
        let mut p = Fairness {
            count: [0, 0],
            waits: [Vec::new(), Vec::new()],
            run: [0, 0],
        };
        for f in runs {
            for i in 0..2 {
                p.count[i] += f.count[i];
                p.waits[i].extend(&f.waits[i]);
                p.run[i] = p.run[i].max(f.run[i]);
            }
        }
        p
    }

    fn share(&self) -> [f64; 2] {
        let total = (self.count[0] + self.count[1]).max(1) as f64;
        self.count.map(|c| c as f64 / total * 100.0)
    }

    fn smaller_share(&self) -> f64 {
        let s = self.share();
        s[0].min(s[1])
    }

    fn longest(&self) -> [f64; 2] {
        [0, 1].map(|i| self.waits[i].iter().copied().fold(0.0, f64::max))
    }

    fn p95(&self) -> [f64; 2] {
        [0, 1].map(|i| {
            let mut w = self.waits[i].clone();
            w.sort_by(f64::total_cmp);
            w.get(((w.len().max(1) - 1) as f64 * 0.95).round() as usize)
                .copied()
                .unwrap_or(0.0)
        })
    }

    fn render(&self) -> String {
        let (s, l, p) = (self.share(), self.longest(), self.p95());
        format!(
            "share {:.0} % / {:.0} % of {}; longest wait {:.1} / {:.1} holds (p95 {:.1} / {:.1}); longest run {} / {}",
            s[0],
            s[1],
            self.count[0] + self.count[1],
            l[0],
            l[1],
            p[0],
            p[1],
            self.run[0],
            self.run[1]
        )
    }
}

/// One fairness run of two sides on a fresh lock name, `secs` long.
async fn fairness_run(url: &str, sides: &[Side; 2], tag: &str, secs: u64) -> Fairness {
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
    let start = epoch_ms();
    let deadline = Instant::now() + Duration::from_secs(secs);
    let end = start + secs as f64 * 1000.0;
    let driven: Vec<(usize, Driven)> = peers
        .into_iter()
        .map(|(i, peer)| (i, drive_peer(peer, &name, secs)))
        .collect();
    let mut handles = Vec::new();
    for (i, like) in likes {
        let name = name.clone();
        handles.push((
            i,
            tokio::spawn(async move { like.run(&name, start, deadline).await }),
        ));
    }
    tokio::time::sleep_until(deadline.into()).await;
    let mut logs: [Vec<OwnerLog>; 2] = [Vec::new(), Vec::new()];
    for (i, d) in driven {
        logs[i] = tokio::task::spawn_blocking(move || stop_peer(d, start))
            .await
            .unwrap();
    }
    for (i, h) in handles {
        logs[i] = h.await.unwrap();
    }
    Fairness::of(logs, start, end)
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
    let secs = env_or("BENCH_FAIR_SECS", FAIR_SECS);
    let repeats = env_or("BENCH_FAIR_RUNS", FAIR_RUNS).max(1);
    println!(
        "fairness: two clients x {FAIR_OWNERS} owners on one lock, each owner looping lock -> hold {} ms -> unlock; {repeats} runs of {secs} s per pair, the pairs taking turns",
        FAIR_HOLD.as_millis()
    );
    println!("  (share of the acquisitions; longest and 95th-percentile wait of one owner in holds, waits still going on at the end included; longest run of consecutive acquisitions by one side)");
    let mut rows: Vec<(&str, [Side; 2])> = vec![
        (
            "crate beside crate                 ",
            [Side::Peer(peer.clone()), Side::Peer(peer.clone())],
        ),
        (
            "crate beside Redisson-like         ",
            [Side::Peer(peer.clone()), Side::RedissonLike],
        ),
        (
            "Redisson-like beside Redisson-like ",
            [Side::RedissonLike, Side::RedissonLike],
        ),
    ];
    if let Ok(before) = std::env::var("BENCH_PEER_BEFORE") {
        let before = PathBuf::from(before);
        rows.push((
            "before: crate beside crate         ",
            [Side::Peer(before.clone()), Side::Peer(before.clone())],
        ));
        rows.push((
            "before: crate beside Redisson-like ",
            [Side::Peer(before), Side::RedissonLike],
        ));
    }
    let mut results: Vec<Vec<Fairness>> = vec![Vec::new(); rows.len()];
    for r in 0..repeats {
        for (i, (label, sides)) in rows.iter().enumerate() {
            let f = fairness_run(&url, sides, &format!("r{i}x{r}"), secs).await;
            println!("  run {}: {label}: {}", r + 1, f.render());
            results[i].push(f);
        }
    }
    println!("  all {repeats} runs together:");
    let pooled: Vec<Fairness> = results.iter().map(|r| Fairness::pooled(r)).collect();
    for ((label, _), (p, runs)) in rows.iter().zip(pooled.iter().zip(&results)) {
        let smaller: Vec<f64> = runs.iter().map(Fairness::smaller_share).collect();
        let mean = smaller.iter().sum::<f64>() / smaller.len() as f64;
        let sd = (smaller.iter().map(|s| (s - mean).powi(2)).sum::<f64>()
            / (smaller.len().max(2) - 1) as f64)
            .sqrt();
        let (lo, hi) = smaller
            .iter()
            .fold((f64::MAX, 0.0f64), |(lo, hi), s| (lo.min(*s), hi.max(*s)));
        println!(
            "    {label}: {}; smaller side per run {lo:.0}-{hi:.0} % (mean {mean:.0}, sd {sd:.0})",
            p.render()
        );
    }
    let reference = &pooled[2];
    let reference_longest = reference.longest()[0].max(reference.longest()[1]);
    for (label, f) in [
        ("crate beside crate", &pooled[0]),
        ("crate beside Redisson-like", &pooled[1]),
    ] {
        let longest = f.longest()[0].max(f.longest()[1]);
        println!(
            "  {label}: smaller share {:.0} % (target >= 40 %); longest wait {longest:.1} holds vs the reference's {reference_longest:.1} (target <= 1.25x = {:.1})",
            f.smaller_share(),
            reference_longest * 1.25
        );
    }
}
