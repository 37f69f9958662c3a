//! Raw Redis state and published messages after every RLock operation match the protocol spec
//! (§4), and a simulated Java holder (raw commands) interoperates with the crate.

use redisson_lock_test_kit as common;

use std::time::Duration;

use tokio::time::Instant;

use common::{Admin, Recorder, RedisServer};
use fred::{interfaces::KeysInterface, types::Value};
use redisson_lock::{Client, Config, Error, Ttl, UnlockOutcome};

async fn setup() -> (RedisServer, Client, Admin) {
    let server = RedisServer::start();
    let client = Client::connect(&server.url(), Config::default())
        .await
        .unwrap();
    let admin = Admin::connect(&server.url()).await;
    (server, client, admin)
}

fn channel(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

#[tokio::test]
async fn client_id_is_a_lowercase_v4_uuid_and_fields_are_uuid_colon_owner() {
    let (_s, client, _a) = setup().await;
    let id = client.id();
    let parsed = uuid::Uuid::parse_str(id).unwrap();
    assert_eq!(parsed.get_version_num(), 4);
    assert_eq!(id, id.to_lowercase());
    assert_eq!(id.len(), 36);
    let lock = client.get_lock("x");
    assert_eq!(lock.owner_field(), format!("{id}:{}", lock.owner().id()));
}

#[tokio::test]
async fn every_rlock_operation_leaves_the_spec_state() {
    let (s, client, admin) = setup().await;
    let name = "wire:rlock";
    let mut rec = Recorder::subscribe(&s.url(), &[&channel(name)]).await;
    let lock = client.get_lock(name);
    let f = lock.owner_field().to_string();

    // Watchdog acquisition: hash with exactly one field = 1, TTL = watchdog timeout.
    let g1 = lock.lock().await.unwrap();
    assert_eq!(admin.type_of(name).await, "hash");
    assert_eq!(
        admin.hgetall(name).await,
        [(f.clone(), "1".to_string())].into()
    );
    let ttl = admin.pttl(name).await;
    assert!((29_000..=30_000).contains(&ttl), "ttl {ttl}");

    // Re-entry: count 2, TTL re-armed.
    let g2 = lock.lock().await.unwrap();
    assert_eq!(
        admin.hgetall(name).await,
        [(f.clone(), "2".to_string())].into()
    );
    assert_eq!(lock.hold_count().await.unwrap(), 2);

    // Partial release: count 1, TTL re-armed, no message.
    admin
        .redis
        .pexpire::<i64, _>(name, 5_000, None)
        .await
        .unwrap();
    assert_eq!(g2.unlock().await.unwrap(), UnlockOutcome::StillHeld);
    assert_eq!(
        admin.hgetall(name).await,
        [(f.clone(), "1".to_string())].into()
    );
    assert!(
        admin.pttl(name).await > 29_000,
        "partial release re-arms the TTL"
    );
    assert!(rec.drain(Duration::from_millis(200)).await.is_empty());

    // Full release: key gone, exactly one message "0" on the unlock channel.
    assert_eq!(g1.unlock().await.unwrap(), UnlockOutcome::Released);
    assert!(!admin.exists(name).await);
    assert_eq!(admin.pttl(name).await, -2);
    assert_eq!(
        rec.drain(Duration::from_millis(300)).await,
        vec![(channel(name), "0".to_string())]
    );

    // No unlock latch key lingers once the unlock has answered.
    assert!(
        common::eventually(Duration::from_secs(2), || async {
            let keys: Vec<String> = admin
                .cmd("KEYS", vec!["redisson_unlock_latch:*".into()])
                .await
                .unwrap()
                .into_array()
                .into_iter()
                .filter_map(|v| v.as_string())
                .collect();
            keys.is_empty()
        })
        .await
    );
}

#[tokio::test]
async fn leased_lock_ttl_and_partial_release_rearm_to_the_lease() {
    // Redisson testRemainTimeToLive2 / testRemainTimeToLive.
    let (_s, client, admin) = setup().await;
    let name = "wire:leased";
    let lock = client.get_lock(name);
    let lease = Duration::from_secs(10);
    let a = lock.lock_with_lease(lease).await.unwrap();
    let b = lock.lock_with_lease(lease).await.unwrap();
    let _c = lock.lock_with_lease(lease).await.unwrap();
    admin
        .redis
        .pexpire::<i64, _>(name, 4_000, None)
        .await
        .unwrap();
    b.unlock().await.unwrap();
    a.unlock().await.unwrap();
    let ttl = admin.pttl(name).await;
    assert!((9_000..=10_000).contains(&ttl), "ttl {ttl}");
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    match lock.remaining_ttl().await.unwrap() {
        Ttl::Expires(d) => assert!(d > Duration::from_secs(9)),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        client.stats().watchdog_holds,
        0,
        "leased locks are never renewed"
    );
    drop(_c);
    assert!(
        common::eventually(Duration::from_secs(2), || async {
            !admin.exists(name).await
        })
        .await
    );
    assert_eq!(lock.remaining_ttl().await.unwrap(), Ttl::NotLocked);
}

#[tokio::test]
async fn force_unlock_deletes_and_publishes_once() {
    let (s, client, admin) = setup().await;
    let name = "wire:force";
    let mut rec = Recorder::subscribe(&s.url(), &[&channel(name)]).await;
    let holder = client.get_lock(name);
    let g = holder.lock().await.unwrap();
    let other = client.get_lock(name);
    assert!(other.force_unlock().await.unwrap());
    assert!(!admin.exists(name).await);
    assert!(g.is_lost(), "a holder in this client is told at once");
    assert!(!other.force_unlock().await.unwrap());
    assert_eq!(
        rec.drain(Duration::from_millis(300)).await,
        vec![(channel(name), "0".to_string())]
    );
    assert!(matches!(g.unlock().await, Err(Error::NotHeld { .. })));
}

#[tokio::test]
async fn simulated_java_holder_blocks_and_its_release_wakes_the_waiter_by_its_message() {
    let (_s, client, admin) = setup().await;
    let name = "wire:java";
    let java_field = "71b96ce8-2746-4c4e-9f0a-6d1c0e3b2a55:57";
    admin.java_hold(name, java_field, 30_000).await;

    let lock = client.get_lock(name);
    assert!(lock.try_lock().await.unwrap().is_none());
    assert!(lock.is_locked().await.unwrap());
    assert!(!lock.is_held_by_current().await.unwrap());

    let waiter = tokio::spawn(async move { lock.lock().await.map(|g| (Instant::now(), g)) });
    // Wait until the waiter is subscribed and asleep on its latch.
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            admin.numsub(&channel(name)).await == 1
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !waiter.is_finished(),
        "the waiter must not get a lock held by Java"
    );

    let released = Instant::now();
    admin.java_release(name).await;
    let guard = common::woke_within(waiter, released, common::WOKEN_BY_MESSAGE).await;
    assert_eq!(
        admin.hgetall(name).await,
        [(guard.owner_field().to_string(), "1".to_string())].into()
    );
}

