//! Waiting without busy loops: the shared subscription, its barrier, cancellation and reconnects.

use common::backend_tests;
use redisson_lock_test_kit as common;

use std::{sync::Arc, time::Duration};

use common::{Admin, Backend, RedisServer};
use redisson_lock::{Client, Config};
use tokio::time::Instant;

fn channel(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

async fn every_waiter_is_woken_by_the_message_despite_an_immediate_unlock(b: Backend) {
    // 300 rounds: a waiter subscribes and the holder (another client) unlocks right away. The
    // barrier (PING after SUBSCRIBE) plus the re-attempt after subscribing means no waiter has
    // to sit out the 30 s TTL bound.
    let holder_client = b.client().await;
    let waiter_client = b.client().await;
    let mut slowest = Duration::ZERO;
    for round in 0..300 {
        // A new name (a new slot on a cluster) per round.
        let name = b.name(&format!("barrier:{round}"));
        let holder = holder_client.get_lock(&name);
        let guard = holder.lock().await.unwrap();
        let waiter = waiter_client.get_lock(&name);
        let started = Instant::now();
        let task = tokio::spawn(async move { waiter.lock().await.map(|g| (Instant::now(), g)) });
        // Unlock as soon as the waiter has announced its subscription locally.
        while waiter_client.get_lock(&name).local_waiters() == 0 && !task.is_finished() {
            tokio::task::yield_now().await;
        }
        guard.unlock().await.unwrap();
        let (at, g) = tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .unwrap_or_else(|_| panic!("round {round}: waiter slept until its TTL bound"))
            .unwrap()
            .unwrap();
        slowest = slowest.max(at - started);
        g.unlock().await.unwrap();
    }
    // The TTL bound is 30 s; every wake came from a message.
    assert!(slowest < Duration::from_secs(5), "slowest wake {slowest:?}");
}

async fn a_thousand_waiters_share_one_subscription_and_dropped_waiters_leave_nothing(b: Backend) {
    let client = b.client().await;
    let holder_client = b.client().await;
    let admin = b.admin().await;
    let name = &b.name("cancel:one");
    let guard = holder_client.get_lock(name).lock().await.unwrap();

    let mut tasks = Vec::new();
    for _ in 0..1000 {
        let lock = client.get_lock(name);
        tasks.push(tokio::spawn(async move {
            lock.try_lock_for(Duration::from_secs(60)).await
        }));
    }
    assert!(
        common::eventually(Duration::from_secs(20), || async {
            client.get_lock(name).local_waiters() == 1000
        })
        .await,
        "waiters: {}",
        client.get_lock(name).local_waiters()
    );
    assert_eq!(client.stats().subscribed_channels, 1);
    assert_eq!(
        b.subscribers(&channel(name)).await,
        1,
        "exactly one subscription"
    );

    for t in &tasks {
        t.abort();
    }
    for t in tasks {
        assert!(t.await.unwrap_err().is_cancelled());
    }
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            b.subscribers(&channel(name)).await == 0
        })
        .await
    );
    assert_eq!(client.stats().subscribed_channels, 0);
    assert_eq!(client.get_lock(name).local_waiters(), 0);
    assert_eq!(client.stats().watchdog_holds, 0);
    // The lock still belongs to the holder alone.
    assert_eq!(admin.hgetall(name).await.len(), 1);
    assert!(admin.hgetall(name).await.contains_key(guard.owner_field()));
}

