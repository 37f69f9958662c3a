//! `#[locked(..)]` and the `Lock::run` helpers it expands to, against a real redis-server.

use redisson_lock_test_kit as common;

use std::{
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Arc,
    },
    time::Duration,
};

use common::RedisServer;
use redisson_lock::{locked, Client, Config, Error};
use tokio::time::Instant;

#[derive(Debug)]
enum AppError {
    Lock(Error),
    Body(&'static str),
}

impl From<Error> for AppError {
    fn from(e: Error) -> Self {
        AppError::Lock(e)
    }
}

async fn setup_with(config: Config) -> (RedisServer, Client) {
    let server = RedisServer::start();
    let client = Client::connect(&server.url(), config).await.unwrap();
    (server, client)
}

async fn setup() -> (RedisServer, Client) {
    setup_with(Config::default()).await
}

/// Counts the bodies running at once and remembers the highest count.
#[derive(Default)]
struct Overlap {
    now: AtomicUsize,
    max: AtomicUsize,
    runs: AtomicUsize,
}

impl Overlap {
    async fn enter_for(&self, d: Duration) {
        let n = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(n, Ordering::SeqCst);
        tokio::time::sleep(d).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        self.runs.fetch_add(1, Ordering::SeqCst);
    }
}

struct Service {
    client: Client,
    overlap: Overlap,
}

impl Service {
    fn new(client: Client) -> Arc<Self> {
        Arc::new(Service {
            client,
            overlap: Overlap::default(),
        })
    }

    #[locked(client = &self.client, name = "orders:{id}")]
    async fn order(&self, id: u64, hold: Duration) -> Result<u64, AppError> {
        self.overlap.enter_for(hold).await;
        Ok(id)
    }

    #[locked(client = &self.client, name = "orders:{id}", wait = "200ms")]
    async fn order_or_give_up(&self, id: u64) -> Result<(), AppError> {
        self.overlap.enter_for(Duration::ZERO).await;
        Ok(())
    }

    #[locked(client = &self.client, name = "catalog", kind = read)]
    async fn read(&self) -> Result<(), AppError> {
        self.overlap.enter_for(Duration::from_millis(400)).await;
        Ok(())
    }

    #[locked(client = &self.client, name = "catalog", kind = write)]
    async fn write(&self) -> Result<(), AppError> {
        self.overlap.enter_for(Duration::from_millis(400)).await;
        Ok(())
    }
}

#[tokio::test]
async fn the_body_runs_under_the_lock_and_the_lock_is_free_when_the_call_returns() {
    let (_server, client) = setup().await;

    #[locked(client = &client, name = "orders:{id}")]
    async fn check(client: &Client, id: u64) -> Result<bool, AppError> {
        let probe = client.get_lock(&format!("orders:{id}"));
        let held = probe.is_locked().await? && probe.try_lock().await?.is_none();
        Ok(held)
    }

    assert!(check(&client, 1).await.unwrap(), "held while the body runs");
    assert!(!client.get_lock("orders:1").is_locked().await.unwrap());
    assert_eq!(client.stats().watchdog_holds, 0);
}

#[tokio::test]
async fn calls_for_one_name_run_one_at_a_time_and_other_names_in_parallel() {
    let (_server, client) = setup().await;
    let svc = Service::new(client);
    let hold = Duration::from_millis(300);
    let calls: Vec<_> = (0..3)
        .map(|_| {
            let svc = svc.clone();
            tokio::spawn(async move { svc.order(7, hold).await })
        })
        .collect();
    for c in calls {
        assert_eq!(c.await.unwrap().unwrap(), 7);
    }
    assert_eq!(svc.overlap.max.load(Ordering::SeqCst), 1);
    assert_eq!(svc.overlap.runs.load(Ordering::SeqCst), 3);

    let svc = Service::new(svc.client.clone());
    let started = Instant::now();
    let (a, b) = tokio::join!(svc.order(1, hold), svc.order(2, hold));
    assert_eq!((a.unwrap(), b.unwrap()), (1, 2));
    assert_eq!(
        svc.overlap.max.load(Ordering::SeqCst),
        2,
        "two names overlap"
    );
    assert!(started.elapsed() < hold * 2);
}

#[tokio::test]
async fn a_call_gives_up_after_its_wait_without_running_the_body() {
    let (_server, client) = setup().await;
    let svc = Service::new(client.clone());
    let holder = client.get_lock("orders:5");
    let guard = holder.lock().await.unwrap();

    let started = Instant::now();
    match svc.order_or_give_up(5).await {
        Err(AppError::Lock(Error::NotAcquired { lock, wait })) => {
            assert_eq!(lock, "orders:5");
            assert_eq!(wait, Duration::from_millis(200));
        }
        other => panic!("expected NotAcquired, got {other:?}"),
    }
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(190), "{waited:?}");
    assert!(waited < Duration::from_secs(2), "{waited:?}");
    assert_eq!(svc.overlap.runs.load(Ordering::SeqCst), 0);