#[tokio::test]
async fn crate_release_wakes_a_raw_subscriber_like_a_java_waiter() {
    let (s, client, _admin) = setup().await;
    let name = "wire:to-java";
    let mut rec = Recorder::subscribe(&s.url(), &[&channel(name)]).await;
    let g = client.get_lock(name).lock().await.unwrap();
    drop(g); // released in the background by the guard
    let msgs = rec.drain(Duration::from_millis(500)).await;
    assert_eq!(msgs, vec![(channel(name), "0".to_string())]);
}

#[tokio::test]
async fn names_with_braces_follow_the_brace_rule() {
    let (s, client, admin) = setup().await;
    let name = "{test}:abc:key";
    let chan = "redisson_lock__channel:{test}:abc:key";
    let mut rec = Recorder::subscribe(&s.url(), &[chan]).await;
    let g = client.get_lock(name).lock().await.unwrap();
    assert_eq!(admin.type_of(name).await, "hash");
    g.unlock().await.unwrap();
    assert_eq!(
        rec.drain(Duration::from_millis(300)).await,
        vec![(chan.to_string(), "0".to_string())]
    );
}

#[tokio::test]
async fn key_prefix_maps_every_key() {
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), Config::default().key_prefix("app:"))
        .await
        .unwrap();
    let admin = Admin::connect(&s.url()).await;
    let lock = client.get_lock("orders");
    assert_eq!(lock.name(), "orders");
    assert_eq!(lock.raw_name(), "app:orders");
    let _g = lock.lock().await.unwrap();
    assert_eq!(admin.type_of("app:orders").await, "hash");
    assert!(!admin.exists("orders").await);
}

