//! The `redisson-lock` binary against a real redis-server, on lock state written by the crate and
//! by raw commands in the layout a Java Redisson client writes: a standalone server, a cluster
//! (`redis-cluster://`), Sentinel (`redis-sentinel://`) and TLS (`rediss://` with `--tls-ca`,
//! feature `tls`).
#![cfg(feature = "cli")]

use common::sentinel as sentinel_rig;
#[cfg(feature = "tls")]
use common::tls as tls_rig;
use redisson_lock_test_kit as common;

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
    // A wrong password: refused at connect, the same exit code, the password not echoed.
    let wrong_url = url.replacen("redis://", "redis://viewer:pw-Cli-Wr0ng@", 1);
    let wrong = cli(&wrong_url, &["inspect", "held"], "");
    assert_eq!(wrong.code, 4, "{}", wrong.stderr);
    assert!(wrong.stderr.contains("WRONGPASS"), "{}", wrong.stderr);
    assert!(!wrong.stderr.contains("pw-Cli-Wr0ng"), "{}", wrong.stderr);
}

/// A crate waiter on `name` in `client`, as a task (woken by the force-unlock's message).
fn waiter(client: &Client, name: &str) -> tokio::task::JoinHandle<redisson_lock::Result<()>> {
    let lock = client.get_lock(name);
    tokio::spawn(async move {
        let g = lock.try_lock_for(Duration::from_secs(30)).await?;
        g.expect("acquired after the force-unlock")
            .unlock()
            .await
            .map(|_| ())
    })
}

/// Waits until `inspect NAME --json` reports `n` subscribers (the waiter has subscribed).
async fn wait_for_subscribers(url: &str, extra: &[&str], name: &str, n: usize) {
    let want = format!("\"subscribers\":{n}");
    let mut args = extra.to_vec();
    args.extend(["inspect", name, "--json"]);
    let found = common::eventually(Duration::from_secs(10), || {
        let found = ok(cli(url, &args, "")).contains(&want);
        async move { found }
    })
    .await;
    assert!(found, "{name}: never {want}: {}", ok(cli(url, &args, "")));
}

/// The cluster: locks by the crate and in Java's layout on every master; `list` finds them all
/// (SCAN of every master), `inspect` counts the sharded waiter, `unlock --force --yes` wakes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_on_a_cluster_lists_every_master_inspects_and_force_unlocks() {
    let cluster = common::cluster::RedisCluster::shared();
    let url = cluster.cluster_url();
    let masters = cluster.masters();
    let names: Vec<String> = masters
        .iter()
        .flat_map(|m| cluster.names_on(*m, "clitopo-", 1))
        .collect();
    assert_eq!(names.len(), 3, "one name per master");
    let client = Client::connect(&url, Config::default()).await.unwrap();
    let other = Client::connect(&url, Config::default()).await.unwrap();
    // A waiter like Redisson < 3.22: classic SUBSCRIBE, on whichever node.
    let classic = Client::connect(
        &url,
        Config::default().sharded_subscription_mode(redisson_lock::ShardedSubscriptionMode::Off),
    )
    .await
    .unwrap();
    // Crate holds on the first two masters; a Java-layout hold (raw HSET + PEXPIRE) on the third.
    let g0 = client.get_lock(&names[0]).lock().await.unwrap();
    let g1 = client.get_fenced_lock(&names[1]).lock().await.unwrap();
    let admin = Admin::connect(&url).await;
    admin
        .java_hold(&names[2], &format!("{JAVA_A}:11"), 30_000)
        .await;

    let listed = ok(cli(&url, &["list", "clitopo-*"], ""));
    for name in &names {
        assert!(listed.contains(&format!("{name}\t")), "{name} in {listed}");
    }
    assert!(
        listed.contains(&format!("{}\tfenced", names[1])),
        "{listed}"
    );

    let json = ok(cli(&url, &["inspect", &names[2], "--json"], ""));
    assert!(
        json.contains(&format!(
            "\"holders\":[{{\"client_id\":\"{JAVA_A}\",\"thread_id\":\"11\",\"count\":1,"
        )),
        "{json}"
    );

    // A sharded waiter (SSUBSCRIBE on the channel's owner) on the crate's lock, a classic one
    // (SUBSCRIBE, on any node) on the Java-layout lock: `inspect` counts both kinds, and each
    // force-unlock wakes its waiter (the tool publishes both ways on a cluster).
    let woken0 = waiter(&other, &names[0]);
    let woken2 = waiter(&classic, &names[2]);
    wait_for_subscribers(&url, &[], &names[0], 1).await;
    wait_for_subscribers(&url, &[], &names[2], 1).await;
    let json = ok(cli(&url, &["inspect", &names[0], "--json"], ""));
    assert!(
        json.contains(&format!("\"client_id\":\"{}\"", client.id())),
        "{json}"
    );
    for name in [&names[0], &names[2]] {
        let out = ok(cli(&url, &["unlock", "--force", "--yes", name], ""));
        assert!(out.contains("unlocked"), "{out}");
    }
    // Well under the 30 s lock TTL that would bound a waiter that missed the message.
    for task in [woken0, woken2] {
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("woken by the force-unlock message")
            .unwrap()
            .unwrap();
    }
    drop(g0);
    g1.unlock().await.unwrap();
    client.shutdown().await;
    other.shutdown().await;
    classic.shutdown().await;
}

