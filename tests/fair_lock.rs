//! Fair lock (protocol §7): wire state, FIFO hand-over, give-up clean-up, Redisson's portable
//! RedissonFairLockTest cases.

use common::{acquire_with, backend_tests};
use redisson_lock_test_kit as common;

use std::{sync::Arc, time::Duration};

use common::{Admin, Backend, RedisServer};
use fred::types::Value;
use redisson_lock::{Client, Config, Error, UnlockOutcome};
use tokio::time::Instant;

/// The fair lock's wait queue (a list of owner fields).
fn queue_key(name: &str) -> String {
    format!("redisson_lock_queue:{{{name}}}")
}

/// The fair lock's waiter deadlines (a sorted set).
fn timeouts_key(name: &str) -> String {
    format!("redisson_lock_timeout:{{{name}}}")
}

async fn queue(admin: &Admin, name: &str) -> Vec<String> {
    admin.fair_queue(name).await
}

async fn deadlines(admin: &Admin, name: &str) -> Vec<(String, f64)> {
    let flat: Vec<String> = admin
        .cmd(
            "ZRANGE",
            vec![
                timeouts_key(name).into(),
                0.into(),
                (-1).into(),
                "WITHSCORES".into(),
            ],
        )
        .await
        .unwrap()
        .into_array()
        .into_iter()
        .filter_map(|v| v.as_string())
        .collect();
    flat.chunks(2)
        .map(|p| (p[0].clone(), p[1].parse().unwrap()))
        .collect()
}

fn epoch_ms() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as f64
}

async fn queue_deadlines_and_per_waiter_hand_over_follow_the_spec(b: Backend) {
    let n = b.name("fair");
    let client = b.client().await;
    let admin = b.admin().await;
    let holder = client.get_fair_lock_with_owner(&n, redisson_lock::Owner::new());
    let g = holder
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(admin.type_of(&n).await, "hash");
    assert_eq!(
        admin.hgetall(&n).await,
        [(holder.owner_field().to_string(), "1".into())].into()
    );

    let waiter = client.get_fair_lock_with_owner(&n, redisson_lock::Owner::new());
    let wf = waiter.owner_field().to_string();
    let chan = format!("redisson_lock__channel:{{{n}}}:{wf}");
    let rlock_chan = format!("redisson_lock__channel:{{{n}}}");
    let mut rec = b.recorder(&[&chan, &rlock_chan]).await;
    let enqueued_at = epoch_ms();
    let task = tokio::spawn(async move {
        let g = waiter.try_lock_for(Duration::from_secs(5)).await?;
        Ok::<_, redisson_lock::Error>((Instant::now(), g))
    });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            queue(&admin, &n).await == vec![wf.clone()]
        })
        .await
    );
    let d = deadlines(&admin, &n).await;
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].0, wf);
    // deadline = now + holder's TTL (~30 s) + the waiter's wait (5 s)
    let expected = enqueued_at + 35_000.0;
    assert!(
        (d[0].1 - expected).abs() < 1_000.0,
        "deadline {} vs {expected}",
        d[0].1
    );

    let released = Instant::now();
    assert_eq!(g.unlock().await.unwrap(), UnlockOutcome::Released);
    let got = common::woke_within(task, released, common::WOKEN_BY_MESSAGE).await;
    assert!(got.is_some());
    // Only the head's own channel got the message; the RLock channel is not used.
    assert_eq!(
        rec.drain(Duration::from_millis(300)).await,
        vec![(chan, "0".to_string())]
    );
    assert!(queue(&admin, &n).await.is_empty());
    assert!(deadlines(&admin, &n).await.is_empty());
}

async fn a_simulated_java_holder_hands_over_on_the_waiters_channel(b: Backend) {
    let n = b.name("fair");
    let client = b.client().await;
    let admin = b.admin().await;
    admin
        .java_hold(&n, "11111111-1111-4111-8111-111111111111:9", 30_000)
        .await;
    let waiter = client.get_fair_lock_with_owner(&n, redisson_lock::Owner::new());
    let wf = waiter.owner_field().to_string();
    let task = tokio::spawn(async move { waiter.lock().await.map(|g| (Instant::now(), g)) });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            queue(&admin, &n).await == vec![wf.clone()]
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!task.is_finished());
    // Java's F-REL: DEL N, then PUBLISH (SPUBLISH where Java peers shard) 0 on the head's
    // own channel.
    let released = Instant::now();
    let _: i64 = fred::interfaces::KeysInterface::del(&admin.redis, n.as_str())
        .await
        .unwrap();
    admin
        .java_publish(&format!("redisson_lock__channel:{{{n}}}:{wf}"), "0")
        .await;
    let _g = common::woke_within(task, released, common::WOKEN_BY_MESSAGE).await;
}

