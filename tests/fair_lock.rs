//! Fair lock (protocol §7): wire state, FIFO hand-over, give-up clean-up, Redisson's portable
//! RedissonFairLockTest cases.

mod common;

use std::{sync::Arc, time::Duration};

use common::{Admin, Recorder, RedisServer};
use fred::types::Value;
use redisson_lock::{Client, Config, Error, UnlockOutcome};
use tokio::time::Instant;

const QUEUE: &str = "redisson_lock_queue:{fair}";
const TIMEOUTS: &str = "redisson_lock_timeout:{fair}";

async fn setup() -> (RedisServer, Client, Admin) {
    let s = RedisServer::start();
    let c = Client::connect(&s.url(), Config::default()).await.unwrap();
    let a = Admin::connect(&s.url()).await;
    (s, c, a)
}

async fn queue(admin: &Admin) -> Vec<String> {
    admin
        .cmd("LRANGE", vec![QUEUE.into(), 0.into(), (-1).into()])
        .await
        .unwrap()
        .into_array()
        .into_iter()
        .filter_map(|v| v.as_string())
        .collect()
}

async fn deadlines(admin: &Admin) -> Vec<(String, f64)> {
    let flat: Vec<String> = admin
        .cmd(
            "ZRANGE",
            vec![TIMEOUTS.into(), 0.into(), (-1).into(), "WITHSCORES".into()],
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queue_deadlines_and_per_waiter_hand_over_follow_the_spec() {
    let (s, client, admin) = setup().await;
    let holder = client.get_fair_lock("fair");
    let g = holder
        .lock_with_lease(Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(admin.type_of("fair").await, "hash");
    assert_eq!(
        admin.hgetall("fair").await,
        [(holder.owner_field().to_string(), "1".into())].into()
    );

    let waiter = client.get_fair_lock("fair");
    let wf = waiter.owner_field().to_string();
    let chan = format!("redisson_lock__channel:{{fair}}:{wf}");
    let mut rec = Recorder::subscribe(&s.url(), &[&chan, "redisson_lock__channel:{fair}"]).await;
    let enqueued_at = epoch_ms();
    let task = tokio::spawn(async move {
        let g = waiter.try_lock_for(Duration::from_secs(5)).await?;
        Ok::<_, redisson_lock::Error>((Instant::now(), g))
    });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            queue(&admin).await == vec![wf.clone()]
        })
        .await
    );
    let d = deadlines(&admin).await;
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
    let got = common::woke_within(task, released, Duration::from_millis(100)).await;
    assert!(got.is_some());
    // Only the head's own channel got the message; the RLock channel is not used.
    assert_eq!(
        rec.drain(Duration::from_millis(300)).await,
        vec![(chan, "0".to_string())]
    );
    assert!(queue(&admin).await.is_empty());
    assert!(deadlines(&admin).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulated_java_holder_hands_over_on_the_waiters_channel() {
    let (_s, client, admin) = setup().await;
    admin
        .java_hold("fair", "11111111-1111-4111-8111-111111111111:9", 30_000)
        .await;
    let waiter = client.get_fair_lock("fair");
    let wf = waiter.owner_field().to_string();
    let task = tokio::spawn(async move { waiter.lock().await.map(|g| (Instant::now(), g)) });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            queue(&admin).await == vec![wf.clone()]
        })
        .await
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!task.is_finished());
    // Java's F-REL: DEL N, then PUBLISH 0 on the head's own channel.
    let released = Instant::now();
    let _: i64 = fred::interfaces::KeysInterface::del(&admin.redis, "fair")
        .await
        .unwrap();
    let _: i64 = fred::interfaces::PubsubInterface::publish(
        &admin.redis,
        format!("redisson_lock__channel:{{fair}}:{wf}"),
        "0",
    )
    .await
    .unwrap();
    let _g = common::woke_within(task, released, Duration::from_millis(100)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_acquire_in_arrival_order() {
    // Redisson testConcurrency_MultiInstance_Ordering / testLeaseTimeout, in-process.
    let (s, client, admin) = setup().await;
    let other = Client::connect(&s.url(), Config::default()).await.unwrap();
    let holder = client.get_fair_lock("fair");
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
        let lock = c.get_fair_lock("fair");
        tasks.push(tokio::spawn(async move {
            let g = lock.lock().await.unwrap();
            order.lock().push(i);
            tokio::time::sleep(Duration::from_millis(20)).await;
            g.unlock().await.unwrap();
        }));
        // The next waiter arrives only once this one is queued.
        assert!(
            common::eventually(Duration::from_secs(5), || async {
                queue(&admin).await.len() == i + 1
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
    assert!(queue(&admin).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_or_timed_out_waiter_leaves_the_queue() {
    let (_s, client, admin) = setup().await;
    let holder = client.get_fair_lock("fair");
    let _g = holder.lock().await.unwrap();

    // Timed out: gone by the time try_lock_for returns.
    let w1 = client.get_fair_lock("fair");
    let started = Instant::now();
    assert!(w1
        .try_lock_for(Duration::from_millis(300))
        .await
        .unwrap()
        .is_none());
    assert!(started.elapsed() >= Duration::from_millis(290));
    assert!(queue(&admin).await.is_empty());
    assert!(deadlines(&admin).await.is_empty());

    // Dropped mid-wait: removed by the give-up clean-up.
    let w2 = client.get_fair_lock("fair");
    let w3 = client.get_fair_lock("fair");
    let f2 = w2.owner_field().to_string();
    let f3 = w3.owner_field().to_string();
    let t2 = tokio::spawn(async move { w2.lock().await.map(|_| ()) });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            queue(&admin).await.len() == 1
        })
        .await
    );
    let t3 = tokio::spawn(async move { w3.lock().await.map(|_| ()) });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            queue(&admin).await == vec![f2.clone(), f3.clone()]
        })
        .await
    );
    let before: f64 = deadlines(&admin)
        .await
        .iter()
        .find(|(m, _)| *m == f3)
        .unwrap()
        .1;
    t2.abort();
    assert!(t2.await.unwrap_err().is_cancelled());
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            queue(&admin).await == vec![f3.clone()]
        })
        .await
    );
    let after: f64 = deadlines(&admin)
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
            queue(&admin).await.is_empty()
        })
        .await
    );
    assert!(deadlines(&admin).await.is_empty());
    assert_eq!(client.stats().subscribed_channels, 0);
}

