//! The test kit of redisson-lock (workspace member `redisson-lock-test-kit`, not published):
//! the rigs the crate's integration tests, the chaos runner and the compat tests share.
//!
//! * Servers, all on free loopback ports and stopped by PID: [`redis_server`] (a throwaway
//!   standalone `redis-server`), [`replica`] (a master and a replica behind a proxy),
//!   [`sentinel`] (one master, replicas and three sentinels), [`cluster`] (a 3+3 Redis
//!   Cluster, owned or shared per test binary), [`tls`] (certificates and TLS-only servers,
//!   Sentinel sets and clusters), [`fake_sentinel`] (a sentinel naming what the test sets).
//! * [`proxy`]: a loopback TCP proxy for network faults (latency, freezes, lost replies, resets).
//! * [`backend`]: one behavioural test on several deployments ([`backend_tests!`]).
//! * [`skip`]: a skipped test, or part of one, said where it is seen and counted.
//! * Here: [`Admin`] (a raw connection that reads and writes as a Java client would),
//!   [`Recorder`] (a raw subscriber), [`Monitor`] (`MONITOR` feeds), and the shared checks
//!   ([`woke_within`], [`eventually`], [`assert_exclusive_increments`],
//!   [`synchronizers_wait_wake`]), and [`Leading`] (a `run_as_leader` whose body reports the
//!   term of each start).
//!
//! The crate's integration tests use it as a dev-dependency (`use redisson_lock_test_kit as
//! common;`): it depends on `redisson-lock` itself, so they share one copy of the crate. The
//! library's own unit tests (`src/`) must not use it: they would see a second copy.

pub mod backend;
pub mod cluster;
pub mod fake_sentinel;
pub mod proxy;
pub mod redis_server;
pub mod replica;
pub mod sentinel;
pub mod skip;
pub mod tls;
pub mod waiting;

pub use backend::Backend;
pub use redis_server::RedisServer;

use std::{collections::HashMap, time::Duration};

use fred::{
    clients::{Client as FredClient, SubscriberClient},
    interfaces::{ClientLike, EventInterface, HashesInterface, KeysInterface, PubsubInterface},
    types::{config::Config as FredConfig, ClusterHash, CustomCommand, Value},
};
use tokio::sync::mpsc;

/// Client config for tests: a short watchdog so expiry paths run in seconds.
pub fn config() -> redisson_lock::Config {
    redisson_lock::Config::default()
}

/// A raw Redis connection for inspecting and manipulating state as another (Java) client would.
pub struct Admin {
    pub redis: FredClient,
    /// Java peers of this deployment publish with SPUBLISH (Redisson >= 3.22 on a cluster).
    pub sharded: bool,
    /// The nodes of a cluster (empty on a standalone server).
    pub cluster_ports: Vec<u16>,
}

impl Admin {
    pub async fn connect(url: &str) -> Admin {
        // Bounded commands and reconnects, so a test never hangs on a node that went away.
        let perf = fred::types::config::PerformanceConfig {
            default_command_timeout: Duration::from_secs(10),
            ..Default::default()
        };
        let policy = fred::types::config::ReconnectPolicy::new_constant(0, 100);
        let redis = FredClient::new(
            FredConfig::from_url(url).unwrap(),
            Some(perf),
            None,
            Some(policy),
        );
        redis.init().await.expect("admin connection");
        Admin {
            redis,
            sharded: false,
            cluster_ports: Vec::new(),
        }
    }

    pub async fn connect_url(url: String) -> Admin {
        Admin::connect(&url).await
    }

    pub async fn cmd(
        &self,
        name: &'static str,
        args: Vec<Value>,
    ) -> Result<Value, fred::error::Error> {
        self.redis
            .custom(
                CustomCommand::new_static(name, ClusterHash::FirstKey, false),
                args,
            )
            .await
    }

    pub async fn type_of(&self, key: &str) -> String {
        self.cmd("TYPE", vec![key.into()])
            .await
            .unwrap()
            .as_string()
            .unwrap()
    }

    pub async fn hgetall(&self, key: &str) -> HashMap<String, String> {
        self.redis.hgetall(key).await.unwrap()
    }

