//! Demo: workers in separate processes share one lock.
//!
//! Run it with `scripts/demo.sh` (starts a throwaway redis-server when `REDIS_URL` is not set,
//! and compiles the Java driver of real Redisson when `REDISSON_CLASSPATH` is set).
//!
//! 1. The watchdog: one holder keeps the lock across several watchdog periods (timeout 1.5 s),
//!    the TTL renewed every 0.5 s.
//! 2. Two processes of this crate, three workers each, every worker looping lock → re-enter
//!    (hold count 2) → hold 100 ms → unlock, three rounds; each says how long after the previous
//!    holder's unlock it woke. Both processes connect first and start together on the parent's
//!    word; the parent then prints the order in which the processes got the lock. They take
//!    turns (a client's local hand-off is bounded while another client waits, see
//!    `Config::local_hand_off`) instead of one taking every round first.
//! 3. When `DEMO_JAVA_CLASSPATH` is set (the class path of Redisson and of the driver's classes;
//!    `scripts/demo.sh` sets it from `REDISSON_CLASSPATH`): two processes of this crate beside a
//!    Java process whose three threads loop over Redisson's `RLock`
//!    (`compat-tests/java/LockPeer.java`): all three take turns (a client's contest lasts until
//!    every other client waiting has had the lock, see `Config::local_hand_off`), where before
//!    the two Rust processes passed the lock between them and the Java one waited.

