//! Cross-language tests: the crate's `lock-peer` beside real Java Redisson, driven through the
//! project's Java driver (`compat-tests/java/LockPeer.java`, the same line protocol), on one
//! Redis. For every lock kind and synchronizer, in both directions (Java holds and the crate
//! waits, and the other way round): mutual exclusion, a waiter woken by the other side's
//! release within [`WAKE_MS`] (the lock's TTL is 10 s, so a missed message would show), and the
//! wire state after each step (keys, hash fields, TTL bounds) as Redisson's protocol leaves it.
//!
//! Redisson comes from the class path in `REDISSON_CLASSPATH` (the full pass, standalone and
//! cluster) and, optionally, `REDISSON_CLASSPATH_ALT` (a second version: one direction per kind
//! on standalone). README, "Beside real Java Redisson", says where a class path comes from.
//! Without `REDISSON_CLASSPATH` these tests fail, unless `REDISSON_SKIP_JAVA=1` says to skip
//! them: then each says so with `redisson_lock_test_kit::skip::test` (a `SKIPPED test` line
//! past the test harness's capture, which `scripts/run-tests.py` counts as skipped); a missing
//! `REDISSON_CLASSPATH_ALT` skips the second-version tests the same way. One Java process per server: a JVM takes about a second
//! to start.

use compat_tests::peer;
use redisson_lock_test_kit::{cluster, redis_server, sentinel, skip};
use std::{
    collections::{BTreeMap, HashMap},
    path::PathBuf,
    process::Command,
    sync::{Mutex, OnceLock},
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use cluster::{RedisCluster, Reply as Resp};
use compat_tests::java::{Java, CLASSPATH, CLASSPATH_ALT};
use peer::hot_lock;
use peer::{Peer, Reply};
use redis_server::RedisServer;

/// The crate's `lock-peer` of this test build.
const LOCK_PEER: &str = env!("CARGO_BIN_EXE_lock-peer");

const T: Duration = Duration::from_secs(20);
/// The watchdog timeout of both peers: every watchdog-mode lock's TTL is at most this.
const WD: i64 = 10_000;
/// The longest a waiter may take to get in after the other side's release (typically 0-10 ms;
/// room for a loaded 2-core machine). A lock waiter that missed the release message waits for
/// the TTL its last attempt saw (6.6-10 s with the watchdog renewing every [`WD`]/3), a
/// semaphore or latch waiter for its deadline or for ever.
const WAKE_MS: i128 = 2_000;
/// The fair lock's waiter timeout (Redisson's default, on both sides).
const FAIR_WAIT: i64 = 300_000;
/// The permit-expirable semaphore's score for a permit without a lease.
const NO_EXPIRY: &str = "922337203685477";

// ---- Finding Redisson -------------------------------------------------------------------

/// Set to `1` to skip the Java tests on purpose when no Redisson is at hand.
const SKIP: &str = "REDISSON_SKIP_JAVA";

/// The Redisson of `var`, with the driver compiled against it (once per class path), or `None`
/// when the test is to be skipped (said loudly). Panics when nothing says where Redisson is.
fn redisson(var: &str, test: &str) -> Option<&'static Java> {
    let classpath = std::env::var(var).ok().filter(|v| !v.trim().is_empty());
    let Some(classpath) = classpath else {
        if std::env::var(SKIP).as_deref() == Ok("1") {
            skip::test(test, var, &format!("no {var}, and {SKIP}=1"));
            return None;
        }
        if var == CLASSPATH_ALT {
            skip::test(test, var, "the second Redisson version is optional");
            return None;
        }
        panic!(
            "{test} needs real Redisson: set {var} to the class path of Redisson and its \
             dependencies (README, \"Beside real Java Redisson\"), or {SKIP}=1 to skip the Java \
             tests on purpose"
        );
    };
    static BUILT: OnceLock<Mutex<HashMap<String, &'static Java>>> = OnceLock::new();
    let mut built = BUILT.get_or_init(Default::default).lock().unwrap();
    if let Some(j) = built.get(&classpath) {
        return Some(j);
    }
    let java: &'static Java = Box::leak(Box::new(
        Java::build(&classpath).unwrap_or_else(|e| panic!("{e}")),
    ));
    built.insert(classpath, java);
    Some(java)
}

/// Starts the Java driver with `extra` options on `url`.
fn start_java(java: &Java, url: &str, extra: &[&str]) -> Peer {
    Peer::spawn(java.command(&["-XX:+UseSerialGC"], url, extra))
}

// ---- The wire ---------------------------------------------------------------------------

/// The Redis both peers use, read directly (each command on the node that owns its key).
enum Wire<'a> {
    One(u16),
    Cluster(&'a RedisCluster),
}