async fn a_future_dropped_mid_acquire_never_leaves_a_lock_behind(b: Backend) {
    // Cancels try_lock at many points (before, during and after the script round trip), with
    // and without an earlier hold by the same owner; the pre-existing count must survive.
    let client = b.client().await;
    let admin = b.admin().await;
    let name = &b.name("cancel:mid");
    let lock = Arc::new(client.get_lock(name));
    for i in 0..200u64 {
        let pre = if i % 2 == 0 {
            Some(lock.lock().await.unwrap())
        } else {
            None
        };
        let l = lock.clone();
        let delay = Duration::from_micros((i * 37) % 400);
        let _ = tokio::time::timeout(delay, async move { l.try_lock().await }).await;
        let expected = u64::from(pre.is_some());
        let ok = common::eventually(Duration::from_secs(2), || async {
            lock.hold_count().await.unwrap() == expected
                && client.stats().watchdog_holds == expected as usize
        })
        .await;
        assert!(
            ok,
            "iteration {i}: count {}",
            lock.hold_count().await.unwrap()
        );
        drop(pre);
        assert!(
            common::eventually(Duration::from_secs(2), || async {
                !admin.exists(name).await
            })
            .await
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_still_wake_promptly_after_the_subscriber_connection_is_killed() {
    // Standalone only: CLIENT KILL TYPE pubsub on the shared cluster's nodes would cut every
    // parallel test's subscriber, and nothing tells this client's connection apart.
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), Config::default()).await.unwrap();
    let holder_client = Client::connect(&s.url(), Config::default()).await.unwrap();
    let admin = Admin::connect(&s.url()).await;
    let name = "reconnect:k";
    let guard = holder_client.get_lock(name).lock().await.unwrap();
    let waiter = client.get_lock(name);
    let task = tokio::spawn(async move { waiter.lock().await.map(|g| (Instant::now(), g)) });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            admin.numsub(&channel(name)).await == 1
        })
        .await
    );

    admin
        .cmd(
            "CLIENT",
            vec!["KILL".into(), "TYPE".into(), "pubsub".into()],
        )
        .await
        .unwrap();
    // The registry subscribes again on reconnect.
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            admin.numsub(&channel(name)).await == 1
        })
        .await,
        "channel re-subscribed after reconnect"
    );
    let released = Instant::now();
    guard.unlock().await.unwrap();
    let _g = common::woke_within(task, released, Duration::from_secs(2)).await;
}

async fn a_waiter_that_misses_every_message_still_wakes_by_its_ttl_bound(b: Backend) {
    // The holder's key is deleted without any PUBLISH (as a spin lock or an expiry would): the
    // waiter re-polls after the TTL it was given.
    let client = b.client().await;
    let admin = b.admin().await;
    let name = &b.name("ttl:bound");
    admin
        .java_hold(name, "00000000-0000-4000-8000-000000000000:1", 800)
        .await;
    let started = Instant::now();
    let g = client
        .get_lock(name)
        .try_lock_for(Duration::from_secs(10))
        .await
        .unwrap();
    assert!(g.is_some());
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(700), "{waited:?}");
    assert!(waited < Duration::from_secs(5), "{waited:?}");
}

backend_tests!(
    a_thousand_waiters_share_one_subscription_and_dropped_waiters_leave_nothing,
    a_future_dropped_mid_acquire_never_leaves_a_lock_behind,
    a_waiter_that_misses_every_message_still_wakes_by_its_ttl_bound,
);

// The wake-up by the unlock message is about any deployment: also over TLS and through
// Sentinel.
backend_tests!(any: every_waiter_is_woken_by_the_message_despite_an_immediate_unlock);

/// `ACL SETUSER u <args>`.
fn acl_u(args: &[&str]) -> Vec<fred::types::Value> {
    let mut v: Vec<fred::types::Value> = vec!["SETUSER".into(), "u".into()];
    v.extend(args.iter().map(|a| fred::types::Value::from(*a)));
    v
}

/// An admin connection to `s` and the URL of a user `u` (password `pw`) who may do anything,
/// for tests that then take permissions away from it.
async fn user_u(s: &RedisServer) -> (Admin, String) {
    let admin = Admin::connect(&s.url()).await;
    admin
        .cmd("ACL", acl_u(&["on", ">pw", "~*", "&*", "+@all"]))
        .await
        .unwrap();
    (admin, format!("redis://u:pw@127.0.0.1:{}", s.port()))
}

