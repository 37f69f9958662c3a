//! Demo: several workers in two processes share one lock.
//!
//! Run it with `scripts/demo.sh` (starts a throwaway redis-server when `REDIS_URL` is not set).
//! The parent starts two worker processes of itself; each runs three tasks that take the lock,
//! re-enter it (hold count 2), and report how long after the previous holder's unlock they
//! woke. One holder then keeps the lock across several watchdog periods, showing the TTL being
//! renewed. At the end the parent prints the order in which the two processes got the lock:
//! they take turns (the local hand-off of one client is bounded while the other client waits,
//! see `Config::local_hand_off`), instead of one process taking all its rounds first.

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use fred::interfaces::{ClientLike, KeysInterface};
use redisson_lock::{Client, Config, Ttl};

const LOCK: &str = "demo:shared-lock";
const STAMP: &str = "demo:last-unlock-ms";
const ORDER: &str = "demo:order";

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    if args.get(1).map(String::as_str) == Some("--worker") {
        let name = args.get(2).cloned().unwrap_or_else(|| "?".into());
        tokio::runtime::Runtime::new()
            .unwrap()
            .block_on(worker(url, name));
        return;
    }
    println!("redisson-lock demo against {url}: two processes, three workers each, one lock");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let redis = runtime.block_on(async {
        let redis = plain_connection(&url).await;
        let _: i64 = redis.del(vec![ORDER, STAMP]).await.unwrap();
        redis
    });
    let exe = std::env::current_exe().unwrap();
    let children: Vec<_> = ["A", "B"]
        .iter()
        .map(|p| {
            let mut child = Command::new(&exe)
                .args(["--worker", p])
                .stdout(Stdio::piped())
                .spawn()
                .expect("start worker process");
            let out = child.stdout.take().unwrap();
            let printer = std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    println!("{line}");
                }
            });
            (child, printer)
        })
        .collect();
    for (mut child, printer) in children {
        let _ = child.wait();
        let _ = printer.join();
    }
    // The n-th acquisition wrote its process to `demo:order:<n>`.
    let order: Vec<String> = runtime.block_on(async {
        let n: Option<u64> = redis.get(ORDER).await.unwrap_or_default();
        let mut order = Vec::new();
        for i in 1..=n.unwrap_or(0) {
            let key = format!("{ORDER}:{i}");
            let p: Option<String> = redis.get(key.as_str()).await.unwrap_or_default();
            let _: i64 = redis.del(key.as_str()).await.unwrap_or_default();
            order.extend(p);
        }
        order
    });
    let mut longest = ("", 0usize);
    let mut current = ("", 0usize);
    for p in &order {
        current = if current.0 == p.as_str() {
            (current.0, current.1 + 1)
        } else {
            (p.as_str(), 1)
        };
        if current.1 > longest.1 {
            longest = current;
        }
    }
    println!(
        "order in which the processes got the lock: {} (longest run: {} x process {})",
        order.join(" "),
        longest.1,
        longest.0
    );
    println!("done: every worker held the lock alone; see the wake-up latencies above");
}

/// A plain Redis connection for the demo's own bookkeeping (stamps, order).
async fn plain_connection(url: &str) -> fred::clients::Client {
    let redis = fred::clients::Client::new(
        fred::types::config::Config::from_url(url).unwrap(),
        None,
        None,
        None,
    );
    redis.init().await.unwrap();
    redis
}

async fn worker(url: String, process: String) {
    let config = Config::default().lock_watchdog_timeout(Duration::from_millis(1500));
    let client = Client::connect(&url, config).await.expect("connect");
    let stamps = plain_connection(&url).await;
    let pid = std::process::id();
    let mut tasks = Vec::new();
    for w in 1..=3 {
        let client = client.clone();
        let stamps = stamps.clone();
        let who = format!("[process {process} pid {pid} worker {w}]");
        let shows_watchdog = process == "A" && w == 1;
        let process = process.clone();
        tasks.push(tokio::spawn(async move {
            let lock = client.get_lock(LOCK);
            for round in 1..=2 {
                let guard = lock.lock().await.unwrap();
                let woke = now_ms();
                let n: u64 = stamps.incr(ORDER).await.unwrap();
                let _: () = stamps
                    .set(format!("{ORDER}:{n}"), process.as_str(), None, None, false)
                    .await
                    .unwrap();
                let last: Option<i64> = stamps.get(STAMP).await.unwrap();
                let latency = last.map(|t| format!("{} ms after the previous unlock", woke - t));
                let again = lock.lock().await.unwrap();
                println!(
                    "{who} round {round}: got the lock{}; re-entered, hold count {}",
                    latency.map(|l| format!(" ({l})")).unwrap_or_default(),
                    lock.hold_count().await.unwrap()
                );
                tokio::time::sleep(Duration::from_millis(150)).await;
                again.unlock().await.unwrap();
                if shows_watchdog && round == 1 {
                    println!(
                        "{who} holding across watchdog periods (timeout 1.5 s, renew every 0.5 s):"
                    );
                    for _ in 0..6 {
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        if let Ttl::Expires(d) = lock.remaining_ttl().await.unwrap() {
                            println!(
                                "{who}   ttl {} ms, lost: {}",
                                d.as_millis(),
                                guard.is_lost()
                            );
                        }
                    }
                }
                let _: () = stamps
                    .set(STAMP, now_ms(), None, None, false)
                    .await
                    .unwrap();
                guard.unlock().await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    client.shutdown().await;
}
