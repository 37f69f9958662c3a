//! The recipes beside real Java Redisson (the Java driver, `compat-tests/java/LockPeer.java`):
//! a Java `RFencedLock` holder leads an election that a Rust instance observes and contends in,
//! and a Java `RLock` holder of a run-once name makes the Rust job skip (and a Rust job's
//! `at_least` keeps Java out). Needs `REDISSON_CLASSPATH` (README, "Beside real Java
//! Redisson"), or `REDISSON_SKIP_JAVA=1` to skip on purpose.

#[path = "../../tests/common/redis_server.rs"]
mod redis_server;

#[path = "common/peer.rs"]
mod peer;

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use peer::{Peer, Reply};
use redis_server::RedisServer;
use redisson_lock::{Client, Config, RunOnce};
use tokio::time::{timeout, Instant};

const T: Duration = Duration::from_secs(20);

/// The Java driver compiled against `REDISSON_CLASSPATH`, or `None` (said loudly) to skip.
fn java() -> Option<(String, PathBuf)> {
    let Some(classpath) = std::env::var("REDISSON_CLASSPATH")
        .ok()
        .filter(|v| !v.trim().is_empty())
    else {
        assert_eq!(
            std::env::var("REDISSON_SKIP_JAVA").as_deref(),
            Ok("1"),
            "set REDISSON_CLASSPATH to Redisson's class path, or REDISSON_SKIP_JAVA=1 to skip"
        );
        eprintln!("SKIPPED recipes_java: no REDISSON_CLASSPATH, and REDISSON_SKIP_JAVA=1");
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

fn start_java(url: &str) -> Option<Peer> {
    let (classpath, classes) = java()?;
    let mut command = Command::new("java");
    command
        .arg("-XX:+UseSerialGC")
        .arg("-cp")
        .arg(format!("{classpath}:{}", classes.display()))
        .arg("LockPeer")
        .args(["--watchdog-ms", "10000"])
        .arg(url);
    Some(Peer::spawn(command))
}

/// A blocking peer call from inside the runtime.
fn call(peer: &mut Peer, thread: &str, line: &str) -> Reply {
    let r = tokio::task::block_in_place(|| peer.call(thread, line, T));
    assert!(r.ok, "{thread} {line}: {}", r.value);
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_fenced_lock_holder_leads_and_contends_in_the_election() {
    let server = RedisServer::start();
    let Some(mut java) = start_java(&server.url()) else {
        return;
    };
    let client = Client::connect(&server.url(), Config::default())
        .await
        .unwrap();
    let election = client.get_election("el");

    // Java leads: RFencedLock.lockAndGetToken on the election's name.
    let java_term: u64 = call(&mut java, "t1", "fencedlock el")
        .value
        .parse()
        .unwrap();
    let java_field = call(&mut java, "t1", "lockname").value;
    let leader = election.leader().await.unwrap().expect("Java leads");
    assert_eq!(leader.holder, java_field);
    assert_eq!(leader.term, java_term);
    assert!(!leader.is_of(&client));
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
    call(&mut java, "t1", "unlock el");
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
    assert_eq!(call(&mut java, "t2", "fencedtrylock el").value, "null");
    let rust_term = rust.term();
    rust.resign().await.unwrap();
    let java_again: u64 = call(&mut java, "t2", "fencedtrylock el 5000")
        .value
        .parse()
        .unwrap();
    assert!(java_again > rust_term);
    call(&mut java, "t2", "unlock el");
    tokio::task::block_in_place(|| java.global("quit", T));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_java_holder_of_a_run_once_name_makes_the_job_skip_and_at_least_keeps_java_out() {
    let server = RedisServer::start();
    let Some(mut java) = start_java(&server.url()) else {
        return;
    };
    let client = Client::connect(&server.url(), Config::default())
        .await
        .unwrap();

    call(&mut java, "t1", "lock job");
    let skipped = client
        .run_once("job", Duration::ZERO, Duration::from_secs(5), |_| async {
            panic!("must not run while Java holds the name")
        })
        .await
        .unwrap();
    assert_eq!(skipped, RunOnce::<()>::Skipped);
    call(&mut java, "t1", "unlock job");

    // A Rust run that ends early keeps the name for at_least: Java's tryLock fails until then.
    let started = Instant::now();
    let ran = client
        .run_once(
            "job",
            Duration::from_millis(1500),
            Duration::from_secs(5),
            |_| async { 1 },
        )
        .await
        .unwrap();
    assert_eq!(ran, RunOnce::Ran(1));
    assert_eq!(call(&mut java, "t1", "trylock job").value, "false");
    let ttl: i64 = call(&mut java, "t1", "ttl job").value.parse().unwrap();
    assert!(ttl > 0 && ttl <= 1500, "TTL {ttl} ms");
    let got = call(&mut java, "t1", "trylock job 4000").value;
    assert_eq!(got, "true");
    assert!(started.elapsed() >= Duration::from_millis(1450));
    call(&mut java, "t1", "unlock job");
    tokio::task::block_in_place(|| java.global("quit", T));
}