/// A re-subscription after a reconnect that fails (here: the user may not listen on the channel
/// for a while, so the server refuses the `SUBSCRIBE`) is retried with back-off on the same
/// latch: the waiter already asleep, and one that joins meanwhile, are woken by the next
/// release once the channel may be listened on again (not after the lock's 60 s TTL).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_resubscription_is_retried_and_its_sleeping_waiters_hear_the_next_release() {
    let s = RedisServer::start();
    let (admin, url) = user_u(&s).await;
    let client = Client::connect(&url, Config::default()).await.unwrap();
    let holder_client = Client::connect(&s.url(), Config::default()).await.unwrap();
    let name = "resub:k";
    let guard = holder_client
        .get_lock(name)
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    let first = client.get_lock(name);
    let first = tokio::spawn(async move { first.lock().await.map(|g| (Instant::now(), g)) });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            admin.numsub(&channel(name)).await == 1
        })
        .await
    );
    // Redis 7 disconnects a subscriber from channels its user may no longer listen on; the
    // client reconnects and its re-subscription is refused.
    admin.cmd("ACL", acl_u(&["resetchannels"])).await.unwrap();
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            admin.numsub(&channel(name)).await == 0
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    // A second waiter joins while the channel cannot be subscribed.
    let second = client.get_lock(name);
    let second = tokio::spawn(async move {
        let g = second.lock().await;
        g.map(|g| (Instant::now(), g))
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    admin.cmd("ACL", acl_u(&["allchannels"])).await.unwrap();
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            admin.numsub(&channel(name)).await == 1
        })
        .await,
        "subscribed again once allowed"
    );
    let released = Instant::now();
    guard.unlock().await.unwrap();
    // One of them is woken by the release, the other by the first one's release.
    let (mut first, mut second) = (first, second);
    let (result, was_first) = tokio::time::timeout(Duration::from_secs(5), async {
        tokio::select! {
            r = &mut first => (r, true),
            r = &mut second => (r, false),
        }
    })
    .await
    .expect("a waiter woken by the release, not by the lock's 60 s TTL");
    let (at, g) = result.unwrap().unwrap();
    assert!(at - released < Duration::from_secs(5));
    g.unlock().await.unwrap();
    let other = if was_first { second } else { first };
    let (_, g) = tokio::time::timeout(Duration::from_secs(5), other)
        .await
        .expect("the other waiter woken by that release")
        .unwrap()
        .unwrap();
    g.unlock().await.unwrap();
}

/// A re-subscription whose permission question cannot be answered is retried, not sent
/// blind. The registry asks the server (on the command connection) whether the channel may be
/// listened on before it subscribes, because a refused `SUBSCRIBE`'s error reply is not tied
/// to it on the subscriber connection: when it misses the barrier, fred drops it and the
/// channel would pass for subscribed while nothing listens (deaf until a reconnect; the
/// registry now also counts the channel's subscribers after a re-subscription). Here the
/// question fails (the user may run the lock's acquire script but not the permission script)
/// exactly while the channel is refused: once both are allowed again the channel must be
/// subscribed and the waiter hear the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resubscription_whose_permission_cannot_be_asked_is_retried_not_sent_blind() {
    refused_for_a_while(
        Config::default(),
        "resub:blind",
        None,
        Duration::from_millis(1500),
    )
    .await;
}