/// Through Sentinel (`redis-sentinel://` URL): the tool finds the master, reads locks written
/// by the crate and in Java's layout, and force-unlocks one with a waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_through_sentinel_inspects_lists_and_force_unlocks() {
    let set = sentinel_rig::SentinelSet::start();
    let ports = set.sentinel_ports();
    let url = format!(
        "redis-sentinel://127.0.0.1:{}?sentinelServiceName={}&node=127.0.0.1:{}",
        ports[0],
        sentinel_rig::MASTER_NAME,
        ports[1]
    );
    let client = Client::connect(&url, Config::default()).await.unwrap();
    let other = Client::connect(&url, Config::default()).await.unwrap();
    let g = client.get_lock("sent:crate").lock().await.unwrap();
    let admin = Admin::connect(&format!("redis://127.0.0.1:{}", set.master_port())).await;
    admin
        .java_hold("sent:java", &format!("{JAVA_B}:3"), 30_000)
        .await;

    let listed = ok(cli(&url, &["list", "sent:*"], ""));
    assert!(
        listed.contains("sent:crate\treentrant\tholders=1"),
        "{listed}"
    );
    assert!(
        listed.contains("sent:java\treentrant\tholders=1"),
        "{listed}"
    );
    let json = ok(cli(&url, &["inspect", "sent:java", "--json"], ""));
    assert!(
        json.contains(&format!("{{\"client_id\":\"{JAVA_B}\",\"thread_id\":\"3\"")),
        "{json}"
    );

    let woken = waiter(&other, "sent:crate");
    wait_for_subscribers(&url, &[], "sent:crate", 1).await;
    ok(cli(&url, &["unlock", "--force", "--yes", "sent:crate"], ""));
    tokio::time::timeout(Duration::from_secs(10), woken)
        .await
        .expect("woken by the force-unlock message")
        .unwrap()
        .unwrap();
    assert!(!admin.exists("sent:crate").await);
    drop(g);
    client.shutdown().await;
    other.shutdown().await;
}

