//! Cross-process compatibility: `lock-peer` processes sharing locks through one Redis, driven by
//! the line protocol of `shared/peer-protocol.md`.

use compat_tests::peer;
use redisson_lock_test_kit::{cluster, proxy, redis_server, replica};
use std::{
    io::Write,
    time::{Duration, Instant},
};

use peer::{Peer, Reply};
use proxy::Proxy;
use redis_server::RedisServer;

/// The crate's `lock-peer` of this test build.
const LOCK_PEER: &str = env!("CARGO_BIN_EXE_lock-peer");

const T: Duration = Duration::from_secs(20);

#[test]
fn two_peers_exclude_each_other_and_an_unlock_wakes_the_other_by_its_message() {
    let s = RedisServer::start();
    let mut a = Peer::start(LOCK_PEER, &s.url(), &[]);
    let mut b = Peer::start(LOCK_PEER, &s.url(), &[]);
    assert_ne!(a.id, b.id);
    assert_eq!(a.call("t1", "lock shared", T).value, "locked");
    assert_eq!(b.call("t1", "trylock shared", T).value, "false");
    assert_eq!(b.call("t2", "trylock shared 200", T).value, "false");
    assert_eq!(b.call("t1", "islocked shared", T).value, "true");
    assert_eq!(b.call("t1", "held shared", T).value, "false");
    // b waits; a releases.
    b.send("t1 lock shared");
    std::thread::sleep(Duration::from_millis(300));
    let unlocked = a.call("t1", "unlock shared", T);
    assert!(unlocked.ok);
    let woke = b.reply("t1", "lock", T);
    assert!(woke.ok, "{woke:?}");
    // Woken by the unlock message (typically a few ms), not by the 30 s TTL bound; the bound
    // leaves room for a loaded machine (142 ms was seen under load 25).
    let latency = woke.at as i128 - unlocked.at as i128;
    assert!(latency < 2000, "woke {latency} ms after the unlock");
    assert_eq!(b.call("t1", "holdcount shared", T).value, "1");
    assert_eq!(a.call("t1", "held shared", T).value, "false");
    // The other peer's hash field is exactly <uuid>:<thread id>.
    let lockname = b.call("t1", "lockname", T).value;
    assert!(lockname.starts_with(&format!("{}:", b.id)));
}

#[test]
fn a_halted_holder_with_a_one_second_watchdog_frees_the_lock_within_about_a_second() {
    let s = RedisServer::start();
    let mut a = Peer::start(LOCK_PEER, &s.url(), &["--watchdog-ms", "1000"]);
    let mut b = Peer::start(LOCK_PEER, &s.url(), &["--watchdog-ms", "1000"]);
    assert_eq!(a.call("t1", "lock crash", T).value, "locked");
    // Held across several renewal periods first.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(b.call("t1", "trylock crash", T).value, "false");
    a.send("halt");
    let halted = Instant::now();
    let _ = a.child.wait();
    let got = b.call("t1", "trylock crash 5000", T);
    assert_eq!(got.value, "true");
    let freed_after = halted.elapsed();
    assert!(freed_after < Duration::from_millis(1600), "{freed_after:?}");
}

#[test]
fn quit_releases_nothing_and_the_watchdog_lock_expires() {
    let s = RedisServer::start();
    // Every unlock publishes on the lock's channel: listen to both locks' channels.
    let mut sub = std::net::TcpStream::connect(("127.0.0.1", s.port())).unwrap();
    sub.write_all(b"SUBSCRIBE redisson_lock__channel:{q} redisson_lock__channel:{q2}\r\n")
        .unwrap();
    read_until_contains(&mut sub, "redisson_lock__channel:{q2}\r\n:2\r\n");

    let mut a = Peer::start(LOCK_PEER, &s.url(), &["--watchdog-ms", "800"]);
    let mut b = Peer::start(LOCK_PEER, &s.url(), &[]);
    assert_eq!(a.call("t1", "lock q", T).value, "locked");
    assert_eq!(a.call("t1", "lock q2 60000", T).value, "locked");
    assert_eq!(a.global("quit", T), "- quit OK");
    // The leased lock is still held: quit released nothing. (The watchdog lock may already
    // have expired, less than 800 ms after its last renewal, so it proves nothing here.)
    assert_eq!(b.call("t1", "islocked q2", T).value, "true");
    let ttl: i64 = b.call("t1", "ttl q2", T).value.parse().unwrap();
    assert!(ttl > 50_000, "{ttl}");
    // The watchdog stopped: its lock expires and another process gets it.
    assert_eq!(b.call("t1", "trylock q 3000", T).value, "true");
    // No unlock message was published for either lock before that.
    sub.write_all(b"PING\r\n").unwrap();
    let seen = read_until_contains(&mut sub, "pong");
    assert!(!seen.contains("message"), "{seen:?}");
}

/// Reads a raw connection until what was read contains `needle`; returns all of it.
fn read_until_contains(conn: &mut std::net::TcpStream, needle: &str) -> String {
    use std::io::Read;
    conn.set_read_timeout(Some(T)).unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&seen).contains(needle) {
        let n = conn.read(&mut buf).expect("read within the timeout");
        assert!(
            n > 0,
            "closed before {needle:?}: {:?}",
            String::from_utf8_lossy(&seen)
        );
        seen.extend_from_slice(&buf[..n]);
    }
    String::from_utf8_lossy(&seen).into_owned()
}