/// On a sharded cluster, a re-subscription is made per slot: a shard that refuses it (here its
/// node stops letting the client's user listen) fails only its own channels, which are retried
/// until it accepts again; the waiters of every other shard hear their releases at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_that_refuses_its_resubscription_does_not_deafen_the_others() {
    use common::cluster::{RedisCluster, Reply};
    let c = RedisCluster::shared();
    let user = format!("resub{}", std::process::id());
    let acl = |port: u16, args: &[&str]| {
        let mut v = vec!["ACL".to_owned(), "SETUSER".to_owned(), user.clone()];
        v.extend(args.iter().map(|a| a.to_string()));
        let r = RedisCluster::cmd(port, &v);
        assert!(!r.is_error(), "{}", r.text());
    };
    for port in c.live_ports() {
        acl(port, &["on", ">pw", "~*", "&*", "+@all"]);
    }
    let shard_subscribers = |name: &str| {
        let channel = channel(name);
        let owner = c.master_for_key(name);
        RedisCluster::cmd(owner, &["PUBSUB", "SHARDNUMSUB", channel.as_str()])
            .items()
            .get(1)
            .and_then(Reply::int)
            .unwrap_or(0)
    };
    let masters = c.masters();
    let refusing = masters[0];
    let prefix = format!("{user}-");
    // Several channels on the other shards, one on the refusing shard: the channels are
    // re-subscribed in no particular order.
    let mut names: Vec<String> = masters[1..]
        .iter()
        .flat_map(|&m| c.names_on(m, &format!("{prefix}ok-"), 4))
        .collect();
    let refused = c.names_on(refusing, &format!("{prefix}no-"), 1).remove(0);
    names.push(refused.clone());
    let seeds: Vec<String> = c
        .seed_urls()
        .iter()
        .map(|u| u.replacen("redis://", &format!("redis://{user}:pw@"), 1))
        .collect();
    let seeds: Vec<&str> = seeds.iter().map(String::as_str).collect();
    let config =
        Config::default().sharded_subscription_mode(redisson_lock::ShardedSubscriptionMode::On);
    let client = Client::connect_cluster(&seeds, config.clone())
        .await
        .unwrap();
    let plain = c.seed_urls();
    let plain: Vec<&str> = plain.iter().map(String::as_str).collect();
    let holder = Client::connect_cluster(&plain, config).await.unwrap();
    let mut held = Vec::new();
    let mut waiters = Vec::new();
    for name in &names {
        held.push(
            holder
                .get_lock(name)
                .lock_with_lease(Duration::from_secs(60))
                .await
                .unwrap(),
        );
        let lock = client.get_lock(name);
        waiters.push(tokio::spawn(async move {
            lock.lock().await.map(|g| (Instant::now(), g))
        }));
    }
    for name in &names {
        assert!(
            common::eventually(Duration::from_secs(10), || async {
                shard_subscribers(name) == 1
            })
            .await,
            "{name} subscribed"
        );
    }
    // One node stops letting the user listen, and every node drops the client's connections
    // (as after a network blip); the client reconnects and subscribes every channel again.
    acl(refusing, &["resetchannels"]);
    for port in c.live_ports() {
        let killed = RedisCluster::cmd(port, &["CLIENT", "KILL", "USER", user.as_str()]);
        assert!(!killed.is_error(), "{}", killed.text());
    }
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            shard_subscribers(&refused) == 0
        })
        .await,
        "the refused channel lost its subscription"
    );
    for name in &names[..names.len() - 1] {
        assert!(
            common::eventually(Duration::from_secs(10), || async {
                shard_subscribers(name) == 1
            })
            .await,
            "{name}, on a shard that accepts, subscribed after the reconnect"
        );
    }
    let refused_guard = held.pop().unwrap();
    let refused_waiter = waiters.pop().unwrap();
    for (guard, waiter) in held.into_iter().zip(waiters) {
        let released = Instant::now();
        guard.unlock().await.unwrap();
        let g = common::woke_within(waiter, released, Duration::from_secs(3)).await;
        drop(g);
    }
    // The refusing shard accepts again (after a while): its channel is subscribed by a retry,
    // and its waiter hears the release.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(shard_subscribers(&refused), 0, "still refused");
    acl(refusing, &["allchannels"]);
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            shard_subscribers(&refused) == 1
        })
        .await,
        "the refused channel subscribed by a retry"
    );
    let released = Instant::now();
    refused_guard.unlock().await.unwrap();
    drop(common::woke_within(refused_waiter, released, Duration::from_secs(3)).await);
    for port in c.live_ports() {
        let _ = RedisCluster::cmd(port, &["ACL", "DELUSER", user.as_str()]);
    }
}

