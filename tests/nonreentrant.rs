//! Non-reentrant lock and non-reentrant fair lock (sync protocol §5): the wire state of every
//! step (exact keys, fields, TTLs, messages), the holder's re-acquisition refused at once with
//! `Error::Reentry` (no wait, no count of 2, no queue change), and the same lock on the wire
//! as the reentrant / fair lock of the name. Standalone and every cluster mode.

use common::backend_tests;
use redisson_lock_test_kit as common;

use std::time::Duration;

use common::{Admin, Backend};
use redisson_lock::{ErrorKind, UnlockOutcome};
use tokio::time::Instant;

fn channel(name: &str) -> String {
    format!("redisson_lock__channel:{{{name}}}")
}

async fn zrange(admin: &Admin, key: &str) -> Vec<String> {
    admin
        .cmd("ZRANGE", vec![key.into(), 0.into(), (-1).into()])
        .await
        .unwrap()
        .into_array()
        .into_iter()
        .filter_map(|v| v.as_string())
        .collect()
}

/// Hash `N` with the one field `F` → `1`, TTL the watchdog timeout; the holder's second
/// acquisition (try once, try with a wait, wait without limit) fails at once with `Reentry`
/// and changes nothing; the unlock deletes the key and publishes one `0`; a reentrant lock of
/// the same name is the same lock.
async fn every_non_reentrant_step_leaves_the_spec_state(b: Backend) {
    let n = b.name("nr");
    let client = b.client().await;
    let admin = b.admin().await;
    let mut rec = b.recorder(&[&channel(&n)]).await;
    let lock = client.get_non_reentrant_lock_with_owner(&n, redisson_lock::Owner::new());
    let f = lock.owner_field().to_string();

    let g = lock.lock().await.unwrap();
    assert_eq!(admin.type_of(&n).await, "hash");
    assert_eq!(admin.hgetall(&n).await, [(f.clone(), "1".into())].into());
    let ttl = admin.pttl(&n).await;
    assert!((29_000..=30_000).contains(&ttl), "ttl {ttl}");

    // Re-acquisition by the holder: refused at once, every form, nothing changes.
    admin
        .cmd("PEXPIRE", vec![n.as_str().into(), 20_000.into()])
        .await
        .unwrap();
    let started = Instant::now();
    let once = lock.try_lock().await.unwrap_err();
    let waiting = lock.try_lock_for(Duration::from_secs(5)).await.unwrap_err();
    let unbounded = tokio::time::timeout(Duration::from_secs(5), lock.lock())
        .await
        .expect("never a hang")
        .unwrap_err();
    let leased = lock
        .try_lock_with_lease(Duration::from_secs(5), Duration::from_secs(60))
        .await
        .unwrap_err();
    for e in [&once, &waiting, &unbounded, &leased] {
        assert_eq!(e.kind(), ErrorKind::Reentry, "{e:?}");
        assert!(e.to_string().contains("NON_REENTRANT_REACQUIRE"), "{e}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "answered at once, not after a wait: {:?}",
        started.elapsed()
    );
    assert_eq!(admin.hgetall(&n).await, [(f.clone(), "1".into())].into());
    let ttl = admin.pttl(&n).await;
    assert!(
        ttl <= 20_000,
        "the TTL is not re-armed by a refused re-entry: {ttl}"
    );
    assert_eq!(lock.hold_count().await.unwrap(), 1);
    assert!(rec.drain(Duration::from_millis(200)).await.is_empty());

    // Another owner contends as usual: busy, and the reentrant lock of the name is the same.
    let other = client.get_non_reentrant_lock_with_owner(&n, redisson_lock::Owner::new());
    assert!(other.try_lock().await.unwrap().is_none());
    assert!(client
        .get_lock_with_owner(&n, redisson_lock::Owner::new())
        .try_lock()
        .await
        .unwrap()
        .is_none());

    // The one unlock frees it: key gone, one "0" on the channel.
    assert_eq!(g.unlock().await.unwrap(), UnlockOutcome::Released);
    assert!(!admin.exists(&n).await);
    assert_eq!(
        rec.drain(Duration::from_millis(300)).await,
        vec![(channel(&n), "0".to_string())]
    );

    // A leased acquisition: TTL = the lease; force unlock deletes and publishes "0".
    let g = other
        .lock_with_lease(Duration::from_secs(10))
        .await
        .unwrap();
    let ttl = admin.pttl(&n).await;
    assert!((9_000..=10_000).contains(&ttl), "ttl {ttl}");
    assert!(lock.force_unlock().await.unwrap());
    assert!(!admin.exists(&n).await);
    assert_eq!(
        rec.drain(Duration::from_millis(300)).await,
        vec![(channel(&n), "0".to_string())]
    );
    drop(g);
}

/// A waiter of the non-reentrant lock is woken by the holder's release message.
async fn a_non_reentrant_waiter_wakes_on_the_release(b: Backend) {
    let n = b.name("nr-wait");
    let holder_client = b.client().await;
    let waiter_client = b.client().await;
    let g = holder_client
        .get_non_reentrant_lock(&n)
        .lock()
        .await
        .unwrap();
    let waiter = waiter_client.get_non_reentrant_lock(&n);
    let task = tokio::spawn(async move {
        let g = waiter.try_lock_for(Duration::from_secs(10)).await?;
        Ok::<_, redisson_lock::Error>((Instant::now(), g))
    });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            b.subscribers(&channel(&n)).await > 0
        })
        .await
    );
    let released = Instant::now();
    g.unlock().await.unwrap();
    let got = common::woke_within(task, released, common::WOKEN_BY_MESSAGE).await;
    assert!(got.is_some());
}