impl Wire<'_> {
    fn port(&self, key: &str) -> u16 {
        match self {
            Wire::One(port) => *port,
            Wire::Cluster(c) => c.master_for_key(key),
        }
    }

    /// `args` on the node of `key` (which `args` names).
    fn cmd(&self, key: &str, args: &[&[u8]]) -> Resp {
        RedisCluster::cmd(self.port(key), args)
    }

    fn hash(&self, key: &str) -> BTreeMap<String, String> {
        let items = self.cmd(key, &[b"HGETALL", key.as_bytes()]).items();
        items
            .chunks(2)
            .map(|kv| (kv[0].text(), kv[1].text()))
            .collect()
    }

    fn hget(&self, key: &str, field: &str) -> Option<String> {
        match self.cmd(key, &[b"HGET", key.as_bytes(), field.as_bytes()]) {
            Resp::Bulk(Some(b)) => Some(String::from_utf8_lossy(&b).into_owned()),
            _ => None,
        }
    }

    fn get(&self, key: &str) -> Option<String> {
        match self.cmd(key, &[b"GET", key.as_bytes()]) {
            Resp::Bulk(Some(b)) => Some(String::from_utf8_lossy(&b).into_owned()),
            _ => None,
        }
    }

    fn int(&self, key: &str, args: &[&[u8]]) -> i64 {
        let r = self.cmd(key, args);
        r.int().unwrap_or_else(|| panic!("not an integer: {r:?}"))
    }

    fn pttl(&self, key: &str) -> i64 {
        self.int(key, &[b"PTTL", key.as_bytes()])
    }

    fn exists(&self, key: &str) -> bool {
        self.int(key, &[b"EXISTS", key.as_bytes()]) == 1
    }

    fn list(&self, key: &str) -> Vec<String> {
        let items = self
            .cmd(key, &[b"LRANGE", key.as_bytes(), b"0", b"-1"])
            .items();
        items.iter().map(Resp::text).collect()
    }

    fn zscore(&self, key: &str, member: &[u8]) -> Option<String> {
        match self.cmd(key, &[b"ZSCORE", key.as_bytes(), member]) {
            Resp::Bulk(Some(b)) => Some(String::from_utf8_lossy(&b).into_owned()),
            _ => None,
        }
    }

    /// Clients listening on `channel` (classic and, on a cluster, sharded).
    fn listeners(&self, channel: &str) -> i64 {
        let count = |r: Resp| r.items().get(1).and_then(Resp::int).unwrap_or(0);
        match self {
            Wire::One(port) => count(RedisCluster::cmd(*port, &["PUBSUB", "NUMSUB", channel])),
            Wire::Cluster(c) => {
                let owner = c.master_for_key(channel);
                let sharded = count(RedisCluster::cmd(
                    owner,
                    &["PUBSUB", "SHARDNUMSUB", channel],
                ));
                let classic: i64 = c
                    .live_ports()
                    .into_iter()
                    .map(|p| count(RedisCluster::cmd(p, &["PUBSUB", "NUMSUB", channel])))
                    .sum();
                sharded + classic
            }
        }
    }

    /// Waits (up to 3 s) until nobody listens on `channel` (the previous waiters'
    /// subscriptions are gone), so that a listener seen next is the new waiter's. Returns the
    /// listeners left: now and then a Java `tryLock` whose short wait ran out while it
    /// subscribed leaves its subscription for seconds (on a loaded machine: 1 channel in 60 still
    /// subscribed 5 s later; once more than 20 s).
    fn quiet(&self, channel: &str) -> i64 {
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            let n = self.listeners(channel);
            if n == 0 || Instant::now() > deadline {
                return n;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Waits until a waiter listens on `channel`, beside the `stale` listeners [`quiet`]
    /// (Self::quiet) left. With stale ones, a listener leaving can hide the new one: after 1 s
    /// the test goes on (a waiter not yet subscribed gets in by its own attempt, as fast).
    fn listening(&self, channel: &str, stale: i64) {
        if stale == 0 {
            return wait_for(&format!("a waiter listening on {channel}"), || {
                self.listeners(channel) > 0
            });
        }
        let deadline = Instant::now() + Duration::from_secs(1);
        while self.listeners(channel) <= stale {
            if Instant::now() > deadline {
                eprintln!(
                    "{channel}: {stale} stale listener(s); going on without seeing the waiter's"
                );
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + T;
    while !done() {
        assert!(Instant::now() < deadline, "{what}: never happened");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// Milliseconds from `earlier`'s reply to `later`'s (both peers stamp `at=` with the wall clock).
fn after(later: &Reply, earlier: &Reply) -> i128 {
    later.at as i128 - earlier.at as i128
}

/// The 16 bytes of a permit id printed as 32 hexadecimal characters.
fn permit_bytes(id: &str) -> Vec<u8> {
    assert_eq!(id.len(), 32, "{id}");
    (0..16)
        .map(|i| u8::from_str_radix(&id[2 * i..2 * i + 2], 16).expect("hex"))
        .collect()
}

// ---- The two peers ----------------------------------------------------------------------

/// Who holds first in a scenario; the other side waits.
#[derive(Clone, Copy, Debug)]
enum Dir {
    JavaFirst,
    CrateFirst,
}

const BOTH: [Dir; 2] = [Dir::JavaFirst, Dir::CrateFirst];

/// A Java driver and a crate peer on one Redis.
struct Pair<'a> {
    java: Peer,
    rust: Peer,
    wire: Wire<'a>,
    /// Redisson's (major, minor).
    version: (u32, u32),
    /// Names the server's keys per test (`j352-`, …).
    prefix: String,
}

/// One side of a scenario.
struct Side<'p> {
    peer: &'p mut Peer,
    who: &'static str,
    /// The kind prefix this side uses (Redisson 3.x has no non-reentrant lock: its Java side
    /// uses the reentrant lock of the same name, the same lock on the wire).
    java: bool,
}

impl Side<'_> {
    fn call(&mut self, thread: &str, line: &str) -> Reply {
        self.peer.call(thread, line, T)
    }

    fn ok(&mut self, thread: &str, line: &str, want: &str) -> Reply {
        let r = self.call(thread, line);
        assert!(
            r.ok && r.value == want,
            "{} {thread} {line}: {r:?}, want {want}",
            self.who
        );
        r
    }

    /// A short wait that must not get through (a try, a latch wait): `want` (`false`, `null`),
    /// or on the Java side Redisson's `TIMEOUT` when its waiter could not even subscribe within
    /// the wait (on a busy machine; Redisson throws rather than answering).
    fn refused(&mut self, thread: &str, line: &str, want: &str) {
        let r = self.call(thread, line);
        let timed_out = self.java && !r.ok && r.value.starts_with("TIMEOUT:");
        assert!(
            (r.ok && r.value == want) || timed_out,
            "{} {thread} {line}: {r:?}, want {want}",
            self.who
        );
    }

    /// The owner field `<client id>:<thread id>` of `thread`.
    fn field(&mut self, thread: &str) -> String {
        self.call(thread, "lockname").value
    }
}

impl<'a> Pair<'a> {
    fn new(java: &Java, url: &str, extra: &[&str], wire: Wire<'a>, prefix: &str) -> Pair<'a> {
        let mut flags = vec!["--watchdog-ms", "10000"];
        flags.extend_from_slice(extra);
        let started = Instant::now();
        let java = start_java(java, url, &flags);
        eprintln!(
            "Java driver ready in {:?}: {}",
            started.elapsed(),
            java.ready
        );
        let version = java
            .ready
            .split_whitespace()
            .find_map(|w| w.strip_prefix("version="))
            .and_then(|v| {
                let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
                Some((parts.next()??, parts.next()??))
            })
            .unwrap_or_else(|| panic!("no version in {}", java.ready));
        let rust = Peer::start(LOCK_PEER, url, &flags);
        Pair {
            java,
            rust,
            wire,
            version,
            prefix: prefix.to_owned(),
        }
    }

    fn has_non_reentrant(&self) -> bool {
        self.version >= (4, 4)
    }

    /// (first, second) sides of `d`, and the wire.
    fn sides(&mut self, d: Dir) -> (Side<'_>, Side<'_>, &Wire<'a>) {
        let java = Side {
            peer: &mut self.java,
            who: "java",
            java: true,
        };
        let rust = Side {
            peer: &mut self.rust,
            who: "crate",
            java: false,
        };
        match d {
            Dir::JavaFirst => (java, rust, &self.wire),
            Dir::CrateFirst => (rust, java, &self.wire),
        }
    }

    fn name(&self, what: &str, d: Dir) -> String {
        let tag = match d {
            Dir::JavaFirst => "j",
            Dir::CrateFirst => "c",
        };
        format!("{}{what}-{tag}", self.prefix)
    }
}

// ---- Scenarios ---------------------------------------------------------------------------

/// An exclusive lock kind (`""` reentrant, `f` fair, `fenced`, `spin`, `nr`, `nrf`): the first
/// side holds it (and re-enters it, or is refused as the non-reentrant kinds refuse), the other
/// side's try fails and its waiter gets in within [`WAKE_MS`] of the release, with the hash,
/// TTL, fair queue and token as Redisson's protocol leaves them after each step.
fn exclusive(p: &mut Pair, kind: &str, d: Dir) {
    let name = p.name(&format!("x{kind}"), d);
    let nr_java = p.has_non_reentrant();
    let (mut h, mut w, wire) = p.sides(d);
    // Redisson 3.x has no non-reentrant lock: its side uses the reentrant lock of the name.
    let kind_of = |s: &Side| -> &str {
        match kind {
            "nr" if s.java && !nr_java => "",
            "nrf" if s.java && !nr_java => "f",
            k => k,
        }
    };
    let (hk, wk) = (kind_of(&h).to_owned(), kind_of(&w).to_owned());
    let label = format!("{name}: {} {hk}lock, {} {wk}lock", h.who, w.who);
    let fair = matches!(kind, "f" | "nrf");
    let fenced = kind == "fenced";
    let (queue, timeouts, token_key) = (
        format!("redisson_lock_queue:{{{name}}}"),
        format!("redisson_lock_timeout:{{{name}}}"),
        format!("redisson_lock_token:{{{name}}}"),
    );
    let fh = h.field("t1");
    let fw = w.field("t1");
    let held_by = |field: &str, count: &str, what: &str| {
        let hash = wire.hash(&name);
        let want: BTreeMap<String, String> = [(field.to_owned(), count.to_owned())].into();
        assert_eq!(hash, want, "{label}: the hash {what}");
        let ttl = wire.pttl(&name);
        assert!(0 < ttl && ttl <= WD, "{label}: PTTL {ttl} {what}");
    };

    // Held by the first side.
    let got = h.call("t1", &format!("{hk}lock {name}"));
    assert!(got.ok, "{label}: {got:?}");
    let mut token = 0u64;
    if fenced {
        token = got.value.parse().expect("a token");
        assert_eq!(wire.get(&token_key), Some(token.to_string()), "{label}");
    }
    held_by(&fh, "1", "after the first lock");
    // Excluded: the other side's try fails and changes nothing (a fair try is not queued).
    let refused = if fenced { "null" } else { "false" };
    w.ok("t1", &format!("{wk}trylock {name}"), refused);
    w.refused("t2", &format!("{wk}trylock {name} 50"), refused);
    held_by(&fh, "1", "after the other side's tries");
    if fair {
        assert!(
            !wire.exists(&queue) && !wire.exists(&timeouts),
            "{label}: a failed try left a queue"
        );
    }
    // Re-entry, or the non-reentrant refusal.
    if matches!(hk.as_str(), "nr" | "nrf") {
        let r = h.call("t1", &format!("{hk}lock {name}"));
        assert!(
            !r.ok && r.value.starts_with("REENTRY:"),
            "{label}: re-entry {r:?}"
        );
        held_by(&fh, "1", "after a refused re-entry");
    } else {
        let again = h.call("t1", &format!("{hk}lock {name}"));
        assert!(again.ok, "{label}: re-entry {again:?}");
        if fenced {
            let t: u64 = again.value.parse().unwrap();
            assert!(t > token, "{label}: token {t} after {token}");
            token = t;
        }
        held_by(&fh, "2", "after a re-entry");
        h.ok("t1", &format!("{hk}holdcount {name}"), "2");
        h.ok("t1", &format!("{hk}unlock {name}"), "unlocked");
        held_by(&fh, "1", "after a partial unlock");
    }
    w.ok("t1", &format!("{wk}islocked {name}"), "true");
    w.ok("t1", &format!("{wk}held {name}"), "false");

    // The other side waits.
    let channel = if fair {
        format!("redisson_lock__channel:{{{name}}}:{fw}")
    } else {
        format!("redisson_lock__channel:{{{name}}}")
    };
    let stale = if kind == "spin" {
        0
    } else {
        wire.quiet(&channel)
    };
    let sent = now_ms() as i64;
    w.peer.send(&format!("t1 {wk}lock {name}"));
    if fair {
        wait_for(&format!("{label}: the waiter queued"), || {
            wire.list(&queue) == [fw.clone()]
        });
        // The waiter's clock at its attempt + the lock's PTTL (at most WD) + the fair wait.
        let score: i64 = wire
            .zscore(&timeouts, fw.as_bytes())
            .expect("a queued waiter's deadline")
            .parse()
            .unwrap();
        let now = now_ms() as i64;
        assert!(
            sent + FAIR_WAIT < score && score <= now + FAIR_WAIT + WD,
            "{label}: the waiter's deadline {score}, sent at {sent}, queued by {now}"
        );
    }
    if kind == "spin" {
        // A spin waiter only polls: nothing to see on the wire. Let it poll a few times.
        std::thread::sleep(Duration::from_millis(150));
    } else {
        wire.listening(&channel, stale);
    }
    assert!(
        !w.peer.has_replied("t1", &format!("{wk}lock")),
        "{label}: the waiter got in while the lock was held"
    );
    held_by(&fh, "1", "while the other side waits");

    // Released: the waiter gets in.
    let before = now_ms();
    let unlocked = h.ok("t1", &format!("{hk}unlock {name}"), "unlocked");
    let woke = w.peer.reply("t1", &format!("{wk}lock"), T);
    assert!(woke.ok, "{label}: {woke:?}");
    assert!(
        woke.at >= before,
        "{label}: the waiter got in at {} before the release began at {before}",
        woke.at
    );
    let latency = after(&woke, &unlocked);
    eprintln!("{label}: woke {latency} ms after the release");
    assert!(
        latency < WAKE_MS,
        "{label}: woke {latency} ms after the release"
    );
    held_by(&fw, "1", "once the waiter got in");
    if fenced {
        let t: u64 = woke.value.parse().expect("a token");
        assert!(t > token, "{label}: token {t} after {token}");
        assert_eq!(wire.get(&token_key), Some(t.to_string()), "{label}");
    }
    if fair {
        assert!(
            !wire.exists(&queue) && !wire.exists(&timeouts),
            "{label}: the queue outlived its last waiter"
        );
    }
    h.ok("t1", &format!("{hk}held {name}"), "false");
    w.ok("t1", &format!("{wk}unlock {name}"), "unlocked");
    assert!(
        !wire.exists(&name),
        "{label}: the hash after the last unlock"
    );
}

/// The read-write lock: readers of both sides share it, a writer of the first side waits for
/// both readers (the first side's own release must see the other side's reader alive through
/// its timeout key) and is woken by the other side's last read release; then a reader of the
/// other side waits for that writer and is woken by its write release (message `1`).
fn read_write(p: &mut Pair, d: Dir) {
    let name = p.name("rw", d);
    let (mut a, mut b, wire) = p.sides(d);
    let label = format!("{name}: {} first", a.who);
    let (fa1, fa2, fb1) = (a.field("t1"), a.field("t2"), b.field("t1"));
    let timeout = |field: &str| format!("{{{name}}}:{field}:rwlock_timeout:1");
    let channel = format!("redisson_rwlock:{{{name}}}");
    let hash_is = |pairs: &[(&str, &str)], what: &str| {
        let want: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(wire.hash(&name), want, "{label}: the hash {what}");
        let ttl = wire.pttl(&name);
        assert!(0 < ttl && ttl <= WD, "{label}: PTTL {ttl} {what}");
    };
    let reader_alive = |field: &str| {
        let ttl = wire.pttl(&timeout(field));
        assert!(
            0 < ttl && ttl <= WD,
            "{label}: {} PTTL {ttl}",
            timeout(field)
        );
    };

    // Readers of both sides at once.
    a.ok("t1", &format!("rlock {name}"), "locked");
    hash_is(&[("mode", "read"), (&fa1, "1")], "with one reader");
    reader_alive(&fa1);
    b.ok("t1", &format!("rlock {name}"), "locked");
    hash_is(
        &[("mode", "read"), (&fa1, "1"), (&fb1, "1")],
        "with a reader of each side",
    );
    reader_alive(&fb1);
    b.ok("t2", &format!("wtrylock {name}"), "false");
    a.refused("t2", &format!("wtrylock {name} 50"), "false");

    // A writer of the first side waits for both readers.
    let stale = wire.quiet(&channel);
    a.peer.send(&format!("t2 wlock {name}"));
    wire.listening(&channel, stale);
    a.ok("t1", &format!("runlock {name}"), "unlocked");
    hash_is(
        &[("mode", "read"), (&fb1, "1")],
        "after the first side's reader left (the other side's reader is alive)",
    );
    assert!(
        !wire.exists(&timeout(&fa1)),
        "{label}: a released hold's key"
    );
    assert!(
        !a.peer.has_replied("t2", "wlock"),
        "{label}: the writer got in beside a reader"
    );
    let before = now_ms();
    let released = b.ok("t1", &format!("runlock {name}"), "unlocked");
    let woke = a.peer.reply("t2", "wlock", T);
    assert!(woke.ok && woke.at >= before, "{label}: {woke:?}");
    let latency = after(&woke, &released);
    eprintln!("{label}: writer woke {latency} ms after the last read release");
    assert!(latency < WAKE_MS, "{label}: writer woke after {latency} ms");
    let wfield = format!("{fa2}:write");
    hash_is(&[("mode", "write"), (&wfield, "1")], "held for writing");
    assert!(
        !wire.exists(&timeout(&fb1)),
        "{label}: a released hold's key"
    );

    // A reader of the other side waits for the writer.
    b.ok("t1", &format!("rtrylock {name}"), "false");
    let stale = wire.quiet(&channel);
    b.peer.send(&format!("t1 rlock {name}"));
    wire.listening(&channel, stale);
    if b.java {
        // Redisson's own race: a write release's message (`1`) wakes only the threads already
        // blocked on the client's latch, so a release published between a Java reader's attempt
        // after subscribing and its wait is lost to it until the TTL. A crate writer's release
        // sent as soon as the reader subscribed lands there now and then (3 in 150 on a loaded
        // machine; MONITOR: the reader's attempt, the release and its `1` within the same ms,
        // the reader's next attempt 10 s later); Java's own writer, slower to release, did not
        // in 25. No event shows the thread blocked: give it time to get there.
        std::thread::sleep(Duration::from_millis(300));
    }
    assert!(
        !b.peer.has_replied("t1", "rlock"),
        "{label}: a reader got in beside the writer"
    );
    let before = now_ms();
    let released = a.ok("t2", &format!("wunlock {name}"), "unlocked");
    let woke = b.peer.reply("t1", "rlock", T);
    assert!(woke.ok && woke.at >= before, "{label}: {woke:?}");
    let latency = after(&woke, &released);
    eprintln!("{label}: reader woke {latency} ms after the write release");
    assert!(latency < WAKE_MS, "{label}: reader woke after {latency} ms");
    hash_is(&[("mode", "read"), (&fb1, "1")], "read by the woken reader");
    reader_alive(&fb1);
    b.ok("t1", &format!("runlock {name}"), "unlocked");
    assert!(
        !wire.exists(&name),
        "{label}: the hash after the last unlock"
    );
    assert!(
        !wire.exists(&timeout(&fb1)),
        "{label}: a released hold's key"
    );
}

/// HighwayHash field names of the group values `a`, `b`, `c` (sync protocol §6.1 test vectors).
const H_A: &str = "qwvAS12pR0CgRitaypEjUw";
const H_B: &str = "Q5CdP+xmkHdTGWYr64Lw6A";
const H_C: &str = "b/ERpQOx2r8GXiGBU6d0Hg";

/// The group multi-lock: the first side holds `a,b`; the other side cannot take `b,c` but holds
/// `c` at once; its waiter for `b,a` is woken by the first side's release.
fn group(p: &mut Pair, d: Dir) {
    let name = p.name("g", d);
    let (mut a, mut b, wire) = p.sides(d);
    let label = format!("{name}: {} first", a.who);
    let (fa, fb1, fb2) = (a.field("t1"), b.field("t1"), b.field("t2"));
    let before = now_ms() as i64;
    a.ok("t1", &format!("glock {name} a,b"), "locked");
    let after_lock = now_ms() as i64;
    let hash = wire.hash(&name);
    assert_eq!(hash.len(), 6, "{label}: {hash:?}");
    for h in [H_A, H_B] {
        assert_eq!(hash.get(h), Some(&fa), "{label}: owner of {h}");
        assert_eq!(
            hash.get(&format!("{h}:{fa}:lock_count"))
                .map(String::as_str),
            Some("1"),
            "{label}"
        );
        let expire: i64 = hash[&format!("{h}:{fa}:expire_time")].parse().unwrap();
        assert!(
            before + WD <= expire && expire <= after_lock + WD,
            "{label}: expire_time {expire} for a lock taken in [{before}, {after_lock}]"
        );
    }
    let ttl = wire.pttl(&name);
    assert!(0 < ttl && ttl <= WD, "{label}: PTTL {ttl}");

    b.ok("t1", &format!("gtrylock {name} b,c"), "false");
    assert_eq!(wire.hash(&name).len(), 6, "{label}: a refused try wrote");
    b.ok("t2", &format!("gtrylock {name} c"), "true");
    assert_eq!(wire.hget(&name, H_C), Some(fb2.clone()), "{label}");

    let channel = format!("redisson_lock__channel:{{{name}}}");
    let stale = wire.quiet(&channel);
    b.peer.send(&format!("t1 glock {name} b,a"));
    wire.listening(&channel, stale);
    assert!(!b.peer.has_replied("t1", "glock"), "{label}: got in early");
    let before = now_ms();
    let released = a.ok("t1", &format!("gunlock {name} a,b"), "unlocked");
    let woke = b.peer.reply("t1", "glock", T);
    assert!(woke.ok && woke.at >= before, "{label}: {woke:?}");
    let latency = after(&woke, &released);
    eprintln!("{label}: woke {latency} ms after the release");
    assert!(latency < WAKE_MS, "{label}: woke after {latency} ms");
    let hash = wire.hash(&name);
    assert_eq!(hash.get(H_A), Some(&fb1), "{label}");
    assert_eq!(hash.get(H_B), Some(&fb1), "{label}");
    assert_eq!(hash.get(H_C), Some(&fb2), "{label}");
    assert_eq!(
        hash.len(),
        9,
        "{label}: the first side's fields are gone: {hash:?}"
    );
    b.ok("t1", &format!("gunlock {name} b,a"), "unlocked");
    b.ok("t2", &format!("gunlock {name} c"), "unlocked");
    assert!(
        !wire.exists(&name),
        "{label}: the group after the last unlock"
    );
}

/// The semaphore: permits are anonymous, so the first side's release of a permit the other side
/// took wakes the other side's waiter.
fn semaphore(p: &mut Pair, d: Dir) {
    let name = p.name("s", d);
    let (mut x, mut y, wire) = p.sides(d);
    let label = format!("{name}: {} first", x.who);
    let count = |what: &str, want: &str| {
        assert_eq!(wire.get(&name).as_deref(), Some(want), "{label}: {what}");
        assert_eq!(wire.pttl(&name), -1, "{label}: {what}: no TTL");
    };
    x.ok("t1", &format!("semsetpermits {name} 1"), "true");
    count("set", "1");
    y.ok("t1", &format!("semsetpermits {name} 5"), "false");
    y.ok("t1", &format!("semtryacquire {name} 2"), "false");
    count("after a refused try", "1");
    y.ok("t1", &format!("semacquire {name}"), "acquired");
    count("after an acquisition", "0");
    let channel = format!("redisson_sc:{{{name}}}");
    let stale = wire.quiet(&channel);
    y.peer.send(&format!("t2 semacquire {name}"));
    wire.listening(&channel, stale);
    assert!(
        !y.peer.has_replied("t2", "semacquire"),
        "{label}: no permit"
    );
    let before = now_ms();
    let released = x.ok("t1", &format!("semrelease {name}"), "released");
    let woke = y.peer.reply("t2", "semacquire", T);
    assert!(woke.ok && woke.at >= before, "{label}: {woke:?}");
    let latency = after(&woke, &released);
    eprintln!("{label}: woke {latency} ms after the release");
    assert!(latency < WAKE_MS, "{label}: woke after {latency} ms");
    count("after the woken acquisition", "0");
    y.ok("t2", &format!("semrelease {name} 2"), "released");
    count("after a release of 2", "2");
    x.ok("t1", &format!("semavailable {name}"), "2");
}

/// The permit-expirable semaphore: a permit id of one side is released by the other; the first
/// side's release wakes the other side's waiter (whose permit has a lease).
fn permits(p: &mut Pair, d: Dir) {
    let name = p.name("ps", d);
    let (mut x, mut y, wire) = p.sides(d);
    let label = format!("{name}: {} first", x.who);
    let timeouts = format!("{{{name}}}:timeout");
    x.ok("t1", &format!("psemsetpermits {name} 1"), "true");
    assert_eq!(wire.get(&name).as_deref(), Some("1"), "{label}");
    let id1 = x.call("t1", &format!("psemacquire {name}")).value;
    assert_eq!(wire.get(&name).as_deref(), Some("0"), "{label}");
    assert_eq!(
        wire.zscore(&timeouts, &permit_bytes(&id1)).as_deref(),
        Some(NO_EXPIRY),
        "{label}: a permit without a lease"
    );
    y.ok("t1", &format!("psemtryacquire {name}"), "null");
    let channel = format!("redisson_sc:{{{name}}}");
    let stale = wire.quiet(&channel);
    let sent = now_ms();
    y.peer.send(&format!("t1 psemtryacquire {name} 20000 5000"));
    wire.listening(&channel, stale);
    assert!(!y.peer.has_replied("t1", "psemtryacquire"), "{label}");
    let before = now_ms();
    let released = x.ok("t1", &format!("psemrelease {name} {id1}"), "released");
    let woke = y.peer.reply("t1", "psemtryacquire", T);
    assert!(woke.ok && woke.at >= before, "{label}: {woke:?}");
    let latency = after(&woke, &released);
    eprintln!("{label}: woke {latency} ms after the release");
    assert!(latency < WAKE_MS, "{label}: woke after {latency} ms");
    let id2 = woke.value;
    assert_ne!(id2, id1, "{label}");
    let score: i64 = wire
        .zscore(&timeouts, &permit_bytes(&id2))
        .expect("the woken waiter's permit")
        .parse()
        .unwrap();
    // The waiter's clock at its successful attempt + the lease: that attempt may have begun
    // before the release did (sent before it, run by Redis after it).
    let (lo, hi) = (sent as i64 + 5000, woke.at as i64 + 5000);
    assert!(
        lo <= score && score <= hi,
        "{label}: leased permit's deadline {score}, want [{lo}, {hi}]"
    );
    assert_eq!(wire.zscore(&timeouts, &permit_bytes(&id1)), None, "{label}");
    assert_eq!(wire.get(&name).as_deref(), Some("0"), "{label}");
    let again = x.call("t1", &format!("psemrelease {name} {id1}"));
    assert!(
        !again.ok && again.value.starts_with("NOT_HELD"),
        "{label}: {again:?}"
    );
    x.ok("t1", &format!("psemtryrelease {name} {id2}"), "true");
    assert_eq!(wire.get(&name).as_deref(), Some("1"), "{label}");
    assert!(
        !wire.exists(&timeouts),
        "{label}: the permits' set when empty"
    );
    y.ok("t1", &format!("psemavailable {name}"), "1");
}

/// The count-down latch: the other side's waiters (with and without a deadline) stay closed at
/// count 1 and open within [`WAKE_MS`] of the first side's count-down to 0.
fn latch(p: &mut Pair, d: Dir) {
    let name = p.name("l", d);
    let (mut x, mut y, wire) = p.sides(d);
    let label = format!("{name}: {} first", x.who);
    x.ok("t1", &format!("cdlsetcount {name} 2"), "true");
    assert_eq!(wire.get(&name).as_deref(), Some("2"), "{label}");
    assert_eq!(wire.pttl(&name), -1, "{label}: no TTL");
    y.ok("t1", &format!("cdlsetcount {name} 5"), "false");
    let channel = format!("redisson_countdownlatch__channel__{{{name}}}");
    let stale = wire.quiet(&channel);
    y.peer.send(&format!("t1 cdlawait {name}"));
    y.peer.send(&format!("t2 cdlawait {name} 20000"));
    wire.listening(&channel, stale);
    x.ok("t1", &format!("cdlcountdown {name}"), "ok");
    assert_eq!(wire.get(&name).as_deref(), Some("1"), "{label}");
    y.refused("t3", &format!("cdlawait {name} 50"), "false");
    assert!(
        !y.peer.has_replied("t1", "cdlawait"),
        "{label}: opened early"
    );
    let before = now_ms();
    let opened = x.ok("t1", &format!("cdlcountdown {name}"), "ok");
    for thread in ["t1", "t2"] {
        let woke = y.peer.reply(thread, "cdlawait", T);
        assert!(
            woke.ok && woke.value == "true" && woke.at >= before,
            "{label}: {woke:?}"
        );
        let latency = after(&woke, &opened);
        eprintln!("{label}: {thread} woke {latency} ms after the count-down");
        assert!(
            latency < WAKE_MS,
            "{label}: {thread} woke after {latency} ms"
        );
    }
    assert!(!wire.exists(&name), "{label}: an open latch's key");
    y.ok("t1", &format!("cdlcount {name}"), "0");
}

/// Every scenario in both directions.
fn full_pass(p: &mut Pair) {
    let started = Instant::now();
    for d in BOTH {
        for kind in ["", "f", "fenced", "spin", "nr", "nrf"] {
            exclusive(p, kind, d);
        }
        read_write(p, d);
        group(p, d);
        semaphore(p, d);
        permits(p, d);
        latch(p, d);
    }
    unsupported_where_redisson_lacks_it(p);
    eprintln!("full pass in {:?}", started.elapsed());
}

/// Redisson before 4.4 has no non-reentrant lock: the driver says so.
fn unsupported_where_redisson_lacks_it(p: &mut Pair) {
    if p.has_non_reentrant() {
        return;
    }
    for command in ["nrlock x", "nrftrylock x 10"] {
        let r = p.java.call("t1", command, T);
        assert!(
            !r.ok && r.value.starts_with("UNSUPPORTED:"),
            "{command}: {r:?}"
        );
    }
}

// ---- Tests -------------------------------------------------------------------------------

/// The error kinds of the protocol: both peers answer the same word.
fn same_error_kinds(p: &mut Pair, port: u16) {
    RedisCluster::cmd(port, &["SET", "a-string", "x"]);
    for (command, kind) in [
        ("unlock nothing", "NOT_HELD:"),
        ("lock k 99999999999999999999", "INVALID:"),
        ("frobnicate k", "UNSUPPORTED:"),
        ("token k", "INVALID:"),
        ("lock a-string", "WRONG_TYPE:"),
        ("semsetpermits s", "INVALID:"),
        ("psemrelease p xyz", "INVALID:"),
    ] {
        for (who, peer) in [("java", &mut p.java), ("crate", &mut p.rust)] {
            let r = peer.call("t9", command, T);
            assert!(
                !r.ok && r.value.starts_with(kind),
                "{who} {command}: {r:?}, want {kind}"
            );
        }
    }
}

/// The Java driver's `bench` runs every mode and prints the crate's line.
fn bench_runs_every_mode(p: &mut Pair) {
    for mode in ["uncontended 2 200", "contended 2 200", "leased 2 200"] {
        let line = p.java.global(&format!("bench {mode}"), T);
        assert!(line.starts_with("- bench OK ops="), "{mode}: {line}");
        let ops: u64 = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("ops="))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        assert!(ops > 0, "{mode}: {line}");
        for key in ["ops_per_s=", "p50_us=", "p99_us=", "max_us="] {
            assert!(line.contains(key), "{mode}: {line}");
        }
    }
    let bad = p.java.global("bench sideways 1 1", T);
    assert!(bad.starts_with("- bench ERR INVALID"), "{bad}");
}

/// A partial unlock of leased holds leaves the TTL Redisson leaves (issue 49): lease 4 s
/// twice, one unlock 1.5 s later, the key's TTL is about 4 s again on both sides.
fn a_partial_unlock_re_arms_the_lease_as_redisson_does(p: &mut Pair) {
    let names = [
        p.name("rearm", Dir::JavaFirst),
        p.name("rearm", Dir::CrateFirst),
    ];
    for (peer, name) in [(&mut p.java, &names[0]), (&mut p.rust, &names[1])] {
        for _ in 0..2 {
            let r = peer.call("t1", &format!("lock {name} 4000"), T);
            assert!(r.ok, "{r:?}");
        }
    }
    std::thread::sleep(Duration::from_millis(1500));
    let mut ttls = Vec::new();
    for (who, peer, name) in [
        ("java", &mut p.java, &names[0]),
        ("crate", &mut p.rust, &names[1]),
    ] {
        let r = peer.call("t1", &format!("unlock {name}"), T);
        assert!(r.ok, "{who}: {r:?}");
        let ttl: i64 = peer
            .call("t1", &format!("ttl {name}"), T)
            .value
            .parse()
            .unwrap();
        eprintln!("{who}: pttl {ttl} ms after the partial unlock");
        assert!(ttl > 3_500, "{who}: pttl {ttl} after the partial unlock");
        ttls.push(ttl);
        let r = peer.call("t1", &format!("unlock {name}"), T);
        assert!(r.ok, "{who}: {r:?}");
    }
    assert!(
        (ttls[0] - ttls[1]).abs() < 500,
        "the crate leaves what Redisson leaves: {ttls:?}"
    );
}

/// `quit` releases nothing: a leased lock of the Java side stays held after it.
fn quit_releases_nothing(p: &mut Pair) {
    p.java.call("t1", "lock kept 60000", T);
    assert_eq!(p.java.global("quit", T), "- quit OK");
    let status = p.java.child.wait().expect("the driver exits");
    assert!(status.success(), "{status:?}");
    assert_eq!(p.rust.call("t1", "islocked kept", T).value, "true");
}

fn standalone(var: &str, test: &str) {
    let Some(java) = redisson(var, test) else {
        return;
    };
    let s = RedisServer::start();
    let mut p = Pair::new(java, &s.url(), &[], Wire::One(s.port()), "");
    full_pass(&mut p);
    a_partial_unlock_re_arms_the_lease_as_redisson_does(&mut p);
    same_error_kinds(&mut p, s.port());
    bench_runs_every_mode(&mut p);
    quit_releases_nothing(&mut p);
}

fn on_a_cluster(var: &str, test: &str, prefix: &str) {
    let Some(java) = redisson(var, test) else {
        return;
    };
    let c = RedisCluster::shared();
    let seeds = c.seed_urls().join(",");
    let mut p = Pair::new(java, &seeds, &["--cluster"], Wire::Cluster(c), prefix);
    full_pass(&mut p);
}

#[test]
fn java_redisson_and_the_crate_share_every_kind_on_standalone() {
    standalone(
        CLASSPATH,
        "java_redisson_and_the_crate_share_every_kind_on_standalone",
    );
}

#[test]
fn java_redisson_and_the_crate_share_every_kind_on_a_cluster() {
    on_a_cluster(
        CLASSPATH,
        "java_redisson_and_the_crate_share_every_kind_on_a_cluster",
        "a-",
    );
}

/// Through Sentinel (a master, two replicas, three sentinels): both sides find the master and
/// share a lock in both directions.
#[test]
fn java_redisson_and_the_crate_share_a_lock_through_sentinel() {
    let Some(java) = redisson(
        CLASSPATH,
        "java_redisson_and_the_crate_share_a_lock_through_sentinel",
    ) else {
        return;
    };
    let set = sentinel::SentinelSet::start();
    let sentinels = set.sentinel_urls().join(",");
    let mut p = Pair::new(
        java,
        &sentinels,
        &["--sentinel", sentinel::MASTER_NAME],
        Wire::One(set.master_port()),
        "",
    );
    for d in BOTH {
        exclusive(&mut p, "", d);
    }
}

#[test]
fn a_second_redisson_version_shares_every_kind_on_standalone() {
    standalone(
        CLASSPATH_ALT,
        "a_second_redisson_version_shares_every_kind_on_standalone",
    );
}

#[test]
fn a_second_redisson_version_shares_every_kind_on_a_cluster() {
    on_a_cluster(
        CLASSPATH_ALT,
        "a_second_redisson_version_shares_every_kind_on_a_cluster",
        "b-",
    );
}

// ---- Fairness beside real Java -----------------------------------------------------------

/// A number from the environment variable `var` (a measurement's knob), else `default`.
fn knob(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The tests that measure who gets a hot lock how often (shares, waits, rates) run one at a
/// time in this binary: beside one another, one's JVMs starting and warming up (their JIT
/// threads) slowed the other's JVM so much that its waits, not the policy, decided the
/// figures (the short-holds measurement gave 38 % once beside the fleet test's five JVMs
/// starting, 57-68 % alone and beside two busy loops; beside other targets' JVMs even alone in
/// this binary it gave 32 %, so it is run by hand). Poisoning is ignored: a failed test leaves
/// nothing to guard.
fn measuring_alone() -> std::sync::MutexGuard<'static, ()> {
    static MEASURING: Mutex<()> = Mutex::new(());
    MEASURING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The `lock-peer` of the fairness test: `FAIR_PEER` (any build, e.g. the release one), else the
/// test build's. Fairness beside Java is a race between the crate's reaction to a release and
/// Java's, so it needs a peer whose I/O path runs at speed: the workspace's `Cargo.toml`
/// optimizes fred, redis-protocol, tokio and bytes in the dev profile for that (with them
/// unoptimized, the test build reacted so much later that even the old policy looked fair:
/// Java 31-47 %). With those four optimized and the crate itself not, the policy of before
/// issue 30 fails this test in every run tried (8 runs: the smaller side's share 0.23-0.30 on
/// one side at least, `ABBB` cycles, as beside the release build), and today's passes (0.46-0.49).
fn fairness_peer() -> PathBuf {
    std::env::var("FAIR_PEER")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(LOCK_PEER))
}

/// Three Java threads and three crate owners on one hot lock (50 ms holds, 32 rounds each),
/// both start orders, with two Java processes (3 + 3) as the reference: while both sides wait,
/// Java gets at least 35 % of the holds (issue 30's bound for the smaller side in every run;
/// the crate's owners are the ones that can starve a JVM's threads) and the crate at least 25 %
/// (under a loaded CPU the crate is the smaller side, 0.35-0.45 measured: a stand-back waits
/// for Java to act, and a loaded JVM acts late), and
/// Java's longest wait for one acquisition is at most twice its longest wait beside Java, or
/// half the holds of a run (96), whichever is more. That wait counts every hold taken while
/// the Java thread waited, its own siblings' too: a Java thread that loses race after race
/// against the other threads of its JVM (Redisson's lock is not fair among them) waits long
/// however evenly the two sides share. Over 16 rounds that happened once in about twenty runs
/// with the crate alternating with Java hold by hold (`ABAB`): 50 holds waited against a bound
/// of 48 (half of 96), Java's worst beside Java being 15 in that run. Over 32 rounds the bound
/// is 96. The bench's fairness section measures that wait over 40 rounds against the 1.25x
/// goal. The policy of before issue 30 fails on the shares (see [`fairness_peer`]).
#[test]
fn java_gets_a_fair_share_of_a_hot_lock_beside_the_crate() {
    let Some(java) = redisson(
        CLASSPATH,
        "java_gets_a_fair_share_of_a_hot_lock_beside_the_crate",
    ) else {
        return;
    };
    let _alone = measuring_alone();
    // For measurements: FAIR_ROUNDS and FAIR_HOLD_MS change the 32 rounds of 50 ms.
    let (owners, rounds, hold_ms) = (
        3,
        knob("FAIR_ROUNDS", 32) as usize,
        knob("FAIR_HOLD_MS", 50),
    );
    let s = RedisServer::start();
    let flags = ["--watchdog-ms", "10000"];
    let mut j1 = start_java(java, &s.url(), &flags);
    let mut j2 = start_java(java, &s.url(), &flags);
    let mut rust = {
        let mut command = Command::new(fairness_peer());
        command.args(flags).arg(s.url());
        Peer::spawn(command)
    };
    let reference = hot_lock(&mut j1, &mut j2, "hot-jj", owners, rounds, hold_ms);
    eprintln!("Java (A) beside Java (B): {reference}");
    let java_alone_worst = reference.longest_wait[0].max(reference.longest_wait[1]);
    let java_first = hot_lock(&mut j1, &mut rust, "hot-jc", owners, rounds, hold_ms);
    eprintln!("Java (A) beside the crate (B), Java's commands first: {java_first}");
    let crate_first = hot_lock(&mut rust, &mut j1, "hot-cj", owners, rounds, hold_ms);
    eprintln!("the crate (A) beside Java (B), the crate's commands first: {crate_first}");
    // At least half of a run's holds (2 x owners x rounds): two Redisson processes are far
    // from even themselves, and one long wait of a Java thread behind its own siblings is
    // Redisson's.
    let bound = (java_alone_worst * 2).max(owners * rounds);
    for run in [&reference, &java_first, &crate_first] {
        assert!(run.overlaps.is_empty(), "holds overlapped: {run:?}");
    }
    for (run, java_side) in [(&java_first, 0), (&crate_first, 1)] {
        let [a, b] = run.while_both;
        let java_share = run.while_both[java_side] as f64 / (a + b).max(1) as f64;
        assert!(
            java_share >= 0.35,
            "Java's share while both waited {java_share:.2} < 0.35: {run}"
        );
        assert!(
            java_share <= 0.75,
            "the crate's share while both waited {:.2} < 0.25: {run}",
            1.0 - java_share
        );
        assert!(
            run.longest_wait[java_side] <= bound,
            "Java waited {} holds once, beside Java at most {java_alone_worst} (bound {bound}): \
             {run}",
            run.longest_wait[java_side]
        );
    }
}

/// A fleet's processes, crate (`c`) and Java (`j`), by index into the test's processes.
struct Shape {
    crates: usize,
    javas: usize,
    hold_ms: u64,
}

/// Fleets of several crate and Java processes on one hot lock (3 owners each, 10 rounds, 20
/// with two JVMs, 50 ms holds; 2 crate + 1 Java with 100 ms holds too): 2 crate + 1 Java, 3 + 1, 2 + 2, 1 + 2, and
/// 3 crate processes alone. While all wait (P processes): the Java processes together get at
/// least half their fair share (0.5 × Java processes / P), every Java process at least a
/// quarter of its own (0.25 / P), every crate process at least 0.4 / P. The goal for
/// the bench's 40 rounds is 0.6 / P for each; over 10 rounds two JVMs of one fleet split their
/// side unevenly (0.12 and 0.42 of the holds beside two crate processes, both JVMs alike):
/// Redisson's releasing thread keeps the lock from the other JVM, whoever else is there. So
/// the shapes with two JVMs run twice the rounds: over 10, one CI run (with other load beside
/// it) saw the second JVM get 4 of 68 holds (0.059 against its 0.0625), the Java side as a
/// whole 0.50, the order showing the other JVM re-taking the lock from it.
///
/// The policy of before issue 39 fails it on the Java side: beside two or three crate
/// processes a JVM got one hold in a hundred (0.006-0.011 over 30-45 s runs in the issue; here
/// 0.00-0.03, and 0.07 for the second JVM beside one crate process), each crate process
/// reacting to an unlock message faster than a JVM's waiting thread and ending its contest as
/// soon as the other crate process had the lock. Today's passed 19 of 19 runs (5 beside two
/// busy loops), each bound met with at least 1.88x its floor in the worst run: docs/java.md.
///
/// In every fleet no two holds overlap (a hold held the lock at least from its `lock` reply
/// to the end of its work: `fairness`'s module doc). And a Java process's waits are no worse
/// than beside its own kind (docs/performance.md): while it waits (between two of its holds,
/// or before its first), the crate processes hold the lock for at most one turn each and the
/// one under way, each no longer than a JVM's longest turn (beside the other JVM alone, run
/// first as the reference, or in this fleet), `(crate processes + 1) × that turn` holds. An
/// unbounded local hand-off (`FLEET_HAND_OFF=unbounded`, by hand) breaks it for 6 of the 7
/// Java processes of the fleets, and the shares for all of them (docs/testing.md).
/// `FLEET_ROUNDS` changes the 10 rounds (for measurements). The Java processes run real
/// Redisson (`REDISSON_CLASSPATH`); the crate's are the test build's `lock-peer` (see
/// [`fairness_peer`]).
#[test]
fn every_process_of_a_fleet_gets_its_turn_beside_java() {
    let Some(java) = redisson(
        CLASSPATH,
        "every_process_of_a_fleet_gets_its_turn_beside_java",
    ) else {
        return;
    };
    let _alone = measuring_alone();
    let (owners, rounds) = (3, knob("FLEET_ROUNDS", 10) as usize);
    let s = RedisServer::start();
    let flags = ["--watchdog-ms", "10000"];
    // For the negative controls, by hand: FLEET_HAND_OFF=unbounded, off or a budget in ms
    // gives the crate processes that policy instead of the default.
    let hand_off = std::env::var("FLEET_HAND_OFF").ok();
    let crate_peer = || {
        let mut command = Command::new(fairness_peer());
        command.args(flags);
        if let Some(policy) = &hand_off {
            command.args(["--local-hand-off", policy]);
        }
        command.arg(s.url());
        Peer::spawn(command)
    };
    let mut crates: Vec<Peer> = (0..3).map(|_| crate_peer()).collect();
    let mut javas: Vec<Peer> = (0..2).map(|_| start_java(java, &s.url(), &flags)).collect();
    // The JVMs' JIT and every connection warm, uncounted: a JVM warmer than the other
    // reacts sooner and keeps the lock from it, whoever else is there. The fleets with one
    // JVM take them in turn.
    {
        let mut all: Vec<&mut Peer> = crates.iter_mut().chain(javas.iter_mut()).collect();
        let _ = peer::fleet_on_hot_lock(&mut all, "fleet-warm", owners, 3, 20);
        let mut jvms: Vec<&mut Peer> = javas.iter_mut().collect();
        let _ = peer::fleet_on_hot_lock(&mut jvms, "fleet-warm-java", owners, 60, 2);
    }
    // Java beside its own kind, the reference of the waits: the two JVMs alone for each hold
    // length (as many holds as a fleet of three runs). A JVM's longest turn there is how long
    // Redisson keeps the lock from a waiting JVM.
    let mut java_turn = std::collections::HashMap::new();
    for (hold_ms, rounds) in [(50, 2 * rounds), (100, rounds)] {
        let mut jvms: Vec<&mut Peer> = javas.iter_mut().collect();
        let reference = peer::fleet_on_hot_lock(
            &mut jvms,
            &format!("fleet-java-{hold_ms}"),
            owners,
            rounds,
            hold_ms,
        );
        eprintln!("2 Java, {hold_ms} ms holds (the reference): {reference}");
        java_turn.insert(
            hold_ms,
            reference.longest_run.iter().copied().max().unwrap_or(0),
        );
    }
    let shapes = [
        Shape {
            crates: 2,
            javas: 1,
            hold_ms: 50,
        },
        Shape {
            crates: 3,
            javas: 1,
            hold_ms: 50,
        },
        Shape {
            crates: 2,
            javas: 2,
            hold_ms: 50,
        },
        Shape {
            crates: 1,
            javas: 2,
            hold_ms: 50,
        },
        Shape {
            crates: 3,
            javas: 0,
            hold_ms: 50,
        },
        Shape {
            crates: 2,
            javas: 1,
            hold_ms: 100,
        },
    ];
    let mut failures = Vec::new();
    for (i, shape) in shapes.iter().enumerate() {
        javas.rotate_left(1);
        let mut fleet: Vec<&mut Peer> = crates
            .iter_mut()
            .take(shape.crates)
            .chain(javas.iter_mut().take(shape.javas))
            .collect();
        let p = fleet.len();
        // Two JVMs split their side as Redisson does (see above): more holds to judge each.
        let rounds = if shape.javas > 1 { 2 * rounds } else { rounds };
        let f = peer::fleet_on_hot_lock(
            &mut fleet,
            &format!("fleet-{i}"),
            owners,
            rounds,
            shape.hold_ms,
        );
        let label = format!(
            "{} crate + {} Java, {} ms holds",
            shape.crates, shape.javas, shape.hold_ms
        );
        eprintln!("{label} (Java last): {f}");
        if !f.overlaps.is_empty() {
            failures.push(format!("{label}: holds overlapped: {:#?}; {f}", f.overlaps));
        }
        // Java's waits, no worse than beside its own kind: while a Java process waits, the
        // crate processes hold the lock for at most one turn each, and the one under way when
        // the wait began, each no longer than a JVM's turn (beside the other JVM alone, or in
        // this fleet: a crate process's turn is as long as the others' last).
        let turn = (shape.crates..p)
            .map(|side| f.longest_run[side])
            .fold(java_turn[&shape.hold_ms], usize::max);
        let most = (shape.crates + 1) * turn;
        for side in shape.crates..p {
            let by_crates = f.held_by_others_while_waiting(side, |q| q < shape.crates);
            eprintln!(
                "  Java {}: waited through {by_crates} holds of the crate processes (at most \
                 {most}: {} turns of {turn})",
                char::from(b'A' + side as u8),
                shape.crates + 1
            );
            if by_crates > most {
                failures.push(format!(
                    "{label}: process {} (Java) waited through {by_crates} holds of the crate \
                     processes, more than {} turns of {turn} (a JVM's longest): {f}",
                    char::from(b'A' + side as u8),
                    shape.crates + 1
                ));
            }
        }
        let java_side: f64 = (shape.crates..p).map(|side| f.share(side)).sum();
        let side_floor = 0.5 * shape.javas as f64 / p as f64;
        if java_side < side_floor {
            failures.push(format!(
                "{label}: the Java processes got {java_side:.3} < {side_floor:.3} of the holds: {f}"
            ));
        }
        for side in 0..p {
            let (what, floor) = if side < shape.crates {
                ("crate", 0.4 / p as f64)
            } else {
                ("Java", 0.25 / p as f64)
            };
            if f.share(side) < floor {
                failures.push(format!(
                    "{label}: process {} ({what}) got {:.3} < {floor:.3} of the holds: {f}",
                    char::from(b'A' + side as u8),
                    f.share(side)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

/// A Java thread that takes a short hold now and then (2 ms, then 100 ms away) beside three
/// crate owners looping on the same lock with 2 ms holds: the Java thread's waits stay short,
/// and the crate's owners keep holding the lock at a good share of their rate alone (measured
/// in the same run, in the second before the Java thread starts). Before the fix of the
/// stand-back (`src/acquisitions/handoff.rs`) the JVM took the lock within the crate head's
/// stand-back and gave it up before the head's attempt, which then won: the crate took that
/// for "nobody came" and stood back longer each time (100, 200, 400 ms), keeping its own owners
/// off a free lock. (The stand-in of `tests/handoff.rs`, which attempts only on a message or a TTL,
/// waited 0.1, 0.2, 0.4, 0.8 s instead; a real JVM's `lock()` attempts first and found the lock
/// free.) A measurement, so not in the suite (`#[ignore]`): in two full suite runs, beside
/// other targets' JVMs, the JVM's waits reached 157-348 ms, its stand-backs doubled as
/// designed, and the figure fell to 32-38 %. Run it alone by hand. The suite keeps the
/// stand-in test of `tests/handoff.rs` and the hand-off unit tests, which fail on the old
/// policy. Measured: 58-61 % of the rate alone after the fix (62-68 % beside two busy loops),
/// 10-28 % before (six runs with the build of before as `FAIR_PEER`). Bounds: the crate's rate while the Java thread runs at least 40 % of its
/// rate alone; every Java wait under 500 ms, their mean under 150 ms.
#[test]
#[ignore = "a measurement, load-dependent: run by hand alone (cargo test -p compat-tests --test beside_java -- --ignored)"]
fn a_java_thread_taking_short_holds_now_and_then_leaves_the_crate_its_share() {
    let Some(java) = redisson(
        CLASSPATH,
        "a_java_thread_taking_short_holds_now_and_then_leaves_the_crate_its_share",
    ) else {
        return;
    };
    let _alone = measuring_alone();
    let name = "short-holds-beside-java";
    let s = RedisServer::start();
    let flags = ["--watchdog-ms", "10000"];
    let mut jvm = start_java(java, &s.url(), &flags);
    let mut rust = {
        let mut command = Command::new(fairness_peer());
        command.args(flags).arg(s.url());
        Peer::spawn(command)
    };
    let within = Duration::from_secs(30);
    // The JVM's lock path warm (its JIT), alone on the lock.
    for _ in 0..20 {
        assert!(jvm.call("j", &format!("lock {name}"), within).ok);
        assert!(jvm.call("j", &format!("unlock {name}"), within).ok);
    }
    // Three crate owners loop lock, 2 ms, unlock for longer than the run lasts (the peer is
    // dropped, killed, at the end).
    let mut script = Vec::new();
    for _ in 0..4000 {
        for o in 1..=3 {
            script.push(format!("h{o} lock {name}"));
            script.push(format!("h{o} sleep 2"));
            script.push(format!("h{o} unlock {name}"));
        }
    }
    rust.send_lines(&script);
    // Alone: the crate's rate over one second, once its owners loop.
    let mut first = 0;
    for o in 1..=3 {
        let reply = rust.reply(&format!("h{o}"), "lock", within);
        assert!(reply.ok, "{reply:?}");
        first = first.max(reply.at);
    }
    let alone = (first, first + 1000);
    std::thread::sleep(Duration::from_millis(1100));
    let started = now_ms();
    let mut waits = Vec::new();
    for _ in 0..12 {
        let got = jvm.call("j", &format!("lock {name}"), within);
        assert!(got.ok, "{got:?}");
        waits.push(got.elapsed_ms);
        assert!(jvm.call("j", "sleep 2", within).ok);
        assert!(jvm.call("j", &format!("unlock {name}"), within).ok);
        assert!(jvm.call("j", "sleep 100", within).ok);
    }
    let ended = now_ms();
    // The crate's holds alone and beside the Java thread: each owner's replies in order, up to
    // its first hold after the Java thread's last round.
    let (mut holds_alone, mut holds_beside) = (0u32, 0u32);
    for o in 1..=3 {
        loop {
            let reply = rust.reply(&format!("h{o}"), "lock", within);
            assert!(reply.ok, "{reply:?}");
            if reply.at > ended {
                break;
            }
            holds_alone += u32::from(reply.at > alone.0 && reply.at <= alone.1);
            holds_beside += u32::from(reply.at >= started);
        }
    }
    let rate_alone = f64::from(holds_alone);
    let rate_beside = f64::from(holds_beside) * 1000.0 / (ended - started) as f64;
    eprintln!(
        "the Java thread's waits (ms): {waits:.1?}; the crate's holds: {holds_alone} in the \
         second alone, {holds_beside} in the {} ms beside ({:.0} % of its rate alone)",
        ended - started,
        rate_beside / rate_alone * 100.0
    );
    assert!(
        rate_beside >= rate_alone * 0.4,
        "the crate's owners held the lock {rate_beside:.0} times a second beside the Java \
         thread, {rate_alone:.0} alone"
    );
    let longest = waits.iter().copied().fold(0.0, f64::max);
    let mean = waits.iter().sum::<f64>() / waits.len() as f64;
    assert!(
        longest < 500.0,
        "a Java wait of {longest:.0} ms (every wait: {waits:.1?})"
    );
    assert!(
        mean < 150.0,
        "the Java waits average {mean:.0} ms (every wait: {waits:.1?})"
    );
}
