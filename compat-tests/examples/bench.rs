//! Benchmark: `cargo run --release -p compat-tests --example bench`
//!
//! Uses `REDIS_URL` when set, otherwise starts a throwaway redis-server on a free port.
//! Speeds are reported as ratios against a baseline measured in the same run on the same Redis:
//! a raw pair of EVALSHA round trips (the crate's own acquire and release scripts, sent with a
//! bare fred client), so that machine noise cancels out.

#[path = "../../tests/common/redis_server.rs"]
mod redis_server;

use std::time::{Duration, Instant};

use compat_tests::bench::{self, Mode, Stats};
use fred::{
    interfaces::{ClientLike, LuaInterface},
    types::{config::Config as FredConfig, Value},
};
use redisson_lock::{Client, Config};

const ACQUIRE: &str = include_str!("../../lua/lock_acquire.lua");
const RELEASE: &str = include_str!("../../lua/lock_release.lua");

async fn raw_pairs(redis: &fred::clients::Client, n: usize) -> Vec<u64> {
    let acq: String = redis.script_load(ACQUIRE).await.unwrap();
    let rel: String = redis.script_load(RELEASE).await.unwrap();
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let _: Value = redis
            .evalsha(&acq, vec!["bench:raw"], vec!["30000", "raw-owner:1"])
            .await
            .unwrap();
        let _: Value = redis
            .evalsha(
                &rel,
                vec![
                    "bench:raw",
                    "redisson_lock__channel:{bench:raw}",
                    "redisson_unlock_latch:{bench:raw}:0",
                ],
                vec!["0", "30000", "raw-owner:1", "publish", "1"],
            )
            .await
            .unwrap();
        samples.push(t.elapsed().as_micros() as u64);
    }
    samples
}

async fn crate_pairs(client: &Client, n: usize) -> Vec<u64> {
    let lock = client.get_lock("bench:crate");
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let g = lock.lock().await.unwrap();
        g.unlock().await.unwrap();
        samples.push(t.elapsed().as_micros() as u64);
    }
    samples
}

fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

#[tokio::main]
async fn main() {
    let _server;
    let url = match std::env::var("REDIS_URL") {
        Ok(u) => u,
        Err(_) => {
            _server = redis_server::RedisServer::start();
            _server.url()
        }
    };
    let client = Client::connect(&url, Config::default()).await.unwrap();
    let raw = fred::clients::Client::new(FredConfig::from_url(&url).unwrap(), None, None, None);
    raw.init().await.unwrap();

    // Warm up both paths, then alternate rounds so drift on a noisy machine hits both alike.
    raw_pairs(&raw, 500).await;
    crate_pairs(&client, 500).await;
    let (mut base, mut ours) = (Vec::new(), Vec::new());
    for _ in 0..10 {
        base.extend(raw_pairs(&raw, 1000).await);
        ours.extend(crate_pairs(&client, 1000).await);
    }
    let base = Stats::from_samples(base, Duration::from_secs(1));
    let ours = Stats::from_samples(ours, Duration::from_secs(1));
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
    let s = bench::run(&client, Mode::Uncontended, 16, secs, 1)
        .await
        .unwrap();
    println!("16 owners, distinct locks : {}", s.render());
    println!(
        "  = {:.1}x Java Redisson's 7k pairs/s measured on this kind of machine (target >= 5x)",
        s.ops_per_s / 7000.0
    );
    let s = bench::run(&client, Mode::Contended, 16, secs, 1)
        .await
        .unwrap();
    println!("16 owners, one lock        : {}", s.render());
    println!(
        "  p99 {:.1} ms (target <= 20 ms; Redisson ~80 ms)",
        s.p99_us as f64 / 1000.0
    );
    let s = bench::run(&client, Mode::Leased, 16, secs, 1)
        .await
        .unwrap();
    println!("16 owners, leased          : {}", s.render());

    // Client memory per held watchdog lock (registration + guard).
    let n = 10_000;
    let before = rss_bytes();
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
    println!(
        "memory: {} held watchdog locks added {:.0} bytes of RSS per lock (target <= 1024)",
        n,
        after.saturating_sub(before) as f64 / n as f64
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