/// Over TLS (`rediss://` + `--tls-ca`): inspect, list and force-unlock; without the CA the
/// server's certificate is refused (non-zero exit, a clear message).
#[cfg(feature = "tls")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cli_over_tls_with_a_ca_file() {
    let certs = tls_rig::Certs::make();
    let server = tls_rig::TlsRedis::start(&certs, "server", false, &[]);
    let url = server.url();
    let ca = certs.path("ca.crt");
    let ca = ca.to_str().unwrap();
    let config = || Config::default().tls(redisson_lock::TlsSettings::new().ca_file(ca));
    let client = Client::connect(&url, config()).await.unwrap();
    let other = Client::connect(&url, config()).await.unwrap();
    let g = client.get_lock("tls:crate").lock().await.unwrap();
    // A Java-layout hold written with raw commands over TLS.
    let raw = |args: &[&str]| {
        let out = std::process::Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &server.port.to_string(), "--tls"])
            .args(["--cacert", ca])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success());
    };
    raw(&["HSET", "tls:java", &format!("{JAVA_A}:8"), "2"]);
    raw(&["PEXPIRE", "tls:java", "30000"]);

    let tls = ["--tls-ca", ca];
    let with = |rest: &[&'static str]| {
        let mut a: Vec<&str> = tls.to_vec();
        a.extend(rest);
        a
    };
    let listed = ok(cli(&url, &with(&["list", "tls:*"]), ""));
    assert!(listed.contains("tls:crate\treentrant"), "{listed}");
    assert!(listed.contains("tls:java\treentrant"), "{listed}");
    let json = ok(cli(&url, &with(&["inspect", "tls:java", "--json"]), ""));
    assert!(
        json.contains(&format!(
            "{{\"client_id\":\"{JAVA_A}\",\"thread_id\":\"8\",\"count\":2,"
        )),
        "{json}"
    );
    let woken = waiter(&other, "tls:crate");
    wait_for_subscribers(&url, &tls, "tls:crate", 1).await;
    ok(cli(
        &url,
        &with(&["unlock", "--force", "--yes", "tls:crate"]),
        "",
    ));
    tokio::time::timeout(Duration::from_secs(10), woken)
        .await
        .expect("woken by the force-unlock message")
        .unwrap()
        .unwrap();

    // Without the CA: the platform roots do not know the test CA.
    let refused = cli(&url, &["inspect", "tls:java"], "");
    assert_eq!(refused.code, 1, "{}", refused.stderr);
    assert!(
        refused.stderr.contains("cannot connect"),
        "{}",
        refused.stderr
    );
    // A plain URL against the TLS port is not a TLS connection either.
    let plain = cli(
        &url.replacen("rediss://", "redis://", 1),
        &["inspect", "tls:java"],
        "",
    );
    assert_ne!(plain.code, 0);
    drop(g);
    client.shutdown().await;
    other.shutdown().await;
}

