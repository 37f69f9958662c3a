//! Owners follow tasks (issue 50): a handle shared between tasks the tokio way (a clone, an
//! `Arc`) excludes them, for every lock kind and synchronizer handle; code that locks again in
//! its task re-enters, through the same handle or a new one of the same name; branches of one
//! task are one owner; a spawned acquisition acts for the task that called it.

use redisson_lock_test_kit as common;

use std::{
    future::Future,
    sync::{
        atomic::{AtomicU64, AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use common::RedisServer;
use redisson_lock::{Client, Config, Owner, UnlockOutcome};

const TASKS: usize = 8;
const ROUNDS: usize = 25;

/// What the tasks share: a counter updated by read, pause, write (an update is lost if two are
/// inside at once), and how many are inside.
#[derive(Default)]
struct Shared {
    counter: AtomicU64,
    inside: AtomicUsize,
    most: AtomicUsize,
}

impl Shared {
    /// The critical section: one increment by read, a 1 ms pause, write.
    async fn enter(&self) {
        let now = self.inside.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        let v = self.counter.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(1)).await;
        self.counter.store(v + 1, Ordering::SeqCst);
        self.inside.fetch_sub(1, Ordering::SeqCst);
    }
}

/// `TASKS` tasks each run `ROUNDS` critical sections through `section` (which takes, enters
/// and gives back, with a handle each task got from `share`): never two inside, no update lost.
async fn tasks_exclude<H, S, F, Fut>(what: &str, share: S, section: F)
where
    H: Send + 'static,
    S: Fn() -> H,
    F: Fn(H, Arc<Shared>) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = H> + Send,
{
    let shared = Arc::new(Shared::default());
    let tasks: Vec<_> = (0..TASKS)
        .map(|_| {
            let (mut handle, shared, section) = (share(), shared.clone(), section.clone());
            tokio::spawn(async move {
                for _ in 0..ROUNDS {
                    handle = section(handle, shared.clone()).await;
                }
            })
        })
        .collect();
    for t in tasks {
        tokio::time::timeout(Duration::from_secs(120), t)
            .await
            .unwrap_or_else(|_| panic!("{what}: stuck"))
            .unwrap();
    }
    assert_eq!(
        shared.most.load(Ordering::SeqCst),
        1,
        "{what}: two inside at once"
    );
    assert_eq!(
        shared.counter.load(Ordering::SeqCst),
        (TASKS * ROUNDS) as u64,
        "{what}: updates lost"
    );
}

/// One lock kind shared by clone and by `Arc`: `$make` makes the handle, `$take` acquires
/// through `&handle` (giving a guard released on drop).
macro_rules! shared_handle_excludes {
    ($what:expr, $make:expr, |$l:ident| $take:expr) => {{
        let lock = $make;
        tasks_exclude(
            concat!($what, " by clone"),
            || lock.clone(),
            |$l, shared: Arc<Shared>| async move {
                let guard = $take.await.unwrap();
                shared.enter().await;
                drop(guard);
                $l
            },
        )
        .await;
        let lock = Arc::new($make);
        tasks_exclude(
            concat!($what, " in an Arc"),
            || lock.clone(),
            |$l, shared: Arc<Shared>| async move {
                let guard = $take.await.unwrap();
                shared.enter().await;
                drop(guard);
                $l
            },
        )
        .await;
    }};
}

async fn client() -> (RedisServer, Client) {
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), Config::default()).await.unwrap();
    (s, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_shared_by_eight_tasks_lets_one_in_at_a_time_for_every_lock_kind() {
    let (_s, c) = client().await;
    shared_handle_excludes!("reentrant", c.get_lock("o:reentrant"), |l| l.lock());
    shared_handle_excludes!("fair", c.get_fair_lock("o:fair"), |l| l.lock());
    shared_handle_excludes!("fenced", c.get_fenced_lock("o:fenced"), |l| l.lock());
    shared_handle_excludes!("spin", c.get_spin_lock("o:spin"), |l| l.lock());
    shared_handle_excludes!("non-reentrant", c.get_non_reentrant_lock("o:nr"), |l| l
        .lock());
    shared_handle_excludes!(
        "non-reentrant fair",
        c.get_non_reentrant_fair_lock("o:nrf"),
        |l| l.lock()
    );
    shared_handle_excludes!(
        "write half",
        c.get_read_write_lock("o:rw").into_write_lock(),
        |l| l.lock()
    );
    shared_handle_excludes!("group", c.get_group_lock("o:group", ["seat"]), |l| l.lock());
    let multi = || {
        redisson_lock::MultiLock::new(vec![
            c.get_lock("o:multi:a").into(),
            c.get_lock("o:multi:b").into(),
        ])
        .unwrap()
    };
    let red = Arc::new(
        redisson_lock::RedLock::new(
            (0..3)
                .map(|i| c.get_lock(&format!("o:red:{i}")).into())
                .collect(),
        )
        .unwrap(),
    );
    tasks_exclude(
        "red-lock in an Arc",
        || red.clone(),
        |l, shared: Arc<Shared>| async move {
            let guard = l.lock_with_lease(Duration::from_secs(10)).await.unwrap();
            shared.enter().await;
            guard.unlock().await.unwrap();
            l
        },
    )
    .await;
    let lock = Arc::new(multi());
    tasks_exclude(
        "multi-lock in an Arc",
        || lock.clone(),
        |l, shared: Arc<Shared>| async move {
            let guard = l.lock().await.unwrap();
            shared.enter().await;
            guard.unlock().await.unwrap();
            l
        },
    )
    .await;
}

/// The synchronizers have no owner to follow: a shared handle lets in as many as it has
/// permits, here one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_synchronizer_shared_by_eight_tasks_lets_in_as_many_as_its_permits() {
    let (_s, c) = client().await;
    let sem = c.get_semaphore("o:sem");
    assert!(sem.try_set_permits(1).await.unwrap());
    tasks_exclude(
        "semaphore by clone",
        || sem.clone(),
        |s, shared: Arc<Shared>| async move {
            let permit = s.acquire(1).await.unwrap();
            shared.enter().await;
            drop(permit);
            s
        },
    )
    .await;
    let psem = Arc::new(c.get_permit_expirable_semaphore("o:psem"));
    assert!(psem.try_set_permits(1).await.unwrap());
    tasks_exclude(
        "permit-expirable semaphore in an Arc",
        || psem.clone(),
        |s, shared: Arc<Shared>| async move {
            let permit = s.acquire(None).await.unwrap();
            shared.enter().await;
            drop(permit);
            s
        },
    )
    .await;
}

/// Code that locks again in its task re-enters, through the same handle or a helper's new one
/// (Java code ported lock by lock does that), and the counts follow.
#[tokio::test]
async fn code_that_locks_again_in_its_task_re_enters_through_any_handle() {
    let (_s, c) = client().await;
    async fn helper(c: &Client) -> u64 {
        let again = c.get_lock("o:nested").lock().await.unwrap();
        let count = c.get_lock("o:nested").hold_count().await.unwrap();
        assert_eq!(again.unlock().await.unwrap(), UnlockOutcome::StillHeld);
        count
    }
    let inner = tokio::spawn({
        let c = c.clone();
        async move {
            let lock = c.get_lock("o:nested");
            let outer = lock.lock().await.unwrap();
            let nested = lock.lock().await.unwrap();
            assert_eq!(lock.hold_count().await.unwrap(), 2);
            drop(nested);
            let in_helper = helper(&c).await;
            assert_eq!(outer.unlock().await.unwrap(), UnlockOutcome::Released);
            in_helper
        }
    });
    assert_eq!(inner.await.unwrap(), 2, "the helper's handle re-entered");
    // Not another task: this one waits (here: a single try fails).
    let lock = c.get_lock("o:nested");
    let held = tokio::spawn({
        let lock = lock.clone();
        async move { lock.lock().await.unwrap() }
    })
    .await
    .unwrap();
    assert!(
        lock.try_lock().await.unwrap().is_none(),
        "another task's hold"
    );
    held.unlock().await.unwrap();
}

/// Branches of one task are one owner (the Java thread's rule): they re-enter. An explicit
/// owner per branch excludes them.
#[tokio::test]
async fn branches_of_one_task_are_one_owner_unless_given_their_own() {
    let (_s, c) = client().await;
    let lock = c.get_lock("o:branches");
    let (a, b) = tokio::join!(lock.lock(), lock.lock());
    let (a, b) = (a.unwrap(), b.unwrap());
    assert_eq!(lock.hold_count().await.unwrap(), 2, "re-entered");
    drop((a, b));
    let (x, y) = (
        c.get_lock_with_owner("o:branches:own", Owner::new()),
        c.get_lock_with_owner("o:branches:own", Owner::new()),
    );
    let gx = x.lock().await.unwrap();
    let (_, gy) = tokio::join!(
        async {
            tokio::time::sleep(Duration::from_millis(100)).await;
            gx.unlock().await.unwrap();
        },
        y.try_lock_for(Duration::from_secs(5))
    );
    assert!(gy.unwrap().is_some(), "y waited for x's release");
}

/// An acquisition future is made by the task that calls `lock()`, wherever it is polled:
/// `tokio::spawn(lock.lock())` gives the caller a hold it re-enters; a guard unlocks from any
/// task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawned_acquisition_acts_for_the_task_that_called_it() {
    let (_s, c) = client().await;
    let lock = c.get_lock("o:spawned");
    let outer = tokio::spawn(lock.lock()).await.unwrap().unwrap();
    assert_eq!(outer.owner(), lock.owner(), "the caller's owner");
    let again = lock.try_lock().await.unwrap().expect("re-entry");
    assert_eq!(lock.hold_count().await.unwrap(), 2);
    let unlocked = tokio::spawn(async move { again.unlock().await })
        .await
        .unwrap();
    assert_eq!(unlocked.unwrap(), UnlockOutcome::StillHeld);
    outer.unlock().await.unwrap();
    assert!(!lock.is_locked().await.unwrap());
}