    // Released within the wait: the call gets in.
    let release = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        guard.unlock().await.unwrap();
    });
    svc.order_or_give_up(5).await.unwrap();
    release.await.unwrap();
    assert_eq!(svc.overlap.runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_body_that_outlives_its_lease_is_dropped_and_the_call_returns_lock_lost() {
    let (_server, client) = setup().await;
    let finished = Arc::new(AtomicBool::new(false));
    let dropped = Arc::new(AtomicBool::new(false));

    struct SetOnDrop(Arc<AtomicBool>);
    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    #[locked(client = client, name = "leased", lease = "500ms")]
    async fn slow(
        client: &Client,
        finished: Arc<AtomicBool>,
        dropped: Arc<AtomicBool>,
    ) -> Result<(), AppError> {
        let _flag = SetOnDrop(dropped);
        tokio::time::sleep(Duration::from_secs(3)).await;
        finished.store(true, Ordering::SeqCst);
        Ok(())
    }

    let started = Instant::now();
    let result = slow(&client, finished.clone(), dropped.clone()).await;
    let took = started.elapsed();
    assert!(
        matches!(&result, Err(AppError::Lock(Error::LockLost { lock })) if lock == "leased"),
        "{result:?}"
    );
    assert!(took >= Duration::from_millis(450), "{took:?}");
    assert!(took < Duration::from_millis(1500), "{took:?}");
    assert!(
        dropped.load(Ordering::SeqCst),
        "the body's future was dropped"
    );
    assert!(!finished.load(Ordering::SeqCst));

    // A body within its lease runs to the end.
    #[locked(client = client, name = "leased", lease = "2s")]
    async fn quick(client: &Client) -> Result<u8, AppError> {
        tokio::time::sleep(Duration::from_millis(100)).await;
        Ok(1)
    }
    assert_eq!(quick(&client).await.unwrap(), 1);
}

#[tokio::test]
async fn a_lock_lost_while_the_body_runs_drops_the_body() {
    let (server, client) =
        setup_with(Config::default().lock_watchdog_timeout(Duration::from_secs(1))).await;
    let other = Client::connect(&server.url(), Config::default())
        .await
        .unwrap();
    let finished = Arc::new(AtomicBool::new(false));

    #[locked(client = &client, name = "jobs:{n}")]
    async fn job(client: Client, n: u32, finished: Arc<AtomicBool>) -> Result<(), AppError> {
        tokio::time::sleep(Duration::from_secs(5)).await;
        finished.store(true, Ordering::SeqCst);
        Ok(())
    }

    let call = tokio::spawn(job(client.clone(), 3, finished.clone()));
    let probe = other.get_lock("jobs:3");
    let deadline = Instant::now() + Duration::from_secs(2);
    while !probe.is_locked().await.unwrap() {
        assert!(Instant::now() < deadline, "the call never took the lock");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Another client deletes it: the watchdog learns at its next renewal (timeout / 3).
    assert!(probe.force_unlock().await.unwrap());
    let started = Instant::now();
    let result = call.await.unwrap();
    assert!(
        matches!(&result, Err(AppError::Lock(Error::LockLost { lock })) if lock == "jobs:3"),
        "{result:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert!(!finished.load(Ordering::SeqCst));
    assert_eq!(client.stats().watchdog_holds, 0);
}

#[tokio::test]
async fn the_watchdog_honours_max_renewals() {
    let config = Config::default()
        .lock_watchdog_timeout(Duration::from_secs(1))
        .max_renewals(Some(2));
    let (_server, client) = setup_with(config).await;

    #[locked(client = &client, name = "capped")]
    async fn long(client: &Client) -> Result<(), AppError> {
        tokio::time::sleep(Duration::from_secs(10)).await;
        Ok(())
    }
    #[locked(client = &client, name = "capped")]
    async fn short(client: &Client) -> Result<(), AppError> {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        Ok(())
    }

    // Two renewals (about every 333 ms) carry the lock to about 1.67 s.
    short(&client).await.unwrap();
    let started = Instant::now();
    let result = long(&client).await;
    assert!(
        matches!(result, Err(AppError::Lock(Error::LockLost { .. }))),
        "{result:?}"
    );
    let took = started.elapsed();
    assert!(took > Duration::from_millis(1200), "{took:?}");
    assert!(took < Duration::from_secs(4), "{took:?}");
}

#[tokio::test]
async fn name_templates_use_arguments_fields_and_literal_braces() {
    let (_server, client) = setup().await;
    struct Order {
        id: u64,
        customer: (String, u8),
    }

    #[locked(client = client, name = "{{shop}}:{order.customer.0}:{order.id}:{n}")]
    async fn place(client: &Client, order: &Order, n: i32) -> Result<String, AppError> {
        let name = format!("{{shop}}:{}:{}:{n}", order.customer.0, order.id);
        assert!(client.get_lock(&name).is_locked().await?, "{name} is held");
        Ok(name)
    }

    let order = Order {
        id: 42,
        customer: ("ada".into(), 1),
    };
    let name = place(&client, &order, -1).await.unwrap();
    assert_eq!(name, "{shop}:ada:42:-1");
    assert_eq!(order.customer.1, 1);
}

#[tokio::test]
async fn read_calls_share_and_a_write_call_excludes_them() {
    let (_server, client) = setup().await;
    let svc = Service::new(client);
    let (a, b) = tokio::join!(svc.read(), svc.read());
    a.unwrap();
    b.unwrap();
    assert_eq!(svc.overlap.max.load(Ordering::SeqCst), 2, "readers share");

    let svc = Service::new(svc.client.clone());
    let (a, b, c) = tokio::join!(svc.write(), svc.read(), svc.write());
    a.unwrap();
    b.unwrap();
    c.unwrap();
    assert_eq!(
        svc.overlap.max.load(Ordering::SeqCst),
        1,
        "a writer is alone"
    );
}

#[tokio::test]
async fn every_kind_and_duration_expressions() {
    let (_server, client) = setup().await;
    let wait = Duration::from_secs(2);

    #[locked(client = client, name = "k:fair", kind = fair, wait = "2s")]
    async fn fair(client: &Client) -> Result<bool, Error> {
        client.get_fair_lock("k:fair").is_locked().await
    }
    #[locked(client = client, name = "k:fenced", kind = fenced)]
    async fn fenced(client: &Client) -> Result<bool, Error> {
        client.get_fenced_lock("k:fenced").is_locked().await
    }
    #[locked(client = client, name = "k:spin", kind = "spin", lease = Duration::from_secs(5))]
    async fn spin(client: &Client) -> Result<bool, Error> {
        client.get_spin_lock("k:spin").is_locked().await
    }
    #[locked(client = client, name = "k:re", kind = reentrant, wait = wait, lease = "1m")]
    async fn reentrant(client: &Client, wait: Duration) -> Result<bool, Error> {
        let _ = wait;
        client.get_lock("k:re").is_locked().await
    }

    assert!(fair(&client).await.unwrap());
    assert!(fenced(&client).await.unwrap());
    assert!(spin(&client).await.unwrap());
    assert!(reentrant(&client, wait).await.unwrap());
    for name in ["k:fair", "k:fenced", "k:spin", "k:re"] {
        assert!(!client.get_lock(name).is_locked().await.unwrap(), "{name}");
    }
}

#[tokio::test]
async fn body_errors_and_early_returns_pass_through_and_release_the_lock() {
    let (_server, client) = setup().await;

    #[locked(client = client, name = "early")]
    async fn early(client: &Client, fail: bool) -> Result<u8, AppError> {
        if fail {
            return Err(AppError::Body("failed"));
        }
        let n: u8 = "7".parse().map_err(|_| AppError::Body("parse"))?;
        Ok(n)
    }

    assert!(matches!(
        early(&client, true).await,
        Err(AppError::Body("failed"))
    ));
    assert_eq!(early(&client, false).await.unwrap(), 7);
    assert!(!client.get_lock("early").is_locked().await.unwrap());
}

#[tokio::test]
async fn run_helpers_without_the_attribute() {
    let (_server, client) = setup().await;
    let lock = client.get_lock_with_owner("helpers", redisson_lock::Owner::new());
    let observed = lock
        .run(|| async { lock.hold_count().await })
        .await
        .unwrap();
    assert_eq!(observed, 1);
    assert!(!lock.is_locked().await.unwrap());

    // The run future is 'static and Send when the body is: spawn it.
    let owned = client.get_lock_with_owner("helpers", redisson_lock::Owner::new());
    let probe = client.get_lock_with_owner("helpers", redisson_lock::Owner::new());
    let task = tokio::spawn(
        owned.run_with_lease(Duration::from_secs(5), move || async move {
            probe.remaining_ttl().await
        }),
    );
    let ttl = task.await.unwrap().unwrap();
    assert!(
        matches!(ttl, redisson_lock::Ttl::Expires(d) if d > Duration::from_secs(3)),
        "{ttl:?}"
    );

    let busy = client
        .get_lock_with_owner("helpers", redisson_lock::Owner::new())
        .lock()
        .await
        .unwrap();
    let r: Result<(), Error> = lock
        .try_run_with_lease(Duration::ZERO, Duration::from_secs(1), || async {
            unreachable!("the body does not run without the lock")
        })
        .await;
    assert!(matches!(r, Err(Error::NotAcquired { .. })), "{r:?}");
    busy.unlock().await.unwrap();

    // A zero lease is refused before anything runs.
    let r: Result<(), Error> = lock
        .run_with_lease(Duration::ZERO, || async { unreachable!() })
        .await;
    assert!(matches!(r, Err(Error::InvalidArgument(_))), "{r:?}");
}