use std::{
    io::{BufRead, BufReader, Write},
    process::{Child, ChildStdin, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use fred::interfaces::{ClientLike, KeysInterface};
use redisson_lock::{Client, Config, Ttl};

const LOCK: &str = "demo:shared-lock";
const STAMP: &str = "demo:last-unlock-ms";
/// How many acquisitions the workers recorded; the n-th in `demo:order:<n>` as
/// `<epoch ms> <process>`.
const ORDER: &str = "demo:order";
const WORKERS: usize = 3;
const ROUNDS: usize = 3;
const HOLD: Duration = Duration::from_millis(100);

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let url = std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    if args.get(1).map(String::as_str) == Some("--worker") {
        let name = args.get(2).cloned().unwrap_or_else(|| "?".into());
        let latency = args.get(3).map(String::as_str) != Some("--no-latency");
        runtime.block_on(worker(url, name, latency));
        return;
    }
    println!("redisson-lock demo against {url}: one lock, several processes");
    let redis = runtime.block_on(plain_connection(&url));

    println!();
    println!("1. the watchdog keeps a held lock alive (timeout 1.5 s, renewed every 0.5 s):");
    runtime.block_on(watchdog(&url));

    println!();
    println!(
        "2. two processes of this crate, {WORKERS} workers each, {ROUNDS} rounds of {} ms holds:",
        HOLD.as_millis()
    );
    let order = run_part(&runtime, &redis, &url, false);
    print_order(&order);

    println!();
    match std::env::var("DEMO_JAVA_CLASSPATH") {
        Ok(classpath) if !classpath.trim().is_empty() => {
            println!(
                "3. two processes of this crate (A, B) beside a Java process over real Redisson (J), {WORKERS} workers each:"
            );
            let order = run_part(&runtime, &redis, &url, true);
            print_order(&order);
        }
        _ => println!(
            "3. (skipped: no Java Redisson; set REDISSON_CLASSPATH to see a Java process beside a Rust one, README \"Beside real Java Redisson\")"
        ),
    }
    println!();
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

/// Part 1: one holder across several watchdog periods.
async fn watchdog(url: &str) {
    let config = Config::default().lock_watchdog_timeout(Duration::from_millis(1500));
    let client = Client::connect(url, config).await.expect("connect");
    let lock = client.get_lock(LOCK);
    let guard = lock.lock().await.unwrap();
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if let Ttl::Expires(d) = lock.remaining_ttl().await.unwrap() {
            println!("   ttl {} ms, lost: {}", d.as_millis(), guard.is_lost());
        }
    }
    guard.unlock().await.unwrap();
    client.shutdown().await;
}

/// One started process of part 2 or 3: its input (the start word or the Java commands).
struct Started {
    child: Child,
    stdin: ChildStdin,
    printer: std::thread::JoinHandle<()>,
}

/// Starts a worker process of this crate (`A`/`B`) or the Java driver (`J`, when `java`), waits
/// until every one has connected, then starts them together; returns the acquisitions in order.
fn run_part(
    runtime: &tokio::runtime::Runtime,
    redis: &fred::clients::Client,
    url: &str,
    java: bool,
) -> Vec<String> {
    runtime.block_on(async {
        let _: i64 = redis.del(vec![ORDER, STAMP]).await.unwrap();
    });
    let names: &[&str] = if java { &["A", "B", "J"] } else { &["A", "B"] };
    let java_order = Arc::new(Mutex::new(Vec::new()));
    let mut started = Vec::new();
    for name in names {
        let mut command = if *name == "J" {
            let mut c = Command::new("java");
            c.arg("-cp")
                .arg(std::env::var("DEMO_JAVA_CLASSPATH").unwrap())
                .arg("LockPeer")
                .arg(url);
            c
        } else {
            let mut c = Command::new(std::env::current_exe().unwrap());
            c.args(["--worker", name]);
            if java {
                // Java's releases leave no stamp: no wake-up latency to show.
                c.arg("--no-latency");
            }
            c
        };
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start a worker process");
        let stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        // Both connect before either starts.
        let mut ready = String::new();
        out.read_line(&mut ready).unwrap();
        assert!(ready.contains("ready"), "{name}: {ready}");
        let pid = child.id();
        let java_order = java_order.clone();
        let is_java = *name == "J";
        let printer = std::thread::spawn(move || {
            let mut round = [0usize; WORKERS + 1];
            for line in out.lines().map_while(Result::ok) {
                if !is_java {
                    println!("{line}");
                    continue;
                }
                // `t1 lock OK locked elapsed_ms=.. at=<ms>`: Redisson's lock() returned.
                let words: Vec<&str> = line.split_whitespace().collect();
                if words.get(1) == Some(&"lock") && words.get(2) == Some(&"OK") {
                    let at: i64 = words
                        .iter()
                        .find_map(|w| w.strip_prefix("at="))
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    let w: usize = words[0][1..].parse().unwrap_or(0);
                    round[w.min(WORKERS)] += 1;
                    println!(
                        "   [process J (Java, Redisson) pid {pid} thread {}] round {}: got the lock",
                        words[0], round[w.min(WORKERS)]
                    );
                    java_order.lock().unwrap().push((at, "J".to_owned()));
                }
            }
        });
        started.push(Started {
            child,
            stdin,
            printer,
        });
    }
    for (s, name) in started.iter_mut().zip(names) {
        if *name == "J" {
            let mut script = String::new();
            for _ in 0..ROUNDS {
                for t in 1..=WORKERS {
                    script.push_str(&format!(
                        "t{t} lock {LOCK}\nt{t} sleep {}\nt{t} unlock {LOCK}\n",
                        HOLD.as_millis()
                    ));
                }
            }
            for t in 1..=WORKERS {
                script.push_str(&format!("await t{t}\n"));
            }
            script.push_str("quit\n");
            s.stdin.write_all(script.as_bytes()).unwrap();
        } else {
            s.stdin.write_all(b"go\n").unwrap();
        }
        s.stdin.flush().unwrap();
    }
    for s in started {
        let Started {
            mut child,
            stdin,
            printer,
        } = s;
        drop(stdin);
        let _ = child.wait();
        let _ = printer.join();
    }
    let mut order: Vec<(i64, String)> = runtime.block_on(async {
        let n: Option<u64> = redis.get(ORDER).await.unwrap_or_default();
        let mut entries = Vec::new();
        for i in 1..=n.unwrap_or(0) {
            let key = format!("{ORDER}:{i}");
            let e: Option<String> = redis.get(key.as_str()).await.unwrap_or_default();
            let _: i64 = redis.del(key.as_str()).await.unwrap_or_default();
            if let Some((at, who)) = e.as_deref().and_then(|e| e.split_once(' ')) {
                entries.extend(at.parse().ok().map(|at: i64| (at, who.to_owned())));
            }
        }
        entries
    });
    order.extend(java_order.lock().unwrap().drain(..));
    order.sort();
    order.into_iter().map(|(_, who)| who).collect()
}

fn print_order(order: &[String]) {
    let mut longest = ("", 0usize);
    let mut current = ("", 0usize);
    for p in order {
        current = if current.0 == p.as_str() {
            (current.0, current.1 + 1)
        } else {
            (p.as_str(), 1)
        };
        if current.1 > longest.1 {
            longest = current;
        }
    }
    let mut per: Vec<(&str, usize)> = Vec::new();
    for p in order {
        match per.iter_mut().find(|(who, _)| *who == p.as_str()) {
            Some((_, n)) => *n += 1,
            None => per.push((p.as_str(), 1)),
        }
    }
    per.sort();
    let per: Vec<String> = per.iter().map(|(who, n)| format!("{who} {n}")).collect();
    println!(
        "   order in which the processes got the lock: {} (longest run: {} x process {}; holds per process: {})",
        order.join(" "),
        longest.1,
        longest.0,
        per.join(", ")
    );
}

/// A worker process: connects, says `ready`, waits for the parent's `go`, then runs its
/// workers.
async fn worker(url: String, process: String, show_latency: bool) {
    let client = Client::connect(&url, Config::default())
        .await
        .expect("connect");
    let stamps = plain_connection(&url).await;
    println!("ready");
    let mut go = String::new();
    std::io::stdin().read_line(&mut go).unwrap();
    let pid = std::process::id();
    let mut tasks = Vec::new();
    for w in 1..=WORKERS {
        let client = client.clone();
        let stamps = stamps.clone();
        let who = format!("   [process {process} pid {pid} worker {w}]");
        let process = process.clone();
        tasks.push(tokio::spawn(async move {
            let lock = client.get_lock(LOCK);
            for round in 1..=ROUNDS {
                let guard = lock.lock().await.unwrap();
                let woke = now_ms();
                let n: u64 = stamps.incr(ORDER).await.unwrap();
                let _: () = stamps
                    .set(
                        format!("{ORDER}:{n}"),
                        format!("{woke} {process}"),
                        None,
                        None,
                        false,
                    )
                    .await
                    .unwrap();
                let last: Option<i64> = stamps.get(STAMP).await.unwrap();
                let latency = last
                    .filter(|_| show_latency)
                    .map(|t| format!("{} ms after the previous unlock", woke - t));
                let again = lock.lock().await.unwrap();
                println!(
                    "{who} round {round}: got the lock{}; re-entered, hold count {}",
                    latency.map(|l| format!(" ({l})")).unwrap_or_default(),
                    lock.hold_count().await.unwrap()
                );
                tokio::time::sleep(HOLD).await;
                again.unlock().await.unwrap();
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