#[tokio::test]
async fn operations_succeed_after_script_flush() {
    let (_s, client, admin) = setup().await;
    let lock = client.get_lock("wire:noscript");
    lock.lock().await.unwrap().unlock().await.unwrap();
    admin.cmd("SCRIPT", vec!["FLUSH".into()]).await.unwrap();
    let g = lock.lock().await.unwrap();
    admin.cmd("SCRIPT", vec!["FLUSH".into()]).await.unwrap();
    assert_eq!(g.unlock().await.unwrap(), UnlockOutcome::Released);
    admin.cmd("SCRIPT", vec!["FLUSH".into()]).await.unwrap();
    assert!(!lock.force_unlock().await.unwrap());
}

// ---- bad inputs: a typed error and Redis unchanged ----

#[tokio::test]
async fn empty_name_is_invalid_and_sends_nothing() {
    let (_s, client, admin) = setup().await;
    admin.reset_stats().await;
    let lock = client.get_lock("");
    assert!(matches!(lock.lock().await, Err(Error::InvalidArgument(_))));
    assert!(matches!(
        lock.try_lock().await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        lock.unlock().await,
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        lock.is_locked().await,
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(admin.command_calls("evalsha").await, 0);
    let keys: Value = admin.cmd("DBSIZE", vec![]).await.unwrap();
    assert_eq!(keys.as_i64(), Some(0));
}

#[tokio::test]
async fn zero_tiny_and_overflowing_leases_are_rejected() {
    let (_s, client, admin) = setup().await;
    let name = "bad:lease";
    let lock = client.get_lock(name);
    for lease in [
        Duration::ZERO,
        Duration::from_micros(500),
        Duration::MAX,
        Duration::from_secs(u64::MAX / 1000),
    ] {
        assert!(
            matches!(
                lock.lock_with_lease(lease).await,
                Err(Error::InvalidArgument(_))
            ),
            "{lease:?}"
        );
        assert!(matches!(
            lock.try_lock_with_lease(Duration::ZERO, lease).await,
            Err(Error::InvalidArgument(_))
        ));
        assert!(!admin.exists(name).await, "no lock without TTL may be left");
    }
    // The largest accepted lease works and leaves a TTL.
    let g = lock
        .lock_with_lease(Duration::from_millis(redisson_lock::MAX_MILLIS))
        .await
        .unwrap();
    assert!(admin.pttl(name).await > 0);
    g.unlock().await.unwrap();
}

#[tokio::test]
async fn wrongtype_key_is_an_error_not_an_endless_wait() {
    let (_s, client, admin) = setup().await;
    let name = "bad:string";
    let _: () = admin
        .redis
        .set(name, "not a lock", None, None, false)
        .await
        .unwrap();
    let lock = client.get_lock(name);
    let started = Instant::now();
    let r = tokio::time::timeout(Duration::from_secs(5), lock.lock())
        .await
        .expect("must not wait");
    assert_eq!(r.unwrap_err(), Error::WrongType { lock: name.into() });
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(matches!(
        lock.try_lock_for(Duration::from_secs(3)).await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(lock.unlock().await, Err(Error::WrongType { .. })));
    assert!(matches!(
        lock.force_unlock().await,
        Err(Error::WrongType { .. })
    ));
    assert!(matches!(
        lock.hold_count().await,
        Err(Error::WrongType { .. })
    ));
    assert_eq!(client.stats().subscribed_channels, 0);
    assert_eq!(client.stats().watchdog_holds, 0);
    let v: String = admin.redis.get(name).await.unwrap();
    assert_eq!(v, "not a lock");
    assert_eq!(admin.pttl(name).await, -1);
}

#[tokio::test]
async fn unlock_by_non_owner_or_after_expiry_is_not_held_and_changes_nothing() {
    let (s, client, admin) = setup().await;
    let mut rec = Recorder::subscribe(&s.url(), &[&channel("bad:owner")]).await;
    let holder = client.get_lock_with_owner("bad:owner", redisson_lock::Owner::new());
    let g = holder
        .lock_with_lease(Duration::from_secs(20))
        .await
        .unwrap();
    let before = admin.hgetall("bad:owner").await;
    let intruder = client.get_lock_with_owner("bad:owner", redisson_lock::Owner::new());
    match intruder.unlock().await {
        Err(Error::NotHeld { lock, owner }) => {
            assert_eq!(lock, "bad:owner");
            assert_eq!(owner, intruder.owner_field());
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(admin.hgetall("bad:owner").await, before);
    assert!(admin.pttl("bad:owner").await > 19_000);
    assert!(
        rec.drain(Duration::from_millis(200)).await.is_empty(),
        "no message"
    );
    g.unlock().await.unwrap();
    // One unlock too many.
    assert!(matches!(holder.unlock().await, Err(Error::NotHeld { .. })));

    // After expiry.
    let short = holder
        .lock_with_lease(Duration::from_millis(100))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(short.is_lost());
    assert!(matches!(short.unlock().await, Err(Error::NotHeld { .. })));
}

#[tokio::test]
async fn every_kind_applies_the_brace_rule_to_every_derived_name() {
    // A name that already contains '{' gets no extra braces anywhere (protocol §2.3).
    let (s, client, admin) = setup().await;
    let name = "{t}:x";
    let mut rec = Recorder::subscribe(
        &s.url(),
        &["redisson_lock__channel:{t}:x", "redisson_rwlock:{t}:x"],
    )
    .await;

    let g = client
        .get_fenced_lock_with_owner(name, redisson_lock::Owner::new())
        .lock()
        .await
        .unwrap();
    assert!(admin.exists("redisson_lock_token:{t}:x").await);
    g.unlock().await.unwrap();

    let holder = client.get_fair_lock_with_owner(name, redisson_lock::Owner::new());
    let h = holder.lock().await.unwrap();
    let waiter = client.get_fair_lock_with_owner(name, redisson_lock::Owner::new());
    let wf = waiter.owner_field().to_string();
    assert!(waiter
        .try_lock_for(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    let task = tokio::spawn(async move { waiter.try_lock_for(Duration::from_secs(5)).await });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            admin.exists("redisson_lock_queue:{t}:x").await
                && admin.exists("redisson_lock_timeout:{t}:x").await
        })
        .await
    );
    let mut fair_rec =
        Recorder::subscribe(&s.url(), &[&format!("redisson_lock__channel:{{t}}:x:{wf}")]).await;
    h.unlock().await.unwrap();
    assert!(task.await.unwrap().unwrap().is_some());
    assert_eq!(fair_rec.drain(Duration::from_millis(300)).await.len(), 1);
    client
        .get_fair_lock_with_owner(name, redisson_lock::Owner::new())
        .force_unlock()
        .await
        .unwrap();

    let rw = client.get_read_write_lock_with_owner(name, redisson_lock::Owner::new());
    let f = rw.read_lock().owner_field().to_string();
    let r = rw.read_lock().lock().await.unwrap();
    assert!(admin.exists(&format!("{{t}}:x:{f}:rwlock_timeout:1")).await);
    r.unlock().await.unwrap();

    let msgs = rec.drain(Duration::from_millis(300)).await;
    assert!(msgs.contains(&("redisson_lock__channel:{t}:x".to_string(), "0".to_string())));
    assert!(msgs.contains(&("redisson_rwlock:{t}:x".to_string(), "0".to_string())));
}

#[tokio::test]
async fn non_reentrant_and_group_locks_apply_the_brace_rule_to_their_channel() {
    // Sync protocol §5, §6: the reentrant lock's channel for both (no extra braces for a name
    // that has a '{'); the unlock latch leaves no key behind.
    let (s, client, admin) = setup().await;
    let name = "{t}:nrg";
    let mut rec = Recorder::subscribe(&s.url(), &["redisson_lock__channel:{t}:nrg"]).await;
    let nr = client.get_non_reentrant_lock(name);
    let g = nr.lock().await.unwrap();
    assert_eq!(
        admin.hgetall(name).await,
        [(nr.owner_field().to_string(), "1".to_string())].into()
    );
    assert_eq!(
        nr.lock().await.unwrap_err().kind(),
        redisson_lock::ErrorKind::Reentry
    );
    g.unlock().await.unwrap();
    let group = client.get_group_lock(name, ["v"]);
    let g = group.lock().await.unwrap();
    let field = redisson_lock::GroupLock::value_field("v");
    let f = group.owner_field().to_string();
    let fields = admin.hgetall(name).await;
    assert_eq!(fields.len(), 3, "{fields:?}");
    assert_eq!(fields[&field], f);
    assert_eq!(fields[&format!("{field}:{f}:lock_count")], "1");
    g.unlock().await.unwrap();
    assert!(!admin.exists(name).await);
    assert_eq!(
        rec.drain(Duration::from_millis(300)).await,
        vec![
            (
                "redisson_lock__channel:{t}:nrg".to_string(),
                "0".to_string()
            ),
            (
                "redisson_lock__channel:{t}:nrg".to_string(),
                "0".to_string()
            )
        ]
    );
    assert!(
        common::eventually(Duration::from_secs(2), || async {
            admin
                .cmd("KEYS", vec!["redisson_unlock_latch:*".into()])
                .await
                .unwrap()
                .into_array()
                .is_empty()
        })
        .await
    );
}

#[tokio::test]
async fn a_retried_unlock_with_the_same_request_id_is_answered_by_the_latch() {
    // Fault S11: the reply of an unlock is lost and the unlock is sent again with the same
    // request id. The latch must answer the replay: no double decrement, no second message.
    let (s, client, admin) = setup().await;
    let name = "wire:latch";
    let mut rec = Recorder::subscribe(&s.url(), &[&channel(name)]).await;
    let lock = client.get_lock(name);
    lock.lock().await.unwrap().keep();
    lock.lock().await.unwrap().keep();
    // The script as the registry sends it: notify() prepended.
    let release = concat!(
        include_str!("../lua/notify.lua"),
        "\n",
        include_str!("../lua/lock_release.lua")
    );
    let run = |latch: &'static str| {
        let keys: Vec<Value> = vec![name.into(), channel(name).into(), latch.into()];
        let args: Vec<Value> = vec![
            "0".into(),
            "30000".into(),
            lock.owner_field().into(),
            "publish".into(),
            "10000".into(),
        ];
        let mut all = vec![Value::from(release), Value::from(3)];
        all.extend(keys);
        all.extend(args);
        admin.cmd("EVAL", all)
    };
    let latch_a = "redisson_unlock_latch:{wire:latch}:aaaa";
    assert_eq!(run(latch_a).await.unwrap().as_i64(), Some(0));
    assert_eq!(
        run(latch_a).await.unwrap().as_i64(),
        Some(0),
        "replayed, not re-run"
    );
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    assert!(rec.drain(Duration::from_millis(200)).await.is_empty());
    let latch_b = "redisson_unlock_latch:{wire:latch}:bbbb";
    assert_eq!(run(latch_b).await.unwrap().as_i64(), Some(1));
    assert_eq!(run(latch_b).await.unwrap().as_i64(), Some(1));
    assert!(!admin.exists(name).await);
    assert_eq!(
        rec.drain(Duration::from_millis(300)).await.len(),
        1,
        "one message only"
    );
}

#[test]
fn a_guard_dropped_on_a_thread_without_a_runtime_is_released_without_panicking() {
    // Fault S19: Drop needs no runtime on the current thread; the client's runtime does it.
    let s = RedisServer::start();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let (client, guard) = rt.block_on(async {
        let c = Client::connect(&s.url(), Config::default()).await.unwrap();
        let g = c.get_lock("wire:drop").lock().await.unwrap();
        (c, g)
    });
    std::thread::spawn(move || drop(guard))
        .join()
        .expect("drop never panics");
    let freed = rt.block_on(async {
        common::eventually(Duration::from_secs(5), || async {
            !client.get_lock("wire:drop").is_locked().await.unwrap()
        })
        .await
    });
    assert!(freed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_lock_and_unlock_run_the_commands_of_a_free_lock_only() {
    // The fenced acquisition is L-ACQ plus the token's INCR: on a free lock no owner check
    // and no TTL read; its release is L-REL.
    let (_s, client, admin) = setup().await;
    let lock = client.get_fenced_lock("wire:fenced-cost");
    admin.reset_stats().await;
    let pairs = 200;
    let mut last = 0;
    for _ in 0..pairs {
        let guard = lock.lock().await.unwrap();
        let token = guard.token();
        assert!(token > last, "a new token each hold");
        last = token;
        guard.unlock().await.unwrap();
    }
    let calls = admin.all_command_calls().await;
    assert_runs_per_pair(
        &calls,
        pairs,
        &[
            ("exists", 1),
            ("incr", 1),
            ("hexists", 1),
            ("pttl", 0),
            ("hincrby", 2),
            ("pexpire", 1),
            ("del", 1),
            ("publish", 1),
        ],
    );
}

/// Asserts that each of `expected`'s commands ran `per` times a lock + unlock over `pairs`
/// (`INFO commandstats` counts the commands scripts run).
fn assert_runs_per_pair(
    calls: &std::collections::HashMap<String, u64>,
    pairs: u64,
    expected: &[(&str, u64)],
) {
    for &(command, per) in expected {
        let ran = calls.get(command).copied().unwrap_or(0);
        assert_eq!(ran, per * pairs, "{command}: {calls:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_uncontended_lock_and_unlock_costs_at_most_two_point_one_server_commands() {
    // Acquire and release are one script call each; the unlock latches are cleaned up in
    // batches (one UNLINK for many releases) instead of one DEL per release.
    let (_s, client, admin) = setup().await;
    let lock = client.get_lock("wire:cost");
    admin.reset_stats().await;
    let pairs = 1000;
    for _ in 0..pairs {
        lock.lock().await.unwrap().unlock().await.unwrap();
    }
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            let keys = admin
                .cmd("KEYS", vec!["redisson_unlock_latch:*".into()])
                .await
                .unwrap()
                .into_array();
            keys.is_empty()
        })
        .await,
        "every latch is cleaned up"
    );
    // commandstats also counts the commands scripts run; the client itself sends only script
    // calls, the batched UNLINKs and (for subscriptions) PINGs. The release script's own DEL
    // runs once per full release, so a per-release DEL from the client would show here too.
    let calls = admin.all_command_calls().await;
    let count = |name: &str| calls.get(name).copied().unwrap_or(0);
    assert_eq!(count("evalsha"), 2 * pairs);
    assert_eq!(count("eval"), 0);
    assert_eq!(count("del"), pairs, "only the release script's DEL");
    // The scripts' own work: a fresh acquisition is EXISTS, HINCRBY, PEXPIRE (no owner check
    // and no TTL read while the lock is free); a full release is GET (the receipt), HEXISTS,
    // HINCRBY, DEL, PUBLISH, SET (the receipt).
    assert_runs_per_pair(
        &calls,
        pairs,
        &[
            ("exists", 1),
            ("hexists", 1),
            ("pttl", 0),
            ("hincrby", 2),
            ("pexpire", 1),
            ("get", 1),
            ("publish", 1),
            ("set", 1),
        ],
    );
    // No count read (`HGET`) either: after a full release the client knows its owner holds
    // nothing, so the next acquisition asks nothing first.
    assert_eq!(count("hget"), 0, "{calls:?}");
    let sent = count("evalsha") + count("eval") + count("unlink") + count("ping");
    let per_pair = sent as f64 / pairs as f64;
    assert!(
        per_pair <= 2.1,
        "{per_pair:.3} commands per pair: {calls:?}"
    );
}