/// A waiter whose attempt fails on a transient error (here a command timeout: the server is
/// paused for writes) while its channel's re-subscription is refused keeps its place in the
/// channel: the failed round does not leave the subscription and join it again (a new
/// subscription made while the channel is refused fails outright, and the waiter with it).
/// Once the channel may be listened on again, the waiter hears the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transient_failure_while_the_channel_is_refused_keeps_the_waiter_subscribed() {
    // Writes paused for longer than the waiter's command timeout: the attempt made when the
    // reconnect wakes it times out.
    let config = Config::default().timeout(Duration::from_millis(500));
    refused_for_a_while(
        config,
        "resub:transient",
        Some(Duration::from_millis(2000)),
        Duration::from_millis(3000),
    )
    .await;
}

/// A waiter of a client of user `u` (made with `config`) on `name`, held for 60 s by another
/// client; then the channel is refused (its subscriber disconnected) and every script but the
/// lock's acquire refused with it, so the waiter's attempts still run while the permission
/// question fails. Writes are first paused for `pause_writes`, if given. After `window` the
/// waiter must still wait; then everything is allowed again, and the channel must be
/// subscribed again and the waiter hear the release (not the lock's 60 s TTL).
async fn refused_for_a_while(
    config: Config,
    name: &str,
    pause_writes: Option<Duration>,
    window: Duration,
) {
    let s = RedisServer::start();
    let (admin, url) = user_u(&s).await;
    let client = Client::connect(&url, config).await.unwrap();
    let holder_client = Client::connect(&s.url(), Config::default()).await.unwrap();
    let guard = holder_client
        .get_lock(name)
        .lock_with_lease(Duration::from_secs(60))
        .await
        .unwrap();
    let waiter = client.get_lock(name);
    let mut waiter = tokio::spawn(async move { waiter.lock().await.map(|g| (Instant::now(), g)) });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            admin.numsub(&channel(name)).await == 1
        })
        .await
    );
    if let Some(pause) = pause_writes {
        let ms = pause.as_millis().to_string();
        admin
            .cmd("CLIENT", vec!["PAUSE".into(), ms.into(), "WRITE".into()])
            .await
            .unwrap();
    }
    let acquire = fred::types::scripts::Script::from_lua(include_str!("../lua/lock_acquire.lua"));
    let only_acquire = format!("+evalsha|{}", acquire.sha1());
    admin
        .cmd(
            "ACL",
            acl_u(&[
                "resetchannels",
                "-evalsha",
                "-eval",
                "-script",
                &only_acquire,
            ]),
        )
        .await
        .unwrap();
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            admin.numsub(&channel(name)).await == 0
        })
        .await
    );
    // Re-subscriptions meanwhile (one after the reconnect, then retries every 50 ms doubling).
    tokio::time::sleep(window).await;
    assert!(
        !waiter.is_finished(),
        "the waiter gave up: {:?}",
        (&mut waiter).await
    );
    admin
        .cmd("ACL", acl_u(&["+@all", "allchannels"]))
        .await
        .unwrap();
    assert!(
        common::eventually(Duration::from_secs(10), || async {
            admin.numsub(&channel(name)).await == 1
        })
        .await,
        "subscribed again once allowed (a blind SUBSCRIBE refused unseen leaves it deaf)"
    );
    let released = Instant::now();
    guard.unlock().await.unwrap();
    let (at, g) = tokio::time::timeout(Duration::from_secs(5), &mut waiter)
        .await
        .expect("the waiter woken by the release, not by the lock's 60 s TTL")
        .unwrap()
        .unwrap();
    assert!(at - released < Duration::from_secs(5));
    g.unlock().await.unwrap();
}