    pub async fn pttl(&self, key: &str) -> i64 {
        self.redis.pttl(key).await.unwrap()
    }

    /// The fair lock `name`'s wait queue (a list of owner fields).
    pub async fn fair_queue(&self, name: &str) -> Vec<String> {
        let key = format!("redisson_lock_queue:{{{name}}}");
        self.cmd("LRANGE", vec![key.into(), 0.into(), (-1).into()])
            .await
            .unwrap()
            .into_array()
            .into_iter()
            .filter_map(|v| v.as_string())
            .collect()
    }

    pub async fn exists(&self, key: &str) -> bool {
        let n: i64 = self.redis.exists(key).await.unwrap();
        n == 1
    }

    pub async fn numsub(&self, channel: &str) -> i64 {
        let v: Vec<Value> = self.redis.pubsub_numsub(channel).await.unwrap();
        v.get(1).and_then(|v| v.as_i64()).unwrap_or(0)
    }

    /// `calls` of one command in `INFO commandstats` (e.g. "evalsha", "pexpire").
    pub async fn command_calls(&self, command: &str) -> u64 {
        let info = self
            .cmd("INFO", vec!["commandstats".into()])
            .await
            .unwrap()
            .as_string()
            .unwrap();
        let prefix = format!("cmdstat_{command}:calls=");
        info.lines()
            .find_map(|l| l.strip_prefix(&prefix))
            .and_then(|rest| rest.split(',').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    /// Every command's `calls` in `INFO commandstats`, by lowercase name.
    pub async fn all_command_calls(&self) -> HashMap<String, u64> {
        let info = self
            .cmd("INFO", vec!["commandstats".into()])
            .await
            .unwrap()
            .as_string()
            .unwrap();
        info.lines()
            .filter_map(|l| {
                let rest = l.strip_prefix("cmdstat_")?;
                let (name, stats) = rest.split_once(":calls=")?;
                let calls = stats.split(',').next()?.parse().ok()?;
                Some((name.to_owned(), calls))
            })
            .collect()
    }

    pub async fn reset_stats(&self) {
        self.cmd("CONFIG", vec!["RESETSTAT".into()]).await.unwrap();
    }

    /// Simulates a Java Redisson holder: raw HSET + PEXPIRE of an owner field.
    pub async fn java_hold(&self, name: &str, field: &str, ttl_ms: i64) {
        let _: i64 = self.redis.hset(name, (field, "1")).await.unwrap();
        let _: i64 = self.redis.pexpire(name, ttl_ms, None).await.unwrap();
    }

    /// Simulates a Java Redisson release: DEL + PUBLISH 0 on the unlock channel (SPUBLISH on
    /// a cluster where Java peers use sharded pub/sub).
    pub async fn java_release(&self, name: &str) {
        let _: i64 = self.redis.del(name).await.unwrap();
        let channel = if name.contains('{') {
            format!("redisson_lock__channel:{name}")
        } else {
            format!("redisson_lock__channel:{{{name}}}")
        };
        self.java_publish(&channel, "0").await;
    }

    /// Publishes as a Java peer of this deployment would (PUBLISH or SPUBLISH).
    pub async fn java_publish(&self, channel: &str, message: &str) {
        if self.sharded {
            let _: i64 = self.redis.spublish(channel, message).await.unwrap();
        } else {
            let _: i64 = self.redis.publish(channel, message).await.unwrap();
        }
    }
}

/// A raw subscriber that records every message of some channels.
pub struct Recorder {
    _sub: SubscriberClient,
    rx: mpsc::UnboundedReceiver<(String, String)>,
}

impl Recorder {
    pub async fn subscribe(url: &str, channels: &[&str]) -> Recorder {
        Recorder::subscribe_in(url, channels, false).await
    }

    /// As [`subscribe`](Self::subscribe), with `SSUBSCRIBE` when `sharded` (a cluster whose
    /// peers `SPUBLISH`): a cluster URL gives a cluster-aware subscriber, which sends each
    /// `SSUBSCRIBE` to the master that owns the channel's slot.
    pub async fn subscribe_in(url: &str, channels: &[&str], sharded: bool) -> Recorder {
        let sub = SubscriberClient::new(FredConfig::from_url(url).unwrap(), None, None, None);
        sub.init().await.unwrap();
        let mut msgs = sub.message_rx();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            while let Ok(m) = msgs.recv().await {
                let v = m.value.as_string().unwrap_or_default();
                if tx.send((m.channel.to_string(), v)).is_err() {
                    break;
                }
            }
        });
        if sharded {
            // One channel per command: a command's channels must share one slot.
            for c in channels {
                sub.ssubscribe(c.to_string()).await.unwrap();
            }
        } else {
            let chans: Vec<String> = channels.iter().map(|c| c.to_string()).collect();
            sub.subscribe(chans).await.unwrap();
        }
        let _: Value = sub.ping(None).await.unwrap();
        Recorder { _sub: sub, rx }
    }