async fn waiters_acquire_in_arrival_order(b: Backend) {
    // Redisson testConcurrency_MultiInstance_Ordering / testLeaseTimeout, in-process.
    let n = b.name("fair");
    let client = b.client().await;
    let admin = b.admin().await;
    let other = b.client().await;
    let holder = client.get_fair_lock(&n);
    let g = holder.lock().await.unwrap();
    let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let c = if i % 2 == 0 {
            client.clone()
        } else {
            other.clone()
        };
        let order = order.clone();
        let lock = c.get_fair_lock(&n);
        tasks.push(tokio::spawn(async move {
            let g = lock.lock().await.unwrap();
            order.lock().push(i);
            tokio::time::sleep(Duration::from_millis(20)).await;
            g.unlock().await.unwrap();
        }));
        // The next waiter arrives only once this one is queued.
        assert!(
            common::eventually(Duration::from_secs(5), || async {
                queue(&admin, &n).await.len() == i + 1
            })
            .await
        );
    }
    g.unlock().await.unwrap();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(30), t)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(*order.lock(), (0..8).collect::<Vec<_>>());
    assert!(queue(&admin, &n).await.is_empty());
}

async fn a_dropped_or_timed_out_waiter_leaves_the_queue(b: Backend) {
    let n = b.name("fair");
    let client = b.client().await;
    let admin = b.admin().await;
    let holder = client.get_fair_lock_with_owner(&n, redisson_lock::Owner::new());
    let _g = holder.lock().await.unwrap();

    // Timed out: gone by the time try_lock_for returns.
    let w1 = client.get_fair_lock_with_owner(&n, redisson_lock::Owner::new());
    let started = Instant::now();
    assert!(w1
        .try_lock_for(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    assert!(started.elapsed() >= Duration::from_millis(290));
    assert!(queue(&admin, &n).await.is_empty());
    assert!(deadlines(&admin, &n).await.is_empty());

    // Dropped mid-wait: removed by the give-up clean-up.
    let w2 = client.get_fair_lock_with_owner(&n, redisson_lock::Owner::new());
    let w3 = client.get_fair_lock_with_owner(&n, redisson_lock::Owner::new());
    let f2 = w2.owner_field().to_string();
    let f3 = w3.owner_field().to_string();
    let t2 = tokio::spawn(async move { w2.lock().await.map(|_| ()) });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            queue(&admin, &n).await.len() == 1
        })
        .await
    );
    let t3 = tokio::spawn(async move { w3.lock().await.map(|_| ()) });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            queue(&admin, &n).await == vec![f2.clone(), f3.clone()]
        })
        .await
    );
    let before: f64 = deadlines(&admin, &n)
        .await
        .iter()
        .find(|(m, _)| *m == f3)
        .unwrap()
        .1;
    t2.abort();
    assert!(t2.await.unwrap_err().is_cancelled());
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            queue(&admin, &n).await == vec![f3.clone()]
        })
        .await
    );
    let after: f64 = deadlines(&admin, &n)
        .await
        .iter()
        .find(|(m, _)| *m == f3)
        .unwrap()
        .1;
    // The waiter behind got the cancelled waiter's wait (the 300 s default) back.
    assert!(
        (before - after - 300_000.0).abs() < 1.0,
        "{before} -> {after}"
    );
    t3.abort();
    let _ = t3.await;
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            queue(&admin, &n).await.is_empty()
        })
        .await
    );
    assert!(deadlines(&admin, &n).await.is_empty());
    assert_eq!(client.stats().subscribed_channels, 0);
}