/// The fair variant: same keys as the fair lock; the holder's re-acquisition is refused before
/// any queue handling (queue and every waiter's deadline unchanged); waiters are served in
/// order on their own channels.
async fn every_non_reentrant_fair_step_leaves_the_spec_state(b: Backend) {
    let n = b.name("nrf");
    let client = b.client().await;
    let admin = b.admin().await;
    let queue = format!("redisson_lock_queue:{{{n}}}");
    let timeouts = format!("redisson_lock_timeout:{{{n}}}");
    let lock = client.get_non_reentrant_fair_lock_with_owner(&n, redisson_lock::Owner::new());
    let f = lock.owner_field().to_string();
    let g = lock.lock().await.unwrap();
    assert_eq!(admin.hgetall(&n).await, [(f.clone(), "1".into())].into());

    // A waiter queues behind the holder.
    let waiter = client.get_non_reentrant_fair_lock_with_owner(&n, redisson_lock::Owner::new());
    let wf = waiter.owner_field().to_string();
    let wchan = format!("{}:{wf}", channel(&n));
    let mut rec = b.recorder(&[&wchan, &channel(&n)]).await;
    let task = tokio::spawn(async move {
        let g = waiter.try_lock_for(Duration::from_secs(10)).await?;
        Ok::<_, redisson_lock::Error>((Instant::now(), g))
    });
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            admin.fair_queue(&n).await == vec![wf.clone()]
        })
        .await
    );
    let scores_before = admin
        .cmd(
            "ZRANGE",
            vec![
                timeouts.as_str().into(),
                0.into(),
                (-1).into(),
                "WITHSCORES".into(),
            ],
        )
        .await
        .unwrap();

    // The holder again, both forms: refused, nothing moves.
    let once = lock.try_lock().await.unwrap_err();
    let waiting = lock.try_lock_for(Duration::from_secs(3)).await.unwrap_err();
    assert_eq!(once.kind(), ErrorKind::Reentry);
    assert_eq!(waiting.kind(), ErrorKind::Reentry);
    assert_eq!(admin.hgetall(&n).await, [(f.clone(), "1".into())].into());
    assert_eq!(admin.fair_queue(&n).await, vec![wf.clone()]);
    assert_eq!(zrange(&admin, &timeouts).await, vec![wf.clone()]);
    let scores_after = admin
        .cmd(
            "ZRANGE",
            vec![
                timeouts.as_str().into(),
                0.into(),
                (-1).into(),
                "WITHSCORES".into(),
            ],
        )
        .await
        .unwrap();
    assert_eq!(scores_before, scores_after, "no score changes");
    assert!(!admin.exists(&queue).await || admin.fair_queue(&n).await.len() == 1);

    // The release hands over on the head's own channel only.
    let released = Instant::now();
    assert_eq!(g.unlock().await.unwrap(), UnlockOutcome::Released);
    let got = common::woke_within(task, released, common::WOKEN_BY_MESSAGE).await;
    let got = got.expect("acquired");
    assert_eq!(
        rec.drain(Duration::from_millis(300)).await,
        vec![(wchan, "0".to_string())]
    );
    assert_eq!(admin.hgetall(&n).await, [(wf.clone(), "1".into())].into());
    assert!(!admin.exists(&queue).await);
    assert!(!admin.exists(&timeouts).await);
    // The fair lock of the name is the same lock.
    assert!(client
        .get_fair_lock_with_owner(&n, redisson_lock::Owner::new())
        .try_lock()
        .await
        .unwrap()
        .is_none());
    got.unlock().await.unwrap();
    assert!(!admin.exists(&n).await);
}

backend_tests!(
    both: every_non_reentrant_step_leaves_the_spec_state,
    a_non_reentrant_waiter_wakes_on_the_release,
    every_non_reentrant_fair_step_leaves_the_spec_state,
);

fn blocking_refuses_the_holding_thread<K: redisson_lock::Kind + std::fmt::Debug>(
    make: impl Fn() -> redisson_lock::blocking::Lock<K> + Sync,
) {
    let lock = make();
    let guard = lock.lock().unwrap();
    assert_eq!(lock.try_lock().unwrap_err().kind(), ErrorKind::Reentry);
    assert_eq!(
        make().lock().unwrap_err().kind(),
        ErrorKind::Reentry,
        "same thread"
    );
    // Another thread waits and gets it once released.
    let other = std::thread::scope(|s| {
        let t = s.spawn(|| {
            make()
                .try_lock_for(Duration::from_secs(10))
                .map(|g| g.is_some())
        });
        std::thread::sleep(Duration::from_millis(100));
        guard.unlock().unwrap();
        t.join().unwrap()
    });
    assert!(other.unwrap());
}

#[test]
fn the_blocking_facade_refuses_the_holding_thread() {
    let server = common::RedisServer::start();
    let client =
        redisson_lock::blocking::Client::connect(&server.url(), redisson_lock::Config::default())
            .unwrap();
    blocking_refuses_the_holding_thread(|| client.get_non_reentrant_lock("b-nr"));
    blocking_refuses_the_holding_thread(|| client.get_non_reentrant_fair_lock("b-nrf"));
}