    /// The next message, if one comes within `within`.
    pub async fn next(&mut self, within: Duration) -> Option<(String, String)> {
        tokio::time::timeout(within, self.rx.recv())
            .await
            .ok()
            .flatten()
    }

    /// Every message received within `quiet` of silence.
    pub async fn drain(&mut self, quiet: Duration) -> Vec<(String, String)> {
        let mut out = Vec::new();
        while let Ok(Some(m)) = tokio::time::timeout(quiet, self.rx.recv()).await {
            out.push(m);
        }
        out
    }
}

/// The bound under which a wake-up was a message's: the holds these tests wait on last 20-30 s
/// and a waiter's sleep without a message is bounded by that TTL or by the watchdog timeout
/// (30 s by default, 6 s in the Sentinel tests), so a waiter done within 2 s of the release was
/// woken by it. Wide enough that a loaded machine's stalls (a JVM starting on the other core,
/// several suites at once) never fail a test; the wake-up latency itself is measured by the
/// bench, not asserted here.
pub const WOKEN_BY_MESSAGE: Duration = Duration::from_secs(2);

/// Awaits a waiter task that returns `Ok((acquired_at, value))` and asserts it acquired less
/// than `bound` after `released` (well below any TTL bound, so it was woken by a message).
pub async fn woke_within<T, E: std::fmt::Debug>(
    task: tokio::task::JoinHandle<Result<(tokio::time::Instant, T), E>>,
    released: tokio::time::Instant,
    bound: Duration,
) -> T {
    let (at, value) = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("woken by the release, not by a TTL bound")
        .expect("waiter task")
        .expect("waiter acquired");
    let latency = at.saturating_duration_since(released);
    assert!(
        latency < bound,
        "woke {latency:?} after the release (bound {bound:?})"
    );
    value
}

/// Polls `cond` (a cheap local read) until it holds or `bound` passes, on a plain thread (the
/// blocking API's tests): [`eventually`] without a runtime.
pub fn eventually_sync(bound: Duration, cond: impl Fn() -> bool) -> bool {
    let start = std::time::Instant::now();
    while start.elapsed() < bound {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    cond()
}

/// Polls `f` until it is true or `within` passes.
pub async fn eventually<F, Fut>(within: Duration, mut f: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if f().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Acquires one hold for one owner (each owner of a stress run gets its own closure).
pub type Acquire = Box<
    dyn Fn() -> futures::future::BoxFuture<'static, redisson_lock::Result<redisson_lock::AnyGuard>>
        + Send
        + Sync,
>;

/// The mutual-exclusion stress: every owner runs `rounds` non-atomic GET-then-SET increments of
/// a counter under its lock; any overlap of two holders loses an update (and trips the
/// in-process occupancy check). Asserts the final count is exact.
pub async fn assert_exclusive_increments(url: &str, owners: Vec<Acquire>, rounds: usize) {
    use std::sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    };
    let counter = format!("stress:{}", uuid::Uuid::new_v4());
    let inside = Arc::new(AtomicUsize::new(0));
    let n = owners.len();
    let mut tasks = Vec::new();
    for acquire in owners {
        let admin = Admin::connect(url).await;
        let (inside, counter) = (inside.clone(), counter.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..rounds {
                let g = acquire().await.unwrap();
                assert_eq!(
                    inside.fetch_add(1, Ordering::SeqCst),
                    0,
                    "two holders inside"
                );
                let v: Option<i64> = admin.redis.get(counter.as_str()).await.unwrap();
                let _: () = admin
                    .redis
                    .set(counter.as_str(), v.unwrap_or(0) + 1, None, None, false)
                    .await
                    .unwrap();
                inside.fetch_sub(1, Ordering::SeqCst);
                g.unlock().await.unwrap();
            }
        }));
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .unwrap()
            .unwrap();
    }
    let admin = Admin::connect(url).await;
    let total: i64 = admin.redis.get(counter.as_str()).await.unwrap();
    assert_eq!(total, (n * rounds) as i64);
}