async fn try_lock_without_wait_never_enqueues(b: Backend) {
    // Redisson testTryLockNonDelayed.
    let n = b.name("fair");
    let client = b.client().await;
    let admin = b.admin().await;
    let a = client.get_fair_lock_with_owner(&n, redisson_lock::Owner::new());
    let g = a.try_lock().await.unwrap().unwrap();
    let b = client.get_fair_lock_with_owner(&n, redisson_lock::Owner::new());
    assert!(b.try_lock().await.unwrap().is_none());
    assert!(queue(&admin, &n).await.is_empty());
    assert!(b
        .try_lock_for(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    g.unlock().await.unwrap();
    assert!(client
        .get_fair_lock_with_owner(&n, redisson_lock::Owner::new())
        .try_lock()
        .await
        .unwrap()
        .is_some());
}

async fn unlocking_an_expired_fair_lock_succeeds_unlike_rlock(b: Backend) {
    // Redisson testExpire for the fair lock; §7.4 step 3.
    let n = b.name("fair");
    let client = b.client().await;
    let a = client.get_fair_lock_with_owner(&n, redisson_lock::Owner::new());
    let g = a.lock_with_lease(Duration::from_millis(300)).await.unwrap();
    let b = client.get_fair_lock_with_owner(&n, redisson_lock::Owner::new());
    let started = Instant::now();
    let gb = b.lock().await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(3));
    gb.unlock().await.unwrap();
    assert_eq!(g.unlock().await.unwrap(), UnlockOutcome::Released);
    // A non-owner's unlock while someone else holds it is still an error.
    let _h = b.lock().await.unwrap();
    assert!(matches!(a.unlock().await, Err(Error::NotHeld { .. })));
}

async fn fair_lock_basics_hold_count_reentry_force_unlock(b: Backend) {
    let n = b.name("fair");
    let client = b.client().await;
    let admin = b.admin().await;
    let lock = client.get_fair_lock_with_owner(&n, redisson_lock::Owner::new());
    assert_eq!(lock.hold_count().await.unwrap(), 0);
    let a = lock.lock().await.unwrap();
    let b = lock.lock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    let other = client.get_fair_lock_with_owner(&n, redisson_lock::Owner::new());
    assert!(other.is_locked().await.unwrap());
    assert!(!other.is_held_by_current().await.unwrap());
    assert!(other.try_lock().await.unwrap().is_none());
    b.unlock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    assert!(other.force_unlock().await.unwrap());
    assert!(a.is_lost());
    assert!(!admin.exists(&n).await);
    let v: Value = admin
        .cmd("EXISTS", vec![queue_key(&n).into()])
        .await
        .unwrap();
    assert_eq!(v.as_i64(), Some(0));
}

async fn fair_lock_mutual_exclusion_stress(b: Backend) {
    let n = b.name("fair");
    let admin = b.admin().await;
    let clients = [b.client().await, b.client().await];
    let owners = (0..8)
        .map(|i| acquire_with!(clients[i % 2].get_fair_lock(&n), |l| l.lock()))
        .collect();
    common::assert_exclusive_increments(&b.url(), owners, 60).await;
    assert!(queue(&admin, &n).await.is_empty());
}

async fn leases_expiring_hand_the_lock_to_waiters_in_arrival_order(b: Backend) {
    // Redisson testLeaseTimeout: 8 waiters, each tryLock(wait, lease) that never unlocks; each
    // lease expiry hands over to the next in line (lease 300 ms here instead of 1 s).
    let n = b.name("fair");
    let client = b.client().await;
    let admin = b.admin().await;
    let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let lock = client.get_fair_lock(&n);
        let mine = order.clone();
        tasks.push(tokio::spawn(async move {
            let g = lock
                .try_lock_with_lease(Duration::from_secs(10), Duration::from_millis(300))
                .await
                .unwrap()
                .expect("acquired within the wait");
            mine.lock().push(i);
            g.keep(); // never unlocked: the lease ends it
        }));
        assert!(
            common::eventually(Duration::from_secs(5), || async {
                let acquired = order.lock().len();
                acquired + queue(&admin, &n).await.len() == i + 1
            })
            .await
        );
    }
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(15), t)
            .await
            .unwrap()
            .unwrap();
    }
    assert_eq!(*order.lock(), (0..8).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_giving_up_during_client_pause_leaves_no_queue_entry() {
    // Redisson testAcquireFailedNotCalledOnRedisTimeout / fault S14: writes are paused while a
    // queued waiter gives up; its clean-up must still take effect once the server resumes.
    // Standalone only: CLIENT PAUSE of the shared cluster's nodes would stall parallel tests.
    let n = "fair".to_string();
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), Config::default().timeout(Duration::from_secs(1)))
        .await
        .unwrap();
    let admin = Admin::connect(&s.url()).await;
    let _holder = client
        .get_fair_lock(&n)
        .lock_with_lease(Duration::from_secs(10))
        .await
        .unwrap();
    let waiter = client.get_fair_lock(&n);
    let task = tokio::spawn(async move { waiter.try_lock_for(Duration::from_secs(2)).await });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            queue(&admin, &n).await.len() == 1
        })
        .await
    );
    admin
        .cmd(
            "CLIENT",
            vec!["PAUSE".into(), "3000".into(), "WRITE".into()],
        )
        .await
        .unwrap();
    let paused = Instant::now();
    let outcome = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .unwrap()
        .unwrap();
    assert!(!matches!(outcome, Ok(Some(_))), "no lock while paused");
    // Within 1 s after the pause ends the waiter is gone from the queue and the deadlines.
    let resumed = paused + Duration::from_millis(3000);
    tokio::time::sleep_until(resumed).await;
    assert!(
        common::eventually(Duration::from_secs(1), || async {
            queue(&admin, &n).await.is_empty() && deadlines(&admin, &n).await.is_empty()
        })
        .await
    );
}

backend_tests!(
    queue_deadlines_and_per_waiter_hand_over_follow_the_spec,
    a_simulated_java_holder_hands_over_on_the_waiters_channel,
    waiters_acquire_in_arrival_order,
    a_dropped_or_timed_out_waiter_leaves_the_queue,
    try_lock_without_wait_never_enqueues,
    unlocking_an_expired_fair_lock_succeeds_unlike_rlock,
    fair_lock_basics_hold_count_reentry_force_unlock,
    fair_lock_mutual_exclusion_stress,
    leases_expiring_hand_the_lock_to_waiters_in_arrival_order,
);
