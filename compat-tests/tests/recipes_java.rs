//! The recipes beside real Java Redisson (the Java driver, `compat-tests/java/LockPeer.java`),
//! one Java process per deployment, every recipe in turn: a Java `RFencedLock` holder leads an
//! election that a Rust instance observes and contends in; a Java `RLock` holder of a run-once
//! name makes the Rust job skip (and a Rust job's `at_least` keeps Java out); Java sees a Rust
//! watchdog permit live past its first lease and releases it by its id. On a standalone server
//! and on a cluster with `REDISSON_CLASSPATH`, and on standalone with a second version in
//! `REDISSON_CLASSPATH_ALT` when set (README, "Beside real Java Redisson"); without
//! `REDISSON_CLASSPATH`, `REDISSON_SKIP_JAVA=1` skips on purpose. A skipped test says so with
//! `redisson_lock_test_kit::skip::test` (past the harness's capture; `scripts/run-tests.py`
//! counts it as skipped).

use compat_tests::peer;
use redisson_lock_test_kit::{cluster, redis_server, skip};
use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use cluster::{RedisCluster, Reply as Resp};
use peer::{Peer, Reply};
use redis_server::RedisServer;
use redisson_lock::{Client, Config, HoldState, PermitId, RunOnce};
use tokio::time::{timeout, Instant};

const T: Duration = Duration::from_secs(20);
const CLASSPATH: &str = "REDISSON_CLASSPATH";
const CLASSPATH_ALT: &str = "REDISSON_CLASSPATH_ALT";
/// The Rust client's watchdog timeout (short, so a permit's first lease ends within the test).
const WATCHDOG: Duration = Duration::from_millis(1500);