#[test]
fn errors_use_the_protocol_kinds() {
    let s = RedisServer::start();
    let mut a = Peer::start(LOCK_PEER, &s.url(), &[]);
    let r = a.call("t1", "unlock nothing", T);
    assert!(!r.ok);
    assert!(r.value.starts_with("NOT_HELD:"), "{r:?}");
    let r = a.call("t1", "lock k 99999999999999999999", T);
    assert!(r.value.starts_with("INVALID:"), "{r:?}");
    let r = a.call("t1", "frobnicate k", T);
    assert!(r.value.starts_with("UNSUPPORTED:"), "{r:?}");
    let r = a.call("t1", "token k", T);
    assert!(r.value.starts_with("INVALID:"), "{r:?}");
    assert_eq!(a.call("t1", "ttl k", T).value, "-2");
    assert_eq!(a.call("t1", "lock k 5000", T).value, "locked");
    let ttl: i64 = a.call("t1", "ttl k", T).value.parse().unwrap();
    assert!((4000..=5000).contains(&ttl));
    assert_eq!(a.call("t1", "lock k", T).value, "locked");
    assert_eq!(a.call("t1", "holdcount k", T).value, "2");
    assert_eq!(a.call("t2", "forceunlock k", T).value, "true");
    assert_eq!(a.call("t2", "forceunlock k", T).value, "false");
    // A string at the key: WRONG_TYPE, at once.
    let mut b = Peer::start(LOCK_PEER, &s.url(), &[]);
    let _ = b.call("t1", "lock str 60000", T);
    // Make the key a string through raw RESP on the server.
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", s.port())).unwrap();
    conn.write_all(b"DEL str\r\nSET str x\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let r = a.call("t3", "lock str", T);
    assert!(r.value.starts_with("WRONG_TYPE:"), "{r:?}");
    let id = a.global("id", T);
    assert_eq!(id, format!("- id OK {}", a.id));
}

#[test]
fn await_waits_for_a_threads_queue_and_threads_do_not_block_each_other() {
    let s = RedisServer::start();
    let mut a = Peer::start(LOCK_PEER, &s.url(), &[]);
    let mut b = Peer::start(LOCK_PEER, &s.url(), &[]);
    assert_eq!(a.call("t1", "lock busy", T).value, "locked");
    b.send("t1 lock busy"); // blocks t1 of b
    let other = b.call("t2", "islocked busy", T);
    assert_eq!(other.value, "true", "t2 is not delayed by the blocked t1");
    b.send("t3 sleep 200");
    let started = Instant::now();
    assert_eq!(b.global("await t3", T), "- await OK t3");
    assert!(started.elapsed() >= Duration::from_millis(190));
    a.call("t1", "unlock busy", T);
    assert!(b.reply("t1", "lock", T).ok);
}

#[test]
fn bench_command_runs_every_mode() {
    let s = RedisServer::start();
    let mut a = Peer::start(LOCK_PEER, &s.url(), &[]);
    for mode in [
        "uncontended 4 300",
        "contended 4 300",
        "contended 4 300 2",
        "leased 2 300",
    ] {
        let line = a.global(&format!("bench {mode}"), T);
        assert!(line.starts_with("- bench OK ops="), "{line}");
        let ops: u64 = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("ops="))
            .unwrap()
            .parse()
            .unwrap();
        assert!(ops > 0, "{line}");
        for key in ["ops_per_s=", "p50_us=", "p99_us=", "max_us="] {
            assert!(line.contains(key), "{line}");
        }
    }
    assert!(a
        .global("bench sideways 1 1", T)
        .starts_with("- bench ERR INVALID"));
}

/// One raw RESP command on a fresh connection; returns the integer reply.
fn raw_int(port: u16, command: &str) -> i64 {
    use std::io::Read;
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    conn.write_all(format!("{command}\r\n").as_bytes()).unwrap();
    let mut buf = [0u8; 64];
    let n = conn.read(&mut buf).unwrap();
    let reply = std::str::from_utf8(&buf[..n]).unwrap();
    reply
        .trim_start_matches(':')
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("not an integer reply: {reply:?}"))
}