/// Semaphores, permit-expirable semaphores and latches: `inspect` shows the permits or the
/// count, the acquired permits with their ids and expiries, the waiters; `list` finds them
/// (not the crate's internal counters); `unlock --force` refuses them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_and_list_understand_semaphores_and_latches() {
    let s = RedisServer::start();
    let url = s.url();
    let client = Client::connect(&url, Config::default()).await.unwrap();
    let sem = client.get_semaphore("clisync:sem");
    assert!(sem.try_set_permits(3).await.unwrap());
    sem.try_acquire(1)
        .await
        .unwrap()
        .expect("a permit")
        .forget();
    let psem = client.get_permit_expirable_semaphore("clisync:psem");
    assert!(psem.try_set_permits(2).await.unwrap());
    let leased = psem
        .try_acquire(Some(Duration::from_secs(60)))
        .await
        .unwrap()
        .unwrap()
        .keep();
    let forever = psem
        .clone()
        .without_watchdog()
        .try_acquire(None)
        .await
        .unwrap()
        .unwrap()
        .keep();
    let latch = client.get_count_down_latch("clisync:cdl");
    assert!(latch.try_set_count(2).await.unwrap());
    // A latch waiter tells the latch from a semaphore.
    let waiter = {
        let latch = latch.clone();
        tokio::spawn(async move { latch.wait().await })
    };
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            Admin::connect(&url)
                .await
                .numsub("redisson_countdownlatch__channel__{clisync:cdl}")
                .await
                == 1
        })
        .await
    );
    let _fenced = client
        .get_fenced_lock("clisync:token")
        .lock()
        .await
        .unwrap();

    let json = ok(cli(&url, &["inspect", "clisync:sem", "--json"], ""));
    assert!(json.contains("\"kind\":\"semaphore-or-latch\""), "{json}");
    assert!(json.contains("\"value\":2"), "{json}");
    let json = ok(cli(&url, &["inspect", "clisync:psem", "--json"], ""));
    assert!(
        json.contains("\"kind\":\"permit-expirable-semaphore\""),
        "{json}"
    );
    assert!(json.contains("\"value\":0"), "{json}");
    assert!(
        json.contains(&format!(
            "{{\"id\":\"{forever}\",\"expires_ms\":null,\"lease_left_ms\":null}}"
        )),
        "{json}"
    );
    assert!(
        json.contains(&format!("{{\"id\":\"{leased}\",\"expires_ms\":1")),
        "{json}"
    );
    let json = ok(cli(&url, &["inspect", "clisync:cdl", "--json"], ""));
    assert!(json.contains("\"kind\":\"count-down-latch\""), "{json}");
    assert!(json.contains("\"value\":2"), "{json}");
    assert!(json.contains("\"subscribers\":1"), "{json}");
    let text = ok(cli(&url, &["inspect", "clisync:psem"], ""));
    assert!(text.contains("acquired: 2"), "{text}");
    assert!(text.contains(&format!("{forever} expires never")), "{text}");

    let listed = ok(cli(&url, &["list", "*"], ""));
    assert!(
        listed.contains("clisync:sem\tsemaphore-or-latch\tvalue=2"),
        "{listed}"
    );
    assert!(
        listed.contains("clisync:psem\tpermit-expirable-semaphore\tvalue=0\tacquired=2"),
        "{listed}"
    );
    assert!(
        listed.contains("clisync:cdl\tcount-down-latch\tvalue=2"),
        "{listed}"
    );
    assert!(listed.contains("clisync:token\tfenced"), "{listed}");
    assert!(!listed.contains("redisson_lock_token"), "{listed}");

    let refused = cli(&url, &["unlock", "clisync:sem", "--force", "--yes"], "");
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    assert!(refused.stderr.contains("not a lock"), "{}", refused.stderr);

    latch.count_down().await.unwrap();
    latch.count_down().await.unwrap();
    waiter.await.unwrap().unwrap();
    client.shutdown().await;
}

/// A group multi-lock's hash: `inspect` shows its values with their holders, counts and
/// deadlines, `list` finds it as a group, `unlock --force` frees the whole group and wakes a
/// waiter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_list_and_force_unlock_understand_the_group_hash() {
    let s = RedisServer::start();
    let url = s.url();
    let client = Client::connect(&url, Config::default()).await.unwrap();
    let a = client.get_group_lock_with_owner("cli:group", ["a", "b"], redisson_lock::Owner::new());
    let _ga = a.lock().await.unwrap();
    let _ga2 = a.lock().await.unwrap();
    let c = client.get_group_lock_with_owner("cli:group", ["c"], redisson_lock::Owner::new());
    let _gc = c.lock().await.unwrap();
    let json = ok(cli(&url, &["inspect", "cli:group", "--json"], ""));
    assert!(json.contains("\"kind\":\"group\""), "{json}");
    for (value, lock, count) in [("a", &a, 2), ("b", &a, 2), ("c", &c, 1)] {
        let entry = format!(
            "{{\"field\":\"{}\",\"client_id\":\"{}\",\"thread_id\":\"{}\",\"count\":{count},\"deadline_ms\":",
            redisson_lock::GroupLock::value_field(value),
            client.id(),
            lock.owner().id()
        );
        assert!(json.contains(&entry), "{value}: {json}");
    }
    let text = ok(cli(&url, &["inspect", "cli:group"], ""));
    assert!(text.contains("kind:    group"), "{text}");
    assert!(text.contains("holders: 2"), "{text}");
    assert!(text.contains("values:  3"), "{text}");
    let listed = ok(cli(&url, &["list", "cli:*"], ""));
    assert!(listed.contains("cli:group\tgroup\tholders=2"), "{listed}");
    // A waiter in another client wakes when the group is force-unlocked.
    let other = Client::connect(&url, Config::default()).await.unwrap();
    let waiter = other.get_group_lock_with_owner("cli:group", ["b"], redisson_lock::Owner::new());
    let task = tokio::spawn(async move { waiter.try_lock_for(Duration::from_secs(20)).await });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            Admin::connect(&url)
                .await
                .numsub("redisson_lock__channel:{cli:group}")
                .await
                == 1
        })
        .await
    );
    let out = ok(cli(&url, &["unlock", "cli:group", "--force", "--yes"], ""));
    assert!(out.contains("unlocked 'cli:group'"), "{out}");
    let got = tokio::time::timeout(Duration::from_secs(5), task)
        .await
        .expect("woken by the force unlock's message")
        .unwrap()
        .unwrap();
    assert!(got.is_some());
}