fn config() -> Config {
    Config::default().lock_watchdog_timeout(WATCHDOG)
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// The Redis both sides use, read directly (each command on the node that owns its key).
enum Wire {
    One(u16),
    Cluster(&'static RedisCluster),
}

impl Wire {
    /// The score (epoch ms) of the permit `id` in the sorted set `key`.
    fn score(&self, key: &str, id: PermitId) -> Option<i64> {
        let port = match self {
            Wire::One(port) => *port,
            Wire::Cluster(c) => c.master_for_key(key),
        };
        let args: [&[u8]; 3] = [b"ZSCORE", key.as_bytes(), id.as_bytes()];
        match RedisCluster::cmd(port, &args) {
            Resp::Bulk(Some(b)) => String::from_utf8(b)
                .ok()
                .and_then(|s| s.parse::<f64>().ok())
                .map(|s| s as i64),
            _ => None,
        }
    }
}

/// The Java driver compiled against the class path in `var`, or `None` to skip the test `test`
/// (said with `skip::test`, past the harness's capture): `REDISSON_CLASSPATH` unset needs
/// `REDISSON_SKIP_JAVA=1`; the second version is optional.
fn java(var: &str, test: &str) -> Option<(String, PathBuf)> {
    let Some(classpath) = std::env::var(var).ok().filter(|v| !v.trim().is_empty()) else {
        if var == CLASSPATH_ALT {
            skip::test(
                test,
                CLASSPATH_ALT,
                "the second Redisson version is optional",
            );
            return None;
        }
        assert_eq!(
            std::env::var("REDISSON_SKIP_JAVA").as_deref(),
            Ok("1"),
            "set REDISSON_CLASSPATH to Redisson's class path, or REDISSON_SKIP_JAVA=1 to skip"
        );
        skip::test(
            test,
            CLASSPATH,
            "no REDISSON_CLASSPATH, and REDISSON_SKIP_JAVA=1",
        );
        return None;
    };
    let out = Command::new("bash")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("java/build.sh"))
        .env("REDISSON_CLASSPATH", &classpath)
        .output()
        .expect("run compat-tests/java/build.sh");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let classes = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    Some((classpath, classes))
}

/// Starts the Java driver (`java`: the class path and the driver's classes) on `url`.
fn start_java((classpath, classes): (String, PathBuf), url: &str, extra: &[&str]) -> Peer {
    let mut command = Command::new("java");
    command
        .arg("-XX:+UseSerialGC")
        .arg("-cp")
        .arg(format!("{classpath}:{}", classes.display()))
        .arg("LockPeer")
        .args(["--watchdog-ms", "10000"])
        .args(extra)
        .arg(url);
    Peer::spawn(command)
}

/// A blocking peer call from inside the runtime.
fn call(peer: &mut Peer, thread: &str, line: &str) -> Reply {
    let r = tokio::task::block_in_place(|| peer.call(thread, line, T));
    assert!(r.ok, "{thread} {line}: {}", r.value);
    r
}

/// A Java `RFencedLock` holder leads the election a Rust instance observes and contends in.
async fn a_java_fenced_lock_holder_leads_and_contends_in_the_election(
    java: &mut Peer,
    client: &Client,
    el: &str,
) {
    let election = client.get_election(el);

    // Java leads: RFencedLock.lockAndGetToken on the election's name.
    let java_term: u64 = call(java, "t1", &format!("fencedlock {el}"))
        .value
        .parse()
        .unwrap();
    let java_field = call(java, "t1", "lockname").value;
    let leader = election.leader().await.unwrap().expect("Java leads");
    assert_eq!(leader.holder, java_field);
    assert_eq!(leader.term, java_term);
    assert!(!leader.is_of(client));
    let mut watch = election.observe().await.unwrap();
    let first = timeout(T, watch.next()).await.unwrap().unwrap().unwrap();
    assert_eq!(first.map(|l| l.holder), Some(java_field.clone()));

    // A Rust campaign waits while Java leads, and wins at Java's unlock (woken by its message).
    let campaign = tokio::spawn({
        let e = election.clone();
        async move { e.campaign().await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !campaign.is_finished(),
        "Rust must not lead while Java does"
    );
    let released = Instant::now();
    call(java, "t1", &format!("unlock {el}"));
    let rust = timeout(Duration::from_secs(5), campaign)
        .await
        .expect("the campaign wins after Java's unlock")
        .unwrap()
        .unwrap();
    assert!(
        released.elapsed() < Duration::from_secs(2),
        "woken, not polled"
    );
    assert!(rust.term() > java_term);
    let seen = loop {
        if let Some(l) = timeout(T, watch.next()).await.unwrap().unwrap().unwrap() {
            break l;
        }
    };
    assert_eq!(seen.holder, rust.holder());

    // Java cannot lead while Rust does; it leads once Rust resigns, with a larger term.
    assert_eq!(
        call(java, "t2", &format!("fencedtrylock {el}")).value,
        "null"
    );
    let rust_term = rust.term();
    rust.resign().await.unwrap();
    let java_again: u64 = call(java, "t2", &format!("fencedtrylock {el} 5000"))
        .value
        .parse()
        .unwrap();
    assert!(java_again > rust_term);
    call(java, "t2", &format!("unlock {el}"));
}

/// A Java `RLock` holder of a run-once name makes the Rust job skip, and a Rust job's
/// `at_least` keeps Java out.
async fn a_java_holder_of_a_run_once_name_makes_the_job_skip_and_at_least_keeps_java_out(
    java: &mut Peer,
    client: &Client,
    job: &str,
) {
    call(java, "t1", &format!("lock {job}"));
    let skipped = client
        .run_once(job, Duration::ZERO, Duration::from_secs(5), |_| async {
            panic!("must not run while Java holds the name")
        })
        .await
        .unwrap();
    assert_eq!(skipped, RunOnce::<()>::Skipped);
    call(java, "t1", &format!("unlock {job}"));

    // A Rust run that ends early keeps the name for at_least: Java's tryLock fails until then.
    let started = Instant::now();
    let ran = client
        .run_once(
            job,
            Duration::from_millis(1500),
            Duration::from_secs(5),
            |_| async { 1 },
        )
        .await
        .unwrap();
    assert_eq!(ran, RunOnce::Ran(1));
    assert_eq!(call(java, "t1", &format!("trylock {job}")).value, "false");
    let ttl: i64 = call(java, "t1", &format!("ttl {job}"))
        .value
        .parse()
        .unwrap();
    assert!(ttl > 0 && ttl <= 1500, "TTL {ttl} ms");
    let got = call(java, "t1", &format!("trylock {job} 4000")).value;
    assert_eq!(got, "true");
    assert!(started.elapsed() >= Duration::from_millis(1450));
    call(java, "t1", &format!("unlock {job}"));
}

/// A Rust permit without a lease beside Java: Java sees it live past its first lease (its
/// `availablePermits` gives back every permit whose deadline is behind Java's clock, its
/// `tryAcquire` finds none) while the watchdog moves its score on; Java releasing it by its id
/// makes the Rust guard `Lost` at the next renewal; a dropped Rust permit is Java's at once.
async fn java_sees_a_renewed_rust_permit_and_releases_it_by_its_id(
    java: &mut Peer,
    client: &Client,
    wire: &Wire,
    name: &str,
) {
    let sem = client.get_permit_expirable_semaphore(name);
    assert_eq!(
        call(java, "t1", &format!("psemsetpermits {name} 1")).value,
        "true"
    );
    let permit = sem.acquire(None).await.unwrap();
    assert!(permit.is_watchdog());
    let id = permit.id().to_string();
    let first = wire
        .score(sem.timeouts_key(), permit.id())
        .expect("acquired");
    let lease = WATCHDOG.as_millis() as i64;
    assert!(
        (first - now_ms() - lease).abs() < 1_000,
        "taken with the watchdog timeout as its lease: score {first}"
    );
    // Past the first lease by a renewal period: Java finds it live.
    while now_ms() < first + lease / 3 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        call(java, "t1", &format!("psemavailable {name}")).value,
        "0",
        "Java's look gives back permits behind its clock: the Rust permit's lease has moved"
    );
    assert_eq!(
        call(java, "t1", &format!("psemtryacquire {name}")).value,
        "null"
    );
    let moved = wire.score(sem.timeouts_key(), permit.id()).expect("live");
    assert!(
        moved > first && moved > now_ms(),
        "the lease keeps moving: {first} → {moved}"
    );
    assert_eq!(permit.state(), HoldState::Held);

    // Java releases it by its id: lost for the Rust holder at the next renewal.
    let released = Instant::now();
    assert_eq!(
        call(java, "t1", &format!("psemrelease {name} {id}")).value,
        "released"
    );
    timeout(T, permit.lost()).await.unwrap();
    assert_eq!(permit.state(), HoldState::Lost);
    assert!(
        released.elapsed() < WATCHDOG,
        "told by a renewal, not at the deadline: {:?}",
        released.elapsed()
    );
    let java_id = call(java, "t1", &format!("psemtryacquire {name}")).value;
    assert_eq!(java_id.len(), 32, "Java got the permit back: {java_id}");
    call(java, "t1", &format!("psemrelease {name} {java_id}"));

    // A dropped Rust permit is given back at once (not at its lease's end).
    let second = sem.acquire(None).await.unwrap();
    let dropped = Instant::now();
    drop(second);
    let got = call(java, "t1", &format!("psemtryacquire {name} 5000")).value;
    assert_eq!(got.len(), 32, "{got}");
    assert!(
        dropped.elapsed() < WATCHDOG,
        "given back by the drop: {:?}",
        dropped.elapsed()
    );
    call(java, "t1", &format!("psemrelease {name} {got}"));
    drop(permit);
}

/// Every recipe beside one Java process.
async fn every_recipe(java: &mut Peer, client: &Client, wire: &Wire, prefix: &str) {
    a_java_fenced_lock_holder_leads_and_contends_in_the_election(
        java,
        client,
        &format!("{prefix}el"),
    )
    .await;
    a_java_holder_of_a_run_once_name_makes_the_job_skip_and_at_least_keeps_java_out(
        java,
        client,
        &format!("{prefix}job"),
    )
    .await;
    java_sees_a_renewed_rust_permit_and_releases_it_by_its_id(
        java,
        client,
        wire,
        &format!("{prefix}psem"),
    )
    .await;
    tokio::task::block_in_place(|| java.global("quit", T));
}

async fn on_standalone(var: &str, test: &str) {
    let Some(driver) = java(var, test) else {
        return;
    };
    let server = RedisServer::start();
    let mut java = start_java(driver, &server.url(), &[]);
    let client = Client::connect(&server.url(), config()).await.unwrap();
    every_recipe(&mut java, &client, &Wire::One(server.port()), "").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recipes_beside_java_redisson_on_standalone() {
    on_standalone(CLASSPATH, "the_recipes_beside_java_redisson_on_standalone").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recipes_beside_java_redisson_on_a_cluster() {
    let Some(driver) = java(CLASSPATH, "the_recipes_beside_java_redisson_on_a_cluster") else {
        return;
    };
    let c = RedisCluster::shared();
    let seeds = c.seed_urls();
    let mut java = start_java(driver, &seeds.join(","), &["--cluster"]);
    let seeds: Vec<&str> = seeds.iter().map(String::as_str).collect();
    let client = Client::connect_cluster(&seeds, config()).await.unwrap();
    every_recipe(&mut java, &client, &Wire::Cluster(c), "c-").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_recipes_beside_a_second_redisson_version_on_standalone() {
    on_standalone(
        CLASSPATH_ALT,
        "the_recipes_beside_a_second_redisson_version_on_standalone",
    )
    .await;
}