/// An [`Acquire`] from a lock handle and the expression that locks it.
#[macro_export]
macro_rules! acquire_with {
    ($lock:expr, |$l:ident| $body:expr) => {{
        let lock = std::sync::Arc::new($lock);
        Box::new(move || {
            let $l = lock.clone();
            Box::pin(async move { $body.await.map(|g| g.erase()) })
                as futures::future::BoxFuture<'static, _>
        }) as $crate::Acquire
    }};
}

/// Raw `MONITOR` connections to some servers, recording every command they execute (script
/// calls and the commands the scripts run, shown as `[0 lua]`). Unlike `INFO commandstats`,
/// it tells one test's commands apart on a server that other tests share: filter by a key.
pub struct Monitor {
    lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    streams: Vec<std::net::TcpStream>,
}

impl Monitor {
    pub fn start(ports: &[u16]) -> Monitor {
        use std::io::{BufRead, BufReader, Write};
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut streams = Vec::new();
        for &port in ports {
            let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            stream.write_all(b"MONITOR\r\n").unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut ok = String::new();
            reader.read_line(&mut ok).unwrap();
            assert!(ok.starts_with("+OK"), "MONITOR on {port}: {ok:?}");
            let lines = lines.clone();
            std::thread::spawn(move || {
                let mut line = String::new();
                while matches!(reader.read_line(&mut line), Ok(n) if n > 0) {
                    lines.lock().unwrap().push(std::mem::take(&mut line));
                }
            });
            streams.push(stream);
        }
        Monitor { lines, streams }
    }

    /// Forgets what was recorded so far.
    pub fn clear(&self) {
        self.lines.lock().unwrap().clear();
    }

    /// Recorded calls of `command` (lower case, as MONITOR prints it) whose quoted argument
    /// list satisfies `args`, after a short settle (MONITOR reports a command before it runs,
    /// so a command whose reply the test has seen is in the feed by then).
    pub async fn count_where(&self, command: &str, args: impl Fn(&str) -> bool) -> usize {
        self.calls_where(command, args).await.len()
    }

    /// The server time (seconds) and the quoted argument list of every recorded call of
    /// `command` whose arguments satisfy `args`, in the order recorded, after the settle.
    pub async fn calls_where(
        &self,
        command: &str,
        args: impl Fn(&str) -> bool,
    ) -> Vec<(f64, String)> {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let head = format!("\"{command}\"");
        self.lines
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| {
                let (stamp, rest) = l.split_once(" [")?;
                let at: f64 = stamp.trim_start_matches('+').parse().ok()?;
                let (_, rest) = rest.split_once("] ")?;
                let rest = rest.trim_end();
                let (cmd, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                (cmd.eq_ignore_ascii_case(&head) && args(tail)).then(|| (at, tail.to_string()))
            })
            .collect()
    }

