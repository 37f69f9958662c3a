//! Memory per waiter of every kind that waits, by hand (the bench's `scale` section measures
//! the reentrant lock beside Redisson; this measures the crate's other kinds the same way,
//! without Java).
//!
//! ```sh
//! cargo run --release -p compat-tests --example waiters            # 10 000 waiters per kind
//! cargo run --release -p compat-tests --example waiters -- 1000    # another count
//! ```
//!
//! It starts its own `redis-server` on a free loopback port and, per kind, a fresh process of
//! itself with two clients: a holder that makes `count` objects busy (locks held, a read
//! lock's name by a writer; semaphores without permits; latches counting 1), then a waiting
//! client with one task per object, each an owner of its own, on a handle it keeps while it
//! waits (`try_lock_for` / `try_acquire_for` / `wait_for`, 120 s). Once every waiter is parked
//! (`Client::stats`: waiters and subscribed channels): the growth of the process's anonymous
//! memory (`RssAnon`) and RSS since just before the waiters started, per waiter. Then the
//! holder frees everything and the line says how many got through and how long after the
//! first free the last one did. The holder's own memory is allocated before the baseline;
//! what it frees before then can be reused by the waiters, so read the figures as the
//! waiters' cost in a process that already holds as many locks.

use std::time::{Duration, Instant};

use redisson_lock::{Client, Config};
use redisson_lock_test_kit::waiting::{busy, free, spawn_waiters, KINDS};
use tokio::task::JoinSet;

/// `(RssAnon, VmRSS)` of this process in bytes.
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .unwrap_or(0)
            * 1024
    };
    (kib("RssAnon:"), kib("VmRSS:"))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--one") {
        // A child: `--one <url> <kind> <count>`.
        let runtime = tokio::runtime::Runtime::new().expect("a runtime");
        let count = args[3].parse().expect("a count");
        match runtime.block_on(one(&args[1], &args[2], count)) {
            Ok(line) => println!("{line}"),
            Err(e) => println!("| {} | {count} | failed: {e} |", args[2]),
        }
        return;
    }
    let count: usize = match args.first() {
        None => 10_000,
        Some(word) => match word.parse() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!("usage: waiters [count], a count of at least 1 (got {word:?})");
                std::process::exit(2);
            }
        },
    };
    let server = redisson_lock_test_kit::RedisServer::start();
    let me = std::env::current_exe().expect("this program's path");
    println!("| kind | waiters | memory per waiter: anonymous (RSS) | got through / timed out / failed | first free → last through |");
    println!("| --- | --- | --- | --- | --- |");
    for kind in KINDS {
        let out = std::process::Command::new(&me)
            .args(["--one", &server.url(), kind, &count.to_string()])
            .output()
            .expect("a child of this program");
        print!("{}", String::from_utf8_lossy(&out.stdout));
        if !out.status.success() {
            eprintln!("{kind}: {}", String::from_utf8_lossy(&out.stderr));
        }
    }
}

/// One kind's row.
async fn one(url: &str, kind: &str, count: usize) -> redisson_lock::Result<String> {
    let holder = Client::connect(
        url,
        Config::default().lock_watchdog_timeout(Duration::from_secs(300)),
    )
    .await?;
    let waiting = Client::connect(url, Config::default()).await?;
    let Some(kind) = KINDS.into_iter().find(|k| *k == kind) else {
        return Err(redisson_lock::Error::InvalidArgument(format!(
            "no waiting kind {kind}"
        )));
    };
    let prefix = format!("waiters:{kind}:");
    let held = busy(&holder, kind, &prefix, count).await?;
    tokio::time::sleep(Duration::from_millis(300)).await;

    let before = memory();
    let mut waiters = JoinSet::new();
    spawn_waiters(
        &mut waiters,
        &waiting,
        kind,
        &prefix,
        count,
        Duration::from_secs(120),
    );
    let started = Instant::now();
    loop {
        let s = waiting.stats();
        if s.waiters >= count && s.subscribed_channels >= count {
            break;
        }
        if started.elapsed() > Duration::from_secs(120) {
            return Ok(format!(
                "| {kind} | {count} | only {} parked on {} channels |",
                s.waiters, s.subscribed_channels
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Let the last subscriptions' replies and the attempts' buffers settle.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let parked = memory();

    let freed = Instant::now();
    free(&holder, kind, &prefix, count, held).await?;
    let (mut through, mut timed_out, mut failed) = (0, 0, 0);
    let mut kept = Vec::with_capacity(count);
    while let Some(done) = waiters.join_next().await {
        match done {
            Ok(Ok(Some(got))) => {
                through += 1;
                kept.push(got);
            }
            Ok(Ok(None)) => timed_out += 1,
            _ => failed += 1,
        }
    }
    let last = freed.elapsed();
    let per = |a: u64, b: u64| b.saturating_sub(a) / count as u64;
    Ok(format!(
        "| {kind} | {count} | {} B ({} B) | {through} / {timed_out} / {failed} | {} ms |",
        per(before.0, parked.0),
        per(before.1, parked.1),
        last.as_millis()
    ))
}