/// An election's leader (the fenced lock's holder, its term, its proclaimed value) and a
/// watchdog permit's lease, which moves on between two inspections.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_shows_an_elections_leader_and_the_permit_leases() {
    let s = RedisServer::start();
    let url = s.url();
    let config = Config::default().lock_watchdog_timeout(Duration::from_millis(1500));
    let client = Client::connect(&url, config).await.unwrap();

    let leadership = client.get_election("cli:el").campaign().await.unwrap();
    assert!(leadership.proclaim("10.0.0.7:8080").await.unwrap());
    let (client_id, thread_id) = leadership.holder().rsplit_once(':').unwrap();
    let json = ok(cli(&url, &["inspect", "cli:el", "--json"], ""));
    let leader = format!(
        "\"leader\":{{\"holder\":\"{}\",\"client_id\":\"{client_id}\",\"thread_id\":\"{thread_id}\",\"term\":{},\"value\":\"10.0.0.7:8080\"}}",
        leadership.holder(),
        leadership.term()
    );
    assert!(json.contains(&leader), "{json}");
    let text = ok(cli(&url, &["inspect", "cli:el"], ""));
    assert!(
        text.contains(&format!(
            "leader:  client {client_id} thread {thread_id} term {} proclaimed 10.0.0.7:8080",
            leadership.term()
        )),
        "{text}"
    );
    leadership.resign().await.unwrap();
    let json = ok(cli(&url, &["inspect", "cli:el", "--json"], ""));
    assert!(json.contains("\"leader\":null"), "{json}");

    let sem = client.get_permit_expirable_semaphore("cli:wdpsem");
    assert!(sem.try_set_permits(1).await.unwrap());
    let permit = sem.acquire(None).await.unwrap();
    let id = permit.id().to_string();
    let expiry = |json: &str| -> (i64, i64) {
        let at = json
            .find(&format!("{{\"id\":\"{id}\",\"expires_ms\":"))
            .unwrap_or_else(|| panic!("{json}"));
        let rest = &json[at..];
        let num = |key: &str| -> i64 {
            let from = rest.find(key).unwrap() + key.len();
            rest[from..]
                .split([',', '}'])
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        (num("\"expires_ms\":"), num("\"lease_left_ms\":"))
    };
    let (first, left) = expiry(&ok(cli(&url, &["inspect", "cli:wdpsem", "--json"], "")));
    assert!(left > 0 && left <= 1500, "lease left {left} ms");
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            let (now, left) = expiry(&ok(cli(&url, &["inspect", "cli:wdpsem", "--json"], "")));
            now > first && left > 0
        })
        .await,
        "the permit's lease moves on"
    );
    let text = ok(cli(&url, &["inspect", "cli:wdpsem"], ""));
    assert!(text.contains(&format!("  {id} expires ")), "{text}");
    assert!(text.contains("lease left "), "{text}");
    permit.release().await.unwrap();
}