#[tokio::test]
async fn try_lock_without_wait_never_enqueues() {
    // Redisson testTryLockNonDelayed.
    let (_s, client, admin) = setup().await;
    let a = client.get_fair_lock("fair");
    let g = a.try_lock().await.unwrap().unwrap();
    let b = client.get_fair_lock("fair");
    assert!(b.try_lock().await.unwrap().is_none());
    assert!(queue(&admin).await.is_empty());
    assert!(b
        .try_lock_for(Duration::from_millis(200))
        .await
        .unwrap()
        .is_none());
    g.unlock().await.unwrap();
    assert!(client
        .get_fair_lock("fair")
        .try_lock()
        .await
        .unwrap()
        .is_some());
}

#[tokio::test]
async fn unlocking_an_expired_fair_lock_succeeds_unlike_rlock() {
    // Redisson testExpire for the fair lock; §7.4 step 3.
    let (_s, client, _admin) = setup().await;
    let a = client.get_fair_lock("fair");
    let g = a.lock_with_lease(Duration::from_millis(300)).await.unwrap();
    let b = client.get_fair_lock("fair");
    let started = Instant::now();
    let gb = b.lock().await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(3));
    gb.unlock().await.unwrap();
    assert_eq!(g.unlock().await.unwrap(), UnlockOutcome::Released);
    // A non-owner's unlock while someone else holds it is still an error.
    let _h = b.lock().await.unwrap();
    assert!(matches!(a.unlock().await, Err(Error::NotHeld { .. })));
}

#[tokio::test]
async fn fair_lock_basics_hold_count_reentry_force_unlock() {
    let (_s, client, admin) = setup().await;
    let lock = client.get_fair_lock("fair");
    assert_eq!(lock.hold_count().await.unwrap(), 0);
    let a = lock.lock().await.unwrap();
    let b = lock.lock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    let other = client.get_fair_lock("fair");
    assert!(other.is_locked().await.unwrap());
    assert!(!other.is_held_by_current().await.unwrap());
    assert!(other.try_lock().await.unwrap().is_none());
    b.unlock().await.unwrap();
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    assert!(other.force_unlock().await.unwrap());
    assert!(a.is_lost());
    assert!(!admin.exists("fair").await);
    let v: Value = admin.cmd("EXISTS", vec![QUEUE.into()]).await.unwrap();
    assert_eq!(v.as_i64(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_lock_mutual_exclusion_stress() {
    let (s, _c, admin) = setup().await;
    let clients = [
        Client::connect(&s.url(), Config::default()).await.unwrap(),
        Client::connect(&s.url(), Config::default()).await.unwrap(),
    ];
    let owners = (0..8)
        .map(|i| acquire_with!(clients[i % 2].get_fair_lock("fair"), |l| l.lock()))
        .collect();
    common::assert_exclusive_increments(&s.url(), owners, 60).await;
    assert!(queue(&admin).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_expiring_hand_the_lock_to_waiters_in_arrival_order() {
    // Redisson testLeaseTimeout: 8 waiters, each tryLock(wait, lease) that never unlocks; each
    // lease expiry hands over to the next in line (lease 300 ms here instead of 1 s).
    let (_s, client, admin) = setup().await;
    let order = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for i in 0..8 {
        let lock = client.get_fair_lock("fair");
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
                acquired + queue(&admin).await.len() == i + 1
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
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), Config::default().timeout(Duration::from_secs(1)))
        .await
        .unwrap();
    let admin = Admin::connect(&s.url()).await;
    let _holder = client
        .get_fair_lock("fair")
        .lock_with_lease(Duration::from_secs(10))
        .await
        .unwrap();
    let waiter = client.get_fair_lock("fair");
    let task = tokio::spawn(async move { waiter.try_lock_for(Duration::from_secs(2)).await });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            queue(&admin).await.len() == 1
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
            queue(&admin).await.is_empty() && deadlines(&admin).await.is_empty()
        })
        .await
    );
}
