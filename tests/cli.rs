//! The `redisson-lock` binary against a real redis-server, on lock state written by the crate and
//! by raw commands in the layout a Java Redisson client writes.
#![cfg(feature = "cli")]

mod common;

use std::{
    io::Write,
    process::{Command, Stdio},
    time::Duration,
};

use common::{Admin, RedisServer};
use fred::interfaces::{HashesInterface, KeysInterface};
use redisson_lock::{Client, Config};

const JAVA_A: &str = "6f1c2a9e-5b4d-4c3e-8a7f-1e2d3c4b5a69";
const JAVA_B: &str = "0a9b8c7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d";

struct Out {
    code: i32,
    stdout: String,
    stderr: String,
}

fn cli(url: &str, args: &[&str], stdin: &str) -> Out {
    let mut child = Command::new(env!("CARGO_BIN_EXE_redisson-lock"))
        .arg("--url")
        .arg(url)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run redisson-lock");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    Out {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn ok(out: Out) -> String {
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    out.stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_reads_locks_written_by_the_crate() {
    let s = RedisServer::start();
    let url = s.url();
    let client = Client::connect(&url, Config::default()).await.unwrap();
    let lock = client.get_lock("cli:r");
    let g1 = lock.lock().await.unwrap();
    let g2 = lock.lock().await.unwrap();
    // A waiter in another client: one subscriber on the unlock channel.
    let other = Client::connect(&url, Config::default()).await.unwrap();
    let waiter = other.get_lock("cli:r");
    let task = tokio::spawn(waiter.lock());
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            Admin::connect(&url)
                .await
                .numsub("redisson_lock__channel:{cli:r}")
                .await
                == 1
        })
        .await
    );
    let json = ok(cli(&url, &["inspect", "cli:r", "--json"], ""));
    assert!(json.contains("\"name\":\"cli:r\""), "{json}");
    assert!(json.contains("\"kind\":\"reentrant\""), "{json}");
    let holder = format!(
        "{{\"client_id\":\"{}\",\"thread_id\":\"{}\",\"count\":2,",
        client.id(),
        lock.owner().id()
    );
    assert!(json.contains(&holder), "{json}");
    assert!(json.contains("\"subscribers\":1"), "{json}");
    assert!(json.contains("\"token\":null"), "{json}");
    let ttl: i64 = json
        .split("\"ttl_ms\":")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|n| n.parse().ok())
        .expect("a ttl");
    assert!(ttl > 0 && ttl <= 30_000, "{ttl}");
    let text = ok(cli(&url, &["inspect", "cli:r"], ""));
    assert!(text.contains("kind:    reentrant"), "{text}");
    assert!(text.contains("count 2"), "{text}");

    // A fenced lock: its token.
    let fenced = client.get_fenced_lock("cli:fenced");
    let fg = fenced.lock().await.unwrap();
    let json = ok(cli(&url, &["inspect", "cli:fenced", "--json"], ""));
    assert!(json.contains("\"kind\":\"fenced\""), "{json}");
    assert!(
        json.contains(&format!("\"token\":{}", fg.token())),
        "{json}"
    );

    // list (SCAN) finds the lock hashes, not other keys.
    let admin = Admin::connect(&url).await;
    let _: () = admin
        .redis
        .set("cli:plain", "x", None, None, false)
        .await
        .unwrap();
    let listed = ok(cli(&url, &["list", "cli:*"], ""));
    assert!(listed.contains("cli:r\treentrant\tholders=1"), "{listed}");
    assert!(listed.contains("cli:fenced\tfenced"), "{listed}");
    assert!(!listed.contains("cli:plain"), "{listed}");

    // watch refreshes (bounded here by --count).
    let watched = ok(cli(
        &url,
        &["watch", "cli:r", "--interval-ms", "20", "--count", "2"],
        "",
    ));
    assert_eq!(watched.matches("lock:    cli:r").count(), 2, "{watched}");

    // unlock: refused without --force, aborted without a yes, done with --yes; the waiter wakes.
    assert_eq!(cli(&url, &["unlock", "cli:r"], "").code, 2);
    let aborted = cli(&url, &["unlock", "--force", "cli:r"], "n\n");
    assert_eq!(aborted.code, 5, "{}", aborted.stderr);
    assert!(admin.exists("cli:r").await);
    let done = cli(&url, &["unlock", "--force", "cli:r"], "y\n");
    assert_eq!(done.code, 0, "{}", done.stderr);
    let woken = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("the waiter was woken by the unlock message")
        .unwrap()
        .unwrap();
    // The holder's guards learn of it at their next renewal; dropping them is harmless.
    drop((g1, g2));
    woken.unlock().await.unwrap();
    fg.unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_reads_the_java_layout_of_fair_and_read_write_locks() {
    let s = RedisServer::start();
    let url = s.url();
    let admin = Admin::connect(&url).await;
    let r = &admin.redis;
    // Fair: holder A:1, queue B:7 then A:9 with their deadlines.
    let holder = format!("{JAVA_A}:1");
    let (w1, w2) = (format!("{JAVA_B}:7"), format!("{JAVA_A}:9"));
    admin.java_hold("app:fair", &holder, 20_000).await;
    admin
        .cmd(
            "RPUSH",
            vec![
                "redisson_lock_queue:{app:fair}".into(),
                w1.as_str().into(),
                w2.as_str().into(),
            ],
        )
        .await
        .unwrap();
    admin
        .cmd(
            "ZADD",
            vec![
                "redisson_lock_timeout:{app:fair}".into(),
                "1900000000000".into(),
                w1.as_str().into(),
                "1900000005000".into(),
                w2.as_str().into(),
            ],
        )
        .await
        .unwrap();
    // The name mapper's prefix is given on the command line.
    let json = ok(cli(
        &url,
        &["--prefix", "app:", "inspect", "fair", "--json"],
        "",
    ));
    assert!(json.contains("\"kind\":\"fair\""), "{json}");
    assert!(
        json.contains(&format!(
            "\"queue\":[{{\"client_id\":\"{JAVA_B}\",\"thread_id\":\"7\",\"deadline_ms\":1900000000000}},{{\"client_id\":\"{JAVA_A}\",\"thread_id\":\"9\",\"deadline_ms\":1900000005000}}]"
        )),
        "{json}"
    );
    assert!(
        json.contains(&format!(
            "\"holders\":[{{\"client_id\":\"{JAVA_A}\",\"thread_id\":\"1\",\"count\":1,"
        )),
        "{json}"
    );
    // Read-write: two read holds of A:3 with their timeout keys, one of B:4.
    let (ra, rb) = (format!("{JAVA_A}:3"), format!("{JAVA_B}:4"));
    let _: i64 = r
        .hset(
            "catalog",
            vec![("mode", "read"), (ra.as_str(), "2"), (rb.as_str(), "1")],
        )
        .await
        .unwrap();
    let _: i64 = r.pexpire("catalog", 30_000, None).await.unwrap();
    for key in [
        format!("{{catalog}}:{ra}:rwlock_timeout:1"),
        format!("{{catalog}}:{ra}:rwlock_timeout:2"),
        format!("{{catalog}}:{rb}:rwlock_timeout:1"),
    ] {
        let _: () = r
            .set(
                key,
                1,
                Some(fred::types::Expiration::PX(25_000)),
                None,
                false,
            )
            .await
            .unwrap();
    }
    let json = ok(cli(&url, &["inspect", "catalog", "--json"], ""));
    assert!(json.contains("\"kind\":\"read-write\""), "{json}");
    assert!(json.contains("\"mode\":\"read\""), "{json}");
    let a = format!("{{\"client_id\":\"{JAVA_A}\",\"thread_id\":\"3\",\"count\":2,\"mode\":\"read\",\"reader_ttls_ms\":[");
    let rest = json.split(&a).nth(1).expect("reader A");
    let ttls: Vec<i64> = rest
        .split(']')
        .next()
        .unwrap()
        .split(',')
        .map(|t| t.parse().unwrap())
        .collect();
    assert_eq!(ttls.len(), 2);
    assert!(ttls.iter().all(|t| *t > 20_000 && *t <= 25_000), "{ttls:?}");
    // A write hold in Java's layout.
    let _: i64 = r
        .hset(
            "doc",
            vec![
                ("mode", "write"),
                (format!("{JAVA_B}:5:write").as_str(), "1"),
            ],
        )
        .await
        .unwrap();
    let json = ok(cli(&url, &["inspect", "doc", "--json"], ""));
    assert!(
        json.contains(&format!(
            "{{\"client_id\":\"{JAVA_B}\",\"thread_id\":\"5\",\"count\":1,\"mode\":\"write\""
        )),
        "{json}"
    );
    assert!(json.contains("\"ttl_ms\":null"), "no expiry: {json}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_url_missing_lock_and_refused_permission_fail_clearly() {
    let s = RedisServer::start();
    let url = s.url();
    // Missing lock.
    let missing = cli(&url, &["inspect", "nope"], "");
    assert_eq!(missing.code, 3);
    assert!(
        missing.stderr.contains("no lock named 'nope'"),
        "{}",
        missing.stderr
    );
    // Not a lock.
    let admin = Admin::connect(&url).await;
    let _: () = admin
        .redis
        .set("str", "x", None, None, false)
        .await
        .unwrap();
    let wrong = cli(&url, &["inspect", "str"], "");
    assert_eq!(wrong.code, 1);
    assert!(wrong.stderr.contains("not a lock"), "{}", wrong.stderr);
    // Bad URLs: the password is never echoed.
    let bad = cli("http://user:s3cret@127.0.0.1:1", &["inspect", "x"], "");
    assert_eq!(bad.code, 1);
    assert!(bad.stderr.contains("invalid Redis URL"), "{}", bad.stderr);
    assert!(!bad.stderr.contains("s3cret"));
    let down = cli("redis://127.0.0.1:1", &["inspect", "x"], "");
    assert_eq!(down.code, 1);
    assert!(down.stderr.contains("cannot connect"), "{}", down.stderr);
    // A user without HGETALL: NOPERM.
    admin
        .cmd(
            "ACL",
            vec![
                "SETUSER".into(),
                "viewer".into(),
                "on".into(),
                ">pw".into(),
                "~*".into(),
                "+@all".into(),
                "-hgetall".into(),
            ],
        )
        .await
        .unwrap();
    admin
        .java_hold("held", &format!("{JAVA_A}:1"), 10_000)
        .await;
    let denied_url = url.replacen("redis://", "redis://viewer:pw@", 1);
    let denied = cli(&denied_url, &["inspect", "held"], "");
    assert_eq!(denied.code, 4, "{}", denied.stderr);
    assert!(
        denied.stderr.contains("permission denied"),
        "{}",
        denied.stderr
    );
}