#[test]
fn fair_lock_waiters_from_two_peers_acquire_in_exact_fifo_order() {
    let s = RedisServer::start();
    let mut a = Peer::start(LOCK_PEER, &s.url(), &[]);
    let mut b = Peer::start(LOCK_PEER, &s.url(), &[]);
    assert_eq!(a.call("h", "flock q", T).value, "locked");
    // Six waiters alternating between the peers, each queued before the next arrives.
    let order = [
        ("a", "w1"),
        ("b", "w2"),
        ("a", "w3"),
        ("b", "w4"),
        ("a", "w5"),
        ("b", "w6"),
    ];
    for (i, (peer, thread)) in order.iter().enumerate() {
        let p = if *peer == "a" { &mut a } else { &mut b };
        p.send(&format!("{thread} flock q"));
        p.send(&format!("{thread} sleep 30"));
        p.send(&format!("{thread} funlock q"));
        let deadline = Instant::now() + T;
        while raw_int(s.port(), "LLEN redisson_lock_queue:{q}") != i as i64 + 1 {
            assert!(Instant::now() < deadline, "waiter {thread} never queued");
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    assert!(a.call("h", "funlock q", T).ok);
    let mut stamps = Vec::new();
    for (peer, thread) in order {
        let p = if peer == "a" { &mut a } else { &mut b };
        let r = p.reply(thread, "flock", T);
        assert!(r.ok, "{r:?}");
        stamps.push((r.at, thread));
    }
    let mut sorted = stamps.clone();
    sorted.sort();
    assert_eq!(sorted, stamps, "acquired out of arrival order");
    assert_eq!(raw_int(s.port(), "EXISTS redisson_lock_queue:{q}"), 0);
}

#[test]
fn readers_in_two_processes_share_and_a_waiting_writer_wakes_by_the_message() {
    let s = RedisServer::start();
    let mut a = Peer::start(LOCK_PEER, &s.url(), &[]);
    let mut b = Peer::start(LOCK_PEER, &s.url(), &[]);
    assert_eq!(a.call("t1", "rlock doc", T).value, "locked");
    assert_eq!(b.call("t1", "rtrylock doc", T).value, "true");
    assert_eq!(b.call("t2", "wtrylock doc", T).value, "false");
    b.send("t2 wlock doc");
    std::thread::sleep(Duration::from_millis(300));
    assert!(a.call("t1", "runlock doc", T).ok);
    std::thread::sleep(Duration::from_millis(200));
    let last = b.call("t1", "runlock doc", T);
    let woke = b.reply("t2", "wlock", T);
    assert!(woke.ok);
    let latency = woke.at as i128 - last.at as i128;
    // By the read unlock message, not the 30 s TTL bound (room for a loaded machine).
    assert!(
        latency < 2000,
        "writer woke {latency} ms after the last read release"
    );
    // A reader now waits for the writer.
    assert_eq!(a.call("t1", "rtrylock doc 200", T).value, "false");
    assert_eq!(b.call("t2", "wholdcount doc", T).value, "1");
}

#[test]
fn fenced_tokens_strictly_increase_across_processes_and_reentries() {
    let s = RedisServer::start();
    let mut a = Peer::start(LOCK_PEER, &s.url(), &[]);
    let mut b = Peer::start(LOCK_PEER, &s.url(), &[]);
    let mut last = 0u64;
    for round in 0..4 {
        let (p, q) = if round % 2 == 0 {
            (&mut a, &mut b)
        } else {
            (&mut b, &mut a)
        };
        let t1: u64 = p.call("t1", "fencedlock tok", T).value.parse().unwrap();
        let t2: u64 = p.call("t1", "fencedlock tok", T).value.parse().unwrap();
        assert!(t1 > last && t2 > t1, "{last} {t1} {t2}");
        assert_eq!(q.call("t1", "fencedtrylock tok", T).value, "null");
        assert_eq!(q.call("t1", "fencedtoken tok", T).value, t2.to_string());
        p.call("t1", "fencedunlock tok", T);
        p.call("t1", "fencedunlock tok", T);
        last = t2;
    }
}

#[test]
fn spin_lock_excludes_across_processes() {
    let s = RedisServer::start();
    let mut a = Peer::start(LOCK_PEER, &s.url(), &[]);
    let mut b = Peer::start(LOCK_PEER, &s.url(), &[]);
    assert_eq!(a.call("t1", "spinlock sp", T).value, "locked");
    let r = b.call("t1", "spintrylock sp 300", T);
    assert_eq!(r.value, "false");
    b.send("t1 spinlock sp");
    std::thread::sleep(Duration::from_millis(200));
    let unlocked = a.call("t1", "spinunlock sp", T);
    let got = b.reply("t1", "spinlock", T);
    assert!(got.ok);
    // Bounded by the 128 ms back-off cap.
    assert!((got.at as i128 - unlocked.at as i128) < 300);
}

#[test]
fn a_line_that_is_not_utf8_gets_err_invalid_and_reading_goes_on() {
    let s = RedisServer::start();
    let mut a = Peer::start(LOCK_PEER, &s.url(), &[]);
    // A thread command: the thread's reply, in order with the thread's other replies.
    a.send("t1 sleep 100");
    a.send_bytes(b"t1 lock k\xff");
    let r = a.reply("t1", "lock", T);
    assert!(!r.ok);
    assert!(r.value.starts_with("INVALID:"), "{r:?}");
    // A global command, and a line with no readable word.
    a.send_bytes(b"sleep 1\xfe");
    let l = a.line_starting("- sleep ", T);
    assert!(l.starts_with("- sleep ERR INVALID:"), "{l}");
    a.send_bytes(b"\xc3\x28 lock k");
    let l = a.line_starting("- ", T);
    assert!(l.starts_with("- ? ERR INVALID:"), "{l}");
    // Nothing of them ran, and reading went on.
    assert_eq!(a.call("t1", "islocked k", T).value, "false");
    assert_eq!(a.call("t1", "lock k", T).value, "locked");
    assert_eq!(a.global("id", T), format!("- id OK {}", a.id));
}

#[test]
fn lost_and_validms_follow_the_holders_guard() {
    let s = RedisServer::start();
    let mut a = Peer::start(LOCK_PEER, &s.url(), &["--watchdog-ms", "1000"]);
    let mut b = Peer::start(LOCK_PEER, &s.url(), &[]);
    assert_eq!(a.call("t1", "lost l", T).value, "none");
    assert_eq!(a.call("t1", "validms l", T).value, "-1");

    // Leased: valid until send time + lease − drift (1500 − 17 ms), then lost for good.
    assert_eq!(a.call("t1", "lock l 1500", T).value, "locked");
    let v: i64 = a.call("t1", "validms l", T).value.parse().unwrap();
    assert!((1000..=1483).contains(&v), "{v}");
    assert_eq!(a.call("t1", "lost l", T).value, "false");
    assert_eq!(a.call("t2", "lost l", T).value, "none", "per thread");
    assert_eq!(a.call("t1", "flost l", T).value, "none", "per family");
    a.poll_until("t1", "lost l", "true", T);
    assert_eq!(a.call("t1", "validms l", T).value, "0");
    // The lock is free once its holder has been told.
    assert_eq!(b.call("t1", "trylock l 2000", T).value, "true");
    assert_eq!(a.call("t1", "lost l", T).value, "true");

    // Watchdog: renewals move the deadline, so it stays valid across several timeouts.
    assert_eq!(a.call("t1", "flock w", T).value, "locked");
    let v: i64 = a.call("t1", "fvalidms w", T).value.parse().unwrap();
    assert!((1..=988).contains(&v), "{v}");
    a.call("t1", "sleep 1500", T);
    assert_eq!(a.call("t1", "flost w", T).value, "false");
    let v: i64 = a.call("t1", "fvalidms w", T).value.parse().unwrap();
    assert!(v > 0, "renewed: {v}");
    // Re-entry keeps it; unlocking the last hold forgets it.
    assert_eq!(a.call("t1", "flock w", T).value, "locked");
    assert!(a.call("t1", "funlock w", T).ok);
    assert_eq!(a.call("t1", "flost w", T).value, "false");
    assert!(a.call("t1", "funlock w", T).ok);
    assert_eq!(a.call("t1", "flost w", T).value, "none");
    assert_eq!(a.call("t1", "fvalidms w", T).value, "-1");

    // Taken away by another process: the watchdog's next renewal tells the holder.
    assert_eq!(a.call("t1", "wlock rw", T).value, "locked");
    assert_eq!(a.call("t1", "rlost rw", T).value, "none");
    assert_eq!(b.call("t1", "wforceunlock rw", T).value, "true");
    a.poll_until("t1", "wlost rw", "true", Duration::from_secs(2));
    let r = a.call("t1", "wunlock rw", T);
    assert!(r.value.starts_with("NOT_HELD:"), "{r:?}");
    assert_eq!(a.call("t1", "wlost rw", T).value, "none");
    // A new hold starts afresh.
    assert_eq!(a.call("t1", "wlock rw", T).value, "locked");
    assert_eq!(a.call("t1", "wlost rw", T).value, "false");
}

#[test]
fn a_partitioned_holder_reports_lost_before_anyone_else_acquires() {
    // Fault catalogue S12: the holder's connection is blackholed; L = 1 s.
    let rt = tokio::runtime::Runtime::new().unwrap();
    let s = RedisServer::start();
    let proxy = rt.block_on(Proxy::start(s.port()));
    let mut h = Peer::start(LOCK_PEER, &proxy.url(), &["--watchdog-ms", "1000"]);
    let mut c = Peer::start(LOCK_PEER, &s.url(), &[]);
    assert_eq!(h.call("t1", "lock p", T).value, "locked");
    assert_eq!(c.call("t1", "trylock p", T).value, "false");

    proxy.freeze();
    // The holder's own estimate of its deadline, in epoch ms (an upper bound).
    let v = h.call("t1", "validms p", T);
    let deadline = v.at + v.value.parse::<u128>().unwrap();
    c.send("t1 trylock p 10000");
    let entered = c.reply("t1", "trylock", T);
    assert_eq!(entered.value, "true", "{entered:?}");
    // Once another process is inside, the partitioned holder must already know.
    assert_eq!(h.call("t1", "lost p", T).value, "true");
    assert!(
        deadline <= entered.at,
        "holder valid until {deadline}, other process entered at {}",
        entered.at
    );

    // Healed: the holder does not get the lock back by itself and stays lost.
    proxy.unfreeze();
    assert_eq!(h.call("t1", "held p", T).value, "false");
    assert_eq!(h.call("t1", "lost p", T).value, "true");
    assert_eq!(c.call("t1", "held p", T).value, "true");
}

/// Two peers on a 3+3 cluster, in every sharded-pub/sub mode (both sides in the same mode), on
/// a lock per master: they exclude each other, the waiter wakes within 100 ms of the unlock,
/// and fair waiters of both peers are handed the lock in arrival order.
#[test]
fn peers_on_a_cluster_exclude_and_wake_each_other_in_every_mode() {
    let c = cluster::RedisCluster::start();
    let seeds = c.seed_urls().join(",");
    for mode in ["auto", "on", "off", "both"] {
        let flags = ["--cluster", "--sharded-pubsub", mode];
        let mut a = Peer::start(LOCK_PEER, &seeds, &flags);
        let mut b = Peer::start(LOCK_PEER, &seeds, &flags);
        for name in c.name_per_master(&format!("peer-{mode}-")) {
            assert_eq!(a.call("t1", &format!("lock {name}"), T).value, "locked");
            assert_eq!(b.call("t1", &format!("trylock {name}"), T).value, "false");
            b.send(&format!("t1 lock {name}"));
            // Wait until the waiter listens on the unlock channel (in this mode's namespace).
            let channel = format!("redisson_lock__channel:{{{name}}}");
            let deadline = Instant::now() + T;
            loop {
                if listeners(&c, &channel) > 0 {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "{mode}: the waiter never subscribed"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            let unlocked = a.call("t1", &format!("unlock {name}"), T);
            assert!(unlocked.ok, "{unlocked:?}");
            let woke = b.reply("t1", "lock", T);
            assert!(woke.ok, "{woke:?}");
            let latency = woke.at as i128 - unlocked.at as i128;
            assert!(latency < 100, "{mode}: woke {latency} ms after the unlock");
            assert!(b.call("t1", &format!("unlock {name}"), T).ok);
        }
        // Fair hand-over across the two processes, in arrival order.
        let q = c.name_per_master(&format!("fair-{mode}-")).remove(0);
        assert_eq!(a.call("h", &format!("flock {q}"), T).value, "locked");
        let queue = format!("redisson_lock_queue:{{{q}}}");
        let owner = c.master_for_key(&queue);
        let order = [("a", "w1"), ("b", "w2"), ("a", "w3"), ("b", "w4")];
        for (i, (peer, thread)) in order.iter().enumerate() {
            let p = if *peer == "a" { &mut a } else { &mut b };
            p.send(&format!("{thread} flock {q}"));
            p.send(&format!("{thread} sleep 20"));
            p.send(&format!("{thread} funlock {q}"));
            let deadline = Instant::now() + T;
            while cluster::RedisCluster::cmd(owner, &["LLEN", &queue]).int() != Some(i as i64 + 1) {
                assert!(
                    Instant::now() < deadline,
                    "{mode}: waiter {thread} never queued"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        assert!(a.call("h", &format!("funlock {q}"), T).ok);
        let mut stamps = Vec::new();
        for (peer, thread) in order {
            let p = if peer == "a" { &mut a } else { &mut b };
            let r = p.reply(thread, "flock", T);
            assert!(r.ok, "{mode}: {r:?}");
            stamps.push((r.at, thread));
        }
        let mut sorted = stamps.clone();
        sorted.sort();
        assert_eq!(sorted, stamps, "{mode}: acquired out of arrival order");
    }
}

#[test]
fn replica_sync_ms_fails_an_unacknowledged_acquisition_with_not_replicated() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let set = rt.block_on(replica::ReplicaSet::start());
    let port = set.master.port();
    let mut synced = Peer::start(LOCK_PEER, &set.url(), &["--replica-sync-ms", "300"]);
    let mut off = Peer::start(LOCK_PEER, &set.url(), &["--replica-sync-ms", "0"]);
    assert_eq!(synced.call("t1", "trylock healthy", T).value, "true");
    assert_eq!(synced.call("t1", "unlock healthy", T).value, "unlocked");
    assert!(rt.block_on(replica::wait_calls(port)) >= 1);

    set.proxy.freeze();
    let r = synced.call("t1", "trylock frozen", T);
    assert!(!r.ok, "{r:?}");
    assert!(r.value.starts_with("NOT_REPLICATED:"), "{r:?}");
    assert!(r.value.contains("frozen"), "{r:?}");
    assert_eq!(rt.block_on(replica::cli(port, &["EXISTS", "frozen"])), "0");
    // --replica-sync-ms 0: no WAIT, acquired at once.
    let waits = rt.block_on(replica::wait_calls(port));
    assert_eq!(off.call("t1", "trylock frozen", T).value, "true");
    assert_eq!(rt.block_on(replica::wait_calls(port)), waits);
    assert_eq!(off.call("t1", "unlock frozen", T).value, "unlocked");

    set.proxy.unfreeze();
    assert_eq!(synced.call("t1", "trylock frozen", T).value, "true");
    drop(rt);
}

// ---- Synchronizers (peer protocol "Synchronizers, non-reentrant and group locks") ----

/// Subscribers of `channel` on a standalone server (`PUBSUB NUMSUB`).
fn numsub(s: &RedisServer, channel: &str) -> i64 {
    cluster::RedisCluster::query(s.port(), &["PUBSUB", "NUMSUB", channel])
        .unwrap()
        .items()
        .get(1)
        .and_then(|n| n.int())
        .unwrap_or(0)
}

/// Waits until some process listens on `channel` (a waiter has subscribed).
fn wait_for_listener(s: &RedisServer, channel: &str) {
    let deadline = Instant::now() + T;
    while numsub(s, channel) == 0 {
        assert!(Instant::now() < deadline, "nobody subscribed to {channel}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Milliseconds from one peer's reply to another's (both stamp `at=` with the wall clock).
fn after(later: &Reply, earlier: &Reply) -> i128 {
    later.at as i128 - earlier.at as i128
}

#[test]
fn two_peers_share_a_semaphore_and_a_release_wakes_the_other_within_300ms() {
    let s = RedisServer::start();
    let mut a = Peer::start(LOCK_PEER, &s.url(), &[]);
    let mut b = Peer::start(LOCK_PEER, &s.url(), &[]);
    assert_eq!(a.call("t1", "semsetpermits s 2", T).value, "true");
    assert_eq!(b.call("t1", "semsetpermits s 5", T).value, "false");
    assert_eq!(a.call("t1", "semacquire s 2", T).value, "acquired");
    assert_eq!(b.call("t1", "semavailable s", T).value, "0");
    assert_eq!(b.call("t1", "semtryacquire s", T).value, "false");
    assert_eq!(b.call("t1", "semtryacquire s 1 100", T).value, "false");
    // Two waiters of b, each for one permit; a's release of 2 lets both through.
    b.send("t1 semacquire s");
    b.send("t2 semtryacquire s 1 20000");
    wait_for_listener(&s, "redisson_sc:{s}");
    let released = a.call("t1", "semrelease s 2", T);
    assert_eq!(released.value, "released");
    let w1 = b.reply("t1", "semacquire", T);
    let w2 = b.reply("t2", "semtryacquire", T);
    assert_eq!((w1.value.as_str(), w2.value.as_str()), ("acquired", "true"));
    for w in [&w1, &w2] {
        let latency = after(w, &released);
        eprintln!("semaphore waiter woke {latency} ms after the other peer's release");
        assert!(latency < 300, "woke {latency} ms after the release");
    }
    // Permits are anonymous: b gives back what a took, a drains, adds.
    assert_eq!(b.call("t1", "semrelease s 3", T).value, "released");
    assert_eq!(a.call("t1", "semdrain s", T).value, "3");
    assert_eq!(a.call("t1", "semadd s -2", T).value, "added");
    assert_eq!(b.call("t1", "semavailable s", T).value, "-2");
    let bad = a.call("t1", "semsetpermits s", T);
    assert!(!bad.ok && bad.value.starts_with("INVALID"), "{bad:?}");
}

#[test]
fn a_permit_acquired_by_one_peer_is_released_by_the_other_and_wakes_its_waiter() {
    let s = RedisServer::start();
    let mut a = Peer::start(LOCK_PEER, &s.url(), &[]);
    let mut b = Peer::start(LOCK_PEER, &s.url(), &[]);
    assert_eq!(a.call("t1", "psemsetpermits p 1", T).value, "true");
    let id = a.call("t1", "psemacquire p", T).value;
    assert_eq!(id.len(), 32, "{id}");
    assert!(id
        .bytes()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    assert_eq!(b.call("t1", "psemtryacquire p", T).value, "null");
    assert_eq!(b.call("t1", "psemavailable p", T).value, "0");
    a.send("t2 psemtryacquire p 20000");
    wait_for_listener(&s, "redisson_sc:{p}");
    let released = b.call("t1", &format!("psemrelease p {id}"), T);
    assert_eq!(released.value, "released");
    let woke = a.reply("t2", "psemtryacquire", T);
    assert_eq!(woke.value.len(), 32, "{woke:?}");
    assert_ne!(woke.value, id);
    let latency = after(&woke, &released);
    eprintln!("permit waiter woke {latency} ms after the other peer released the permit");
    assert!(latency < 300, "woke {latency} ms after the release");
    // Released already: release fails with NOT_HELD, try-release says false.
    let again = a.call("t1", &format!("psemrelease p {id}"), T);
    assert!(
        !again.ok && again.value.starts_with("NOT_HELD"),
        "{again:?}"
    );
    assert_eq!(
        a.call("t1", &format!("psemtryrelease p {id}"), T).value,
        "false"
    );
    assert_eq!(
        b.call("t1", &format!("psemtryrelease p {}", woke.value), T)
            .value,
        "true"
    );
    assert_eq!(a.call("t1", "psemavailable p", T).value, "1");
    let bad = a.call("t1", "psemrelease p xyz", T);
    assert!(!bad.ok && bad.value.starts_with("INVALID"), "{bad:?}");
}

#[test]
fn an_expired_permit_is_reclaimed_by_the_other_peers_waiter_within_500ms() {
    let s = RedisServer::start();
    let mut a = Peer::start(LOCK_PEER, &s.url(), &[]);
    let mut b = Peer::start(LOCK_PEER, &s.url(), &[]);
    assert_eq!(a.call("t1", "psemsetpermits e 1", T).value, "true");
    let lease = 800;
    let taken = a.call("t1", &format!("psemacquire e {lease}"), T);
    assert_eq!(taken.value.len(), 32, "{taken:?}");
    let got = b.call("t1", "psemtryacquire e 20000", T);
    assert_eq!(got.value.len(), 32, "{got:?}");
    // `taken.at` is stamped after the acquisition's reply, so the expiry (the attempt's clock
    // + lease) is at most `taken.at + lease`.
    let after_expiry = after(&got, &taken) - lease;
    eprintln!("expired permit taken by the other peer {after_expiry} ms after its expiry");
    assert!(
        after_expiry < 500,
        "taken {after_expiry} ms after the expiry"
    );
    let late = a.call("t1", &format!("psemtryrelease e {}", taken.value), T);
    assert_eq!(late.value, "false", "expired and given back already");
}

#[test]
fn a_count_down_by_one_peer_opens_the_other_peers_waiters_within_300ms() {
    let s = RedisServer::start();
    let mut a = Peer::start(LOCK_PEER, &s.url(), &[]);
    let mut b = Peer::start(LOCK_PEER, &s.url(), &[]);
    assert_eq!(a.call("t1", "cdlsetcount l 2", T).value, "true");
    assert_eq!(b.call("t1", "cdlsetcount l 7", T).value, "false");
    assert_eq!(b.call("t1", "cdlcount l", T).value, "2");
    assert_eq!(b.call("t1", "cdlawait l 100", T).value, "false");
    b.send("t1 cdlawait l");
    b.send("t2 cdlawait l 20000");
    wait_for_listener(&s, "redisson_countdownlatch__channel__{l}");
    assert_eq!(a.call("t1", "cdlcountdown l", T).value, "ok");
    assert_eq!(a.call("t1", "cdlcount l", T).value, "1");
    let opened = a.call("t1", "cdlcountdown l", T);
    assert_eq!(opened.value, "ok");
    for thread in ["t1", "t2"] {
        let woke = b.reply(thread, "cdlawait", T);
        assert_eq!(woke.value, "true", "{woke:?}");
        let latency = after(&woke, &opened);
        eprintln!("latch waiter {thread} woke {latency} ms after the other peer's count-down");
        assert!(
            latency < 300,
            "{thread} woke {latency} ms after the count-down"
        );
    }
    assert_eq!(b.call("t1", "cdlcount l", T).value, "0");
    assert_eq!(b.call("t1", "cdlawait l 100", T).value, "true");
}

#[test]
fn replica_sync_undoes_an_unacknowledged_semaphore_acquisition() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let set = rt.block_on(replica::ReplicaSet::start());
    let port = set.master.port();
    let mut synced = Peer::start(LOCK_PEER, &set.url(), &["--replica-sync-ms", "300"]);
    assert_eq!(synced.call("t1", "semsetpermits rs 2", T).value, "true");
    let waits = rt.block_on(replica::wait_calls(port));
    assert_eq!(synced.call("t1", "semtryacquire rs", T).value, "true");
    assert!(
        rt.block_on(replica::wait_calls(port)) > waits,
        "WAIT after SEM-ACQ"
    );
    set.proxy.freeze();
    let r = synced.call("t1", "semtryacquire rs", T);
    assert!(!r.ok && r.value.starts_with("NOT_REPLICATED:"), "{r:?}");
    // Given back: the master still has the one permit left.
    assert_eq!(rt.block_on(replica::cli(port, &["GET", "rs"])), "1");
    set.proxy.unfreeze();
    assert_eq!(synced.call("t1", "semtryacquire rs", T).value, "true");
    drop(rt);
}

/// (sharded, classic) listeners of `channel` on a cluster.
fn cluster_listeners(c: &cluster::RedisCluster, channel: &str) -> (i64, i64) {
    let owner = c.master_for_key(channel);
    let sharded = cluster::RedisCluster::cmd(owner, &["PUBSUB", "SHARDNUMSUB", channel])
        .items()
        .get(1)
        .and_then(|n| n.int())
        .unwrap_or(0);
    let classic = c
        .live_ports()
        .into_iter()
        .filter_map(|p| {
            cluster::RedisCluster::cmd(p, &["PUBSUB", "NUMSUB", channel])
                .items()
                .get(1)
                .and_then(|n| n.int())
        })
        .sum();
    (sharded, classic)
}

/// On a cluster a peer in `both` bridges the two Redisson generations' namespaces for the
/// synchronizers: its semaphore release, permit release and latch count-down wake a waiter
/// listening with `SUBSCRIBE` (`off`, as Redisson 3.17) and one listening with `SSUBSCRIBE`
/// (`on`, as Redisson 3.22+) alike, within 300 ms, on every master.
#[test]
fn on_a_cluster_a_both_peer_wakes_synchronizer_waiters_of_either_generation() {
    let c = cluster::RedisCluster::start();
    let seeds = c.seed_urls().join(",");
    let mut bridge = Peer::start(
        LOCK_PEER,
        &seeds,
        &["--cluster", "--sharded-pubsub", "both"],
    );
    let mut classic = Peer::start(LOCK_PEER, &seeds, &["--cluster", "--sharded-pubsub", "off"]);
    let mut sharded = Peer::start(LOCK_PEER, &seeds, &["--cluster", "--sharded-pubsub", "on"]);
    let both_listening = |channel: &str| {
        let deadline = Instant::now() + T;
        loop {
            let (s, k) = cluster_listeners(&c, channel);
            if s > 0 && k > 0 {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "waiters never subscribed to {channel}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    for name in c.name_per_master("sync-bridge-") {
        // Semaphore: one release of 2 wakes one waiter in each namespace.
        assert_eq!(
            bridge
                .call("t1", &format!("semsetpermits {name} 0"), T)
                .value,
            "true"
        );
        classic.send(&format!("t1 semacquire {name}"));
        sharded.send(&format!("t1 semacquire {name}"));
        both_listening(&format!("redisson_sc:{{{name}}}"));
        let released = bridge.call("t1", &format!("semrelease {name} 2"), T);
        assert!(released.ok, "{released:?}");
        for peer in [&mut classic, &mut sharded] {
            let woke = peer.reply("t1", "semacquire", T);
            assert_eq!(woke.value, "acquired");
            let latency = after(&woke, &released);
            assert!(latency < 300, "{name}: woke {latency} ms after the release");
        }
        // Permit-expirable semaphore: the classic peer holds the only permit; the bridge
        // releases it by its id and the sharded peer's waiter takes it.
        let ps = format!("{name}:ps");
        assert_eq!(
            bridge
                .call("t1", &format!("psemsetpermits {ps} 1"), T)
                .value,
            "true"
        );
        let id = classic.call("t1", &format!("psemacquire {ps}"), T).value;
        sharded.send(&format!("t1 psemtryacquire {ps} 20000"));
        let channel = format!("redisson_sc:{{{ps}}}");
        let deadline = Instant::now() + T;
        while cluster_listeners(&c, &channel).0 == 0 {
            assert!(Instant::now() < deadline, "no sharded waiter on {channel}");
            std::thread::sleep(Duration::from_millis(5));
        }
        let released = bridge.call("t1", &format!("psemrelease {ps} {id}"), T);
        assert_eq!(released.value, "released");
        let woke = sharded.reply("t1", "psemtryacquire", T);
        assert_eq!(woke.value.len(), 32, "{woke:?}");
        let latency = after(&woke, &released);
        assert!(latency < 300, "{ps}: woke {latency} ms after the release");
        // Latch: the count-down that opens it wakes both.
        let latch = format!("{name}:cdl");
        assert_eq!(
            bridge
                .call("t1", &format!("cdlsetcount {latch} 1"), T)
                .value,
            "true"
        );
        classic.send(&format!("t1 cdlawait {latch}"));
        sharded.send(&format!("t1 cdlawait {latch} 20000"));
        both_listening(&format!("redisson_countdownlatch__channel__{{{latch}}}"));
        let opened = bridge.call("t1", &format!("cdlcountdown {latch}"), T);
        for peer in [&mut classic, &mut sharded] {
            let woke = peer.reply("t1", "cdlawait", T);
            assert_eq!(woke.value, "true");
            let latency = after(&woke, &opened);
            assert!(
                latency < 300,
                "{latch}: woke {latency} ms after the count-down"
            );
        }
    }
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + T;
    while !done() {
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn non_reentrant_locks_refuse_the_holder_and_wake_the_other_peer_within_300ms() {
    let s = RedisServer::start();
    let mut a = Peer::start(LOCK_PEER, &s.url(), &[]);
    let mut b = Peer::start(LOCK_PEER, &s.url(), &[]);
    for (prefix, name) in [("nr", "nr-x"), ("nrf", "nrf-x")] {
        assert_eq!(
            a.call("t1", &format!("{prefix}lock {name}"), T).value,
            "locked"
        );
        // The holder again, every form: REENTRY at once, nothing changes.
        for again in [
            format!("{prefix}lock {name}"),
            format!("{prefix}trylock {name}"),
            format!("{prefix}trylock {name} 5000"),
        ] {
            let r = a.call("t1", &again, T);
            assert!(!r.ok && r.value.starts_with("REENTRY:"), "{again}: {r:?}");
        }
        assert_eq!(
            a.call("t1", &format!("{prefix}holdcount {name}"), T).value,
            "1"
        );
        assert_eq!(
            raw_int(s.port(), &format!("EXISTS redisson_lock_queue:{{{name}}}")),
            0
        );
        // The reentrant / fair lock of the name is the same lock.
        let plain = if prefix == "nr" { "" } else { "f" };
        assert_eq!(
            b.call("t1", &format!("{plain}trylock {name}"), T).value,
            "false"
        );
        assert_eq!(
            b.call("t1", &format!("{prefix}trylock {name}"), T).value,
            "false"
        );
        // The other peer waits; the release wakes it.
        b.send(&format!("t1 {prefix}lock {name}"));
        if prefix == "nr" {
            let channel = format!("redisson_lock__channel:{{{name}}}");
            wait_for("the waiter's subscription", || numsub(&s, &channel) > 0);
        } else {
            let queue = format!("LLEN redisson_lock_queue:{{{name}}}");
            wait_for("the waiter's queue entry", || {
                raw_int(s.port(), &queue) == 1
            });
        }
        let unlocked = a.call("t1", &format!("{prefix}unlock {name}"), T);
        assert!(unlocked.ok, "{unlocked:?}");
        let woke = b.reply("t1", &format!("{prefix}lock"), T);
        assert!(woke.ok, "{woke:?}");
        let latency = woke.at as i128 - unlocked.at as i128;
        eprintln!("{prefix}: woke {latency} ms after the unlock");
        assert!(
            latency < WAKE_BOUND_MS,
            "{prefix}: woke {latency} ms after the unlock"
        );
        assert!(b.call("t1", &format!("{prefix}unlock {name}"), T).ok);
        assert_eq!(raw_int(s.port(), &format!("EXISTS {name}")), 0);
    }
}

#[test]
fn group_locks_across_processes_take_all_or_none_and_wake_within_300ms() {
    let s = RedisServer::start();
    let mut a = Peer::start(LOCK_PEER, &s.url(), &[]);
    let mut b = Peer::start(LOCK_PEER, &s.url(), &[]);
    assert_eq!(a.call("t1", "glock seats a,b", T).value, "locked");
    // Overlapping sets: nothing taken; disjoint: held at once by the other process.
    assert_eq!(b.call("t1", "gtrylock seats b,c", T).value, "false");
    assert_eq!(b.call("t1", "gtrylock seats b,c 200", T).value, "false");
    assert_eq!(
        raw_int(s.port(), "HLEN seats"),
        6,
        "a's two values, three fields each"
    );
    assert_eq!(b.call("t2", "gtrylock seats c,d", T).value, "true");
    assert_eq!(raw_int(s.port(), "HLEN seats"), 12);
    // Not the holder: NOT_HELD, nothing changes.
    let r = b.call("t1", "gunlock seats a,b", T);
    assert!(!r.ok && r.value.starts_with("NOT_HELD"), "{r:?}");
    assert_eq!(raw_int(s.port(), "HLEN seats"), 12);
    // b waits for {b, e}; a's release of {a, b} wakes it.
    b.send("t1 glock seats b,e");
    wait_for("the waiter's subscription", || {
        numsub(&s, "redisson_lock__channel:{seats}") > 0
    });
    let unlocked = a.call("t1", "gunlock seats a,b", T);
    assert!(unlocked.ok, "{unlocked:?}");
    let woke = b.reply("t1", "glock", T);
    assert!(woke.ok, "{woke:?}");
    let latency = woke.at as i128 - unlocked.at as i128;
    eprintln!("woke {latency} ms after the unlock");
    assert!(
        latency < WAKE_BOUND_MS,
        "woke {latency} ms after the unlock"
    );
    assert!(b.call("t1", "gunlock seats b,e", T).ok);
    assert!(b.call("t2", "gunlock seats c,d", T).ok);
    assert_eq!(raw_int(s.port(), "EXISTS seats"), 0);
}

#[test]
fn non_reentrant_and_group_locks_wake_across_processes_on_a_cluster_in_every_mode() {
    let c = cluster::RedisCluster::start();
    let seeds = c.seed_urls().join(",");
    for mode in ["auto", "on", "off", "both"] {
        let flags = ["--cluster", "--sharded-pubsub", mode];
        let mut a = Peer::start(LOCK_PEER, &seeds, &flags);
        let mut b = Peer::start(LOCK_PEER, &seeds, &flags);
        for name in c.name_per_master(&format!("nrg-{mode}-")) {
            for (hold, again, wait, release) in [
                (
                    format!("nrlock {name}"),
                    format!("nrtrylock {name} 1000"),
                    "nrlock",
                    format!("nrunlock {name}"),
                ),
                (
                    format!("glock {name} a,b"),
                    format!("gtrylock {name} b,a"),
                    "glock",
                    format!("gunlock {name} a,b"),
                ),
            ] {
                assert_eq!(a.call("t1", &hold, T).value, "locked");
                let r = a.call("t1", &again, T);
                if wait == "nrlock" {
                    assert!(!r.ok && r.value.starts_with("REENTRY:"), "{mode}: {r:?}");
                } else {
                    assert_eq!(r.value, "true", "{mode}: a group re-entry");
                    assert!(a.call("t1", &format!("gunlock {name} b,a"), T).ok);
                    // Another set of the same group by the same (renewed) owner: a hold of
                    // its own, renewed and released on its own.
                    let r = a.call("t1", &format!("gtrylock {name} c"), T);
                    assert_eq!(r.value, "true", "{mode}: another set: {r:?}");
                    let r = a.call("t1", &format!("gunlock {name} c"), T);
                    assert!(r.ok, "{mode}: {r:?}");
                }
                b.send(&format!("t1 {hold}"));
                let channel = format!("redisson_lock__channel:{{{name}}}");
                wait_for("the waiter's subscription", || listeners(&c, &channel) > 0);
                let unlocked = a.call("t1", &release, T);
                assert!(unlocked.ok, "{mode}: {unlocked:?}");
                let woke = b.reply("t1", wait, T);
                assert!(woke.ok, "{mode}: {woke:?}");
                let latency = woke.at as i128 - unlocked.at as i128;
                eprintln!("{mode} {wait}: woke {latency} ms after the unlock");
                assert!(
                    latency < WAKE_BOUND_MS,
                    "{mode} {wait}: woke {latency} ms after the unlock"
                );
                assert!(b.call("t1", &release, T).ok);
            }
        }
    }
}

/// The bound for a wake-up after the release that allows it.
const WAKE_BOUND_MS: i128 = 300;

/// Every listener of `channel` on a cluster, sharded and classic (see [`cluster_listeners`]).
fn listeners(c: &cluster::RedisCluster, channel: &str) -> i64 {
    let (sharded, classic) = cluster_listeners(c, channel);
    sharded + classic
}
