//! The `client`, `cluster` and `replica` sections: the crate's own costs, in this process.
//!
//! Latency is a ratio against a baseline measured in the same run on the same Redis, in
//! alternating rounds: a raw pair of EVALSHA round trips (the crate's own acquire and release
//! scripts, sent with a bare fred client). The synchronizer rows report pairs per second as a
//! share of the server's pipelined ceiling for a lock's script pair (`pair_ceiling`, 16 tasks)
//! and the server commands each pair cost (`INFO commandstats`). The cross-process row starts
//! two `lock-peer` processes and has each run `bench contended 8` at the same time on the same
//! lock name.
//!
//! The profile counts the client's own cost per uncontended lock+unlock: heap allocations (the
//! counting global allocator of `main.rs`), and CPU time of the whole process (user + system,
//! fred's I/O included) divided by the operations; the same for the bare fred client sending
//! the same two scripts.

use std::{
    io::{BufRead, BufReader, Write},
    process::{Command, Stdio},
    sync::atomic::Ordering,
    time::{Duration, Instant},
};

use compat_tests::bench::{self, Mode, Stats};
use fred::{interfaces::ClientLike, types::config::Config as FredConfig};
use redisson_lock::{Client, Config};

use crate::{
    cluster, cpu_time, field, load_scripts, lock_peer, pair_ceiling, raw_pair, replica,
    sent_commands, server_url, Latch, ALLOCS, ALLOC_BYTES, LIVE_BYTES,
};

/// The baseline: the crate's acquire and release scripts as two bare EVALSHAs on one fred
/// client, for the lock `name` (on a cluster, routed to the node that owns `name`).
async fn raw_pairs(redis: &fred::clients::Client, name: &str, publish: &str, n: usize) -> Vec<u64> {
    let (acq, rel) = load_scripts(redis).await;
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        raw_pair(redis, (&acq, &rel), name, "raw-owner:1", publish).await;
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
                sem.acquire(1).await.unwrap().forget();
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
    let Some(peer) = lock_peer() else {
        println!("cross-process row skipped: no lock-peer");
        return None;
    };
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

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

/// The `client` section.
pub async fn standalone_figures() {
    println!();
    println!("== client: the crate's own costs, in this process ==");
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
    // The server's pipelined ceiling for a lock's script pair, measured now (16 tasks, the
    // synchronizer rows' owners). The lock rows, beside Redisson: the `redisson` section.
    let pairs_ceiling = pair_ceiling(&raw, 16, secs, Latch::Fixed).await;
    println!("pipelined ceiling of the lock scripts' pair, 16 tasks: {pairs_ceiling:.0} pairs/s");
    let of_ceiling = |ops: f64| ops / pairs_ceiling * 100.0;

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
            "  together {rate:.0} hand-overs/s; worse p99 {:.1} ms; share {:.0} % / {:.0} %; {:.2} commands/op",
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
        cpu_time(None),
    );
    let wall = Instant::now();
    crate_pairs(&client, "bench:profile", n as usize).await;
    let wall = wall.elapsed();
    let (a1, b1, c1) = (
        ALLOCS.load(Ordering::Relaxed),
        ALLOC_BYTES.load(Ordering::Relaxed),
        cpu_time(None),
    );
    println!(
        "client cost per uncontended lock+unlock: {:.1} allocations ({:.0} bytes), {:.1} us CPU of {:.1} us wall",
        (a1 - a0) as f64 / n as f64,
        (b1 - b0) as f64 / n as f64,
        (c1 - c0).as_secs_f64() * 1e6 / n as f64,
        wall.as_secs_f64() * 1e6 / n as f64
    );
    let (a0, b0, c0) = (
        ALLOCS.load(Ordering::Relaxed),
        ALLOC_BYTES.load(Ordering::Relaxed),
        cpu_time(None),
    );
    let wall = Instant::now();
    raw_pairs(&raw, "bench:profile:raw", "publish", n as usize).await;
    let wall = wall.elapsed();
    let (a1, b1, c1) = (
        ALLOCS.load(Ordering::Relaxed),
        ALLOC_BYTES.load(Ordering::Relaxed),
        cpu_time(None),
    );
    println!(
        "  (the raw EVALSHA pair on a bare fred client: {:.1} allocations ({:.0} bytes), {:.1} us CPU of {:.1} us wall)",
        (a1 - a0) as f64 / n as f64,
        (b1 - b0) as f64 / n as f64,
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
pub async fn cluster_figures() {
    println!();
    println!("== cluster ==");
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
pub async fn replica_figures() {
    println!();
    println!("== replica ==");
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