    /// Recorded calls of `command` with `arg` as one whole argument (e.g. a key).
    pub async fn count(&self, command: &str, arg: &str) -> usize {
        let quoted = format!("\"{arg}\"");
        self.count_where(command, |tail| tail.split(' ').any(|a| a == quoted))
            .await
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        for s in &self.streams {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
    }
}

/// The synchronizers across two clients of any deployment: a semaphore release in `a` wakes a
/// waiter in `b`, a permit `b` acquired is released by `a` and wakes `a`'s waiter, a latch
/// count-down in `a` opens `b`'s waiter; each wake-up within `bound` of its message.
pub async fn synchronizers_wait_wake(
    a: &redisson_lock::Client,
    b: &redisson_lock::Client,
    name: &str,
    bound: Duration,
) {
    use redisson_lock::Error;
    use tokio::time::Instant;
    let wait_listening = |client: &redisson_lock::Client, channel: String| {
        let client = client.clone();
        async move {
            assert!(
                eventually(Duration::from_secs(10), || async {
                    client.stats().channels.contains_key(&channel)
                })
                .await,
                "no waiter on {channel}"
            );
        }
    };
    // Semaphore.
    let sem = format!("{name}:sem");
    a.get_semaphore(&sem).delete().await.unwrap();
    assert!(a.get_semaphore(&sem).try_set_permits(0).await.unwrap());
    let waiter = {
        let s = b.get_semaphore(&sem);
        tokio::spawn(async move {
            s.acquire(1).await?.forget();
            Ok::<_, Error>((Instant::now(), ()))
        })
    };
    wait_listening(b, format!("redisson_sc:{{{sem}}}")).await;
    let released = Instant::now();
    a.get_semaphore(&sem).release(1).await.unwrap();
    woke_within(waiter, released, bound).await;
    // Permit-expirable semaphore: b acquires, a's waiter waits, a releases b's permit.
    let psem = format!("{name}:psem");
    a.get_permit_expirable_semaphore(&psem)
        .delete()
        .await
        .unwrap();
    assert!(a
        .get_permit_expirable_semaphore(&psem)
        .try_set_permits(1)
        .await
        .unwrap());
    let id = b
        .get_permit_expirable_semaphore(&psem)
        .acquire(None)
        .await
        .unwrap()
        .keep();
    let waiter = {
        let s = a.get_permit_expirable_semaphore(&psem);
        tokio::spawn(async move {
            let g = s.try_acquire_for(Duration::from_secs(20), None).await?;
            Ok::<_, Error>((Instant::now(), g))
        })
    };
    wait_listening(a, format!("redisson_sc:{{{psem}}}")).await;
    let released = Instant::now();
    a.get_permit_expirable_semaphore(&psem)
        .release(id)
        .await
        .unwrap();
    let g = woke_within(waiter, released, bound).await;
    assert!(g.expect("the released permit").release().await.unwrap());
    // Count-down latch.
    let cdl = format!("{name}:cdl");
    a.get_count_down_latch(&cdl).delete().await.unwrap();
    assert!(a.get_count_down_latch(&cdl).try_set_count(1).await.unwrap());
    let waiter = {
        let l = b.get_count_down_latch(&cdl);
        tokio::spawn(async move {
            l.wait().await?;
            Ok::<_, Error>((Instant::now(), ()))
        })
    };
    wait_listening(b, format!("redisson_countdownlatch__channel__{{{cdl}}}")).await;
    let opened = Instant::now();
    a.get_count_down_latch(&cdl).count_down().await.unwrap();
    woke_within(waiter, opened, bound).await;
}

/// A `run_as_leader` of an election in a task of its own, whose body reports the term it
/// started in at each start and then runs until it is dropped (never ends on its own).
pub struct Leading {
    task: tokio::task::JoinHandle<()>,
    starts: mpsc::UnboundedReceiver<u64>,
}

impl Leading {
    pub fn start(election: redisson_lock::Election) -> Leading {
        let (tx, starts) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let _ = election
                .run_as_leader(move |hold| {
                    let tx = tx.clone();
                    async move {
                        tx.send(hold.token().expect("a term")).unwrap();
                        std::future::pending::<Result<(), redisson_lock::Error>>().await
                    }
                })
                .await;
        });
        Leading { task, starts }
    }

    /// The term of the body's next start, within `within`.
    pub async fn next_start(&mut self, within: Duration) -> u64 {
        tokio::time::timeout(within, self.starts.recv())
            .await
            .expect("the body started in time")
            .expect("the leader task is alive")
    }

    /// `true` if the body starts again within `within`.
    pub async fn starts_within(&mut self, within: Duration) -> bool {
        tokio::time::timeout(within, self.starts.recv())
            .await
            .is_ok()
    }
}

impl Drop for Leading {
    fn drop(&mut self) {
        self.task.abort();
    }
}