/// Permits go back when their guard is dropped (in the background) or released; forgotten,
/// they stay taken until a release by count (the Java style), from this client or another.
#[tokio::test]
async fn a_permit_dropped_is_back_and_a_forgotten_one_waits_for_a_release_by_count() {
    let (s, c) = client().await;
    let other = Client::connect(&s.url(), Config::default()).await.unwrap();
    let sem = c.get_semaphore("o:permits");
    assert!(sem.try_set_permits(3).await.unwrap());
    let two = sem.acquire(2).await.unwrap();
    assert_eq!(two.permits(), 2);
    assert_eq!(sem.available_permits().await.unwrap(), 1);
    drop(two);
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            sem.available_permits().await.unwrap() == 3
        })
        .await,
        "dropped permits are back"
    );
    let one = sem.try_acquire(1).await.unwrap().expect("free");
    one.release().await.unwrap();
    assert_eq!(
        sem.available_permits().await.unwrap(),
        3,
        "released at once"
    );
    assert_eq!(sem.acquire(3).await.unwrap().forget(), 3);
    assert_eq!(
        sem.available_permits().await.unwrap(),
        0,
        "forgotten: taken"
    );
    other.get_semaphore("o:permits").release(3).await.unwrap();
    assert_eq!(sem.available_permits().await.unwrap(), 3);
    // A waiter is woken by a dropped guard's release, as by any.
    let all = sem.acquire(3).await.unwrap();
    let waiter = tokio::spawn({
        let sem = sem.clone();
        async move { sem.try_acquire_for(1, Duration::from_secs(10)).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(all);
    let got = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("woken")
        .unwrap()
        .unwrap();
    assert!(got.is_some());
}

/// A lock says who holds it: the owner fields, their counts, whether each is this client's,
/// the TTL; a Java holder is named too.
#[tokio::test]
async fn a_lock_says_who_holds_it() {
    let (s, c) = client().await;
    let admin = common::Admin::connect(&s.url()).await;
    let lock = c.get_lock("o:who");
    let view = lock.holders().await.unwrap();
    assert!(view.holders.is_empty());
    assert_eq!(view.ttl, redisson_lock::Ttl::NotLocked);
    let a = lock.lock().await.unwrap();
    let b = lock.lock().await.unwrap();
    let view = lock.holders().await.unwrap();
    assert_eq!(view.holders.len(), 1);
    let h = &view.holders[0];
    assert_eq!(h.field, a.owner_field());
    assert_eq!((h.count, h.this_client, h.write), (2, true, false));
    assert_eq!(h.client_id, c.id());
    assert!(matches!(view.ttl, redisson_lock::Ttl::Expires(_)));
    drop((a, b));
    admin.java_hold("o:who:java", "0f0f:77", 30_000).await;
    let view = c.get_lock("o:who:java").holders().await.unwrap();
    assert_eq!(view.holders.len(), 1);
    assert_eq!(
        (
            view.holders[0].client_id.as_str(),
            view.holders[0].owner_id.as_str()
        ),
        ("0f0f", "77")
    );
    assert!(!view.holders[0].this_client);
    let rw = c.get_read_write_lock("o:who:rw");
    let w = rw.write_lock().lock().await.unwrap();
    let r = rw.read_lock().lock().await.unwrap();
    let view = rw.write_lock().holders().await.unwrap();
    assert_eq!(view.mode.as_deref(), Some("write"));
    assert_eq!(view.holders.iter().filter(|h| h.write).count(), 1);
    assert_eq!(view.holders.iter().filter(|h| !h.write).count(), 1);
    drop((r, w));
}
