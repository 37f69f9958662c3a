//! The `metrics` feature against a real redis-server, read back through a recording
//! `metrics::Recorder` (one per test binary, so everything runs in one test function).
#![cfg(feature = "metrics")]

use redisson_lock_test_kit as common;

use std::{
    collections::BTreeMap,
    sync::{atomic::AtomicU64, atomic::Ordering, Arc, Mutex, OnceLock},
    time::Duration,
};

use common::{Admin, RedisServer};
use fred::interfaces::KeysInterface;
use metrics::{
    Counter, Gauge, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use redisson_lock::{Client, Config};

/// Values by `name{label=value,...}` (labels sorted).
#[derive(Default)]
struct Recording {
    counters: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
    gauges: Mutex<BTreeMap<String, Arc<AtomicU64>>>,
    histograms: Mutex<BTreeMap<String, Arc<Samples>>>,
}

#[derive(Default)]
struct Samples(Mutex<Vec<f64>>);

impl HistogramFn for Samples {
    fn record(&self, value: f64) {
        self.0.lock().unwrap().push(value);
    }
}

fn id(key: &Key) -> String {
    let mut labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    labels.sort();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

struct Shared(Arc<Recording>);

impl Recorder for Shared {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut map = self.0.counters.lock().unwrap();
        Counter::from_arc(map.entry(id(key)).or_default().clone())
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        let mut map = self.0.gauges.lock().unwrap();
        Gauge::from_arc(map.entry(id(key)).or_default().clone())
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        let mut map = self.0.histograms.lock().unwrap();
        Histogram::from_arc(map.entry(id(key)).or_default().clone())
    }
}

fn recording() -> &'static Arc<Recording> {
    static REC: OnceLock<Arc<Recording>> = OnceLock::new();
    REC.get_or_init(|| {
        let rec = Arc::new(Recording::default());
        metrics::set_global_recorder(Shared(rec.clone())).expect("first recorder");
        rec
    })
}

fn counter(name: &str) -> u64 {
    let map = recording().counters.lock().unwrap();
    map.get(name).map_or(0, |c| c.load(Ordering::SeqCst))
}

fn gauge(name: &str) -> f64 {
    let map = recording().gauges.lock().unwrap();
    map.get(name)
        .map_or(0.0, |g| f64::from_bits(g.load(Ordering::SeqCst)))
}

fn samples(name: &str) -> Vec<f64> {
    let map = recording().histograms.lock().unwrap();
    map.get(name)
        .map_or_else(Vec::new, |h| h.0.lock().unwrap().clone())
}

async fn eventually(what: &str, f: impl Fn() -> bool) {
    let ok = common::eventually(Duration::from_secs(10), || {
        let v = f();
        async move { v }
    })
    .await;
    assert!(ok, "{what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquisitions_holds_renewals_losses_and_subscriptions_are_measured() {
    recording();
    let s = RedisServer::start();
    let admin = Admin::connect(&s.url()).await;
    let config = Config::default().lock_watchdog_timeout(Duration::from_millis(600));
    let client = Client::connect(&s.url(), config).await.unwrap();

    // Acquired, then busy for another owner.
    let lock = client.get_lock_with_owner("m:r", redisson_lock::Owner::new());
    let guard = lock.lock().await.unwrap();
    assert_eq!(
        counter("redisson_lock_acquisitions_total{kind=reentrant,outcome=acquired}"),
        1
    );
    assert_eq!(gauge("redisson_lock_held{kind=reentrant}"), 1.0);
    assert_eq!(gauge("redisson_lock_waiters{kind=reentrant}"), 0.0);
    let waits = samples("redisson_lock_wait_seconds{kind=reentrant,outcome=acquired}");
    assert_eq!(waits.len(), 1);
    assert!(waits[0] >= 0.0 && waits[0] < 5.0, "{waits:?}");
    assert!(client
        .get_lock_with_owner("m:r", redisson_lock::Owner::new())
        .try_lock()
        .await
        .unwrap()
        .is_none());
    assert_eq!(
        counter("redisson_lock_acquisitions_total{kind=reentrant,outcome=not_acquired}"),
        1
    );

    // A waiter: one live waiter and one subscription while it waits; cancelled when aborted.
    let fair = client.get_fair_lock_with_owner("m:f", redisson_lock::Owner::new());
    let fair_guard = fair.lock().await.unwrap();
    let waiter = tokio::spawn(
        client
            .get_fair_lock_with_owner("m:f", redisson_lock::Owner::new())
            .lock(),
    );
    eventually("a waiting fair acquisition", || {
        gauge("redisson_lock_waiters{kind=fair}") == 1.0
            && gauge("redisson_lock_subscriptions{}") == 1.0
    })
    .await;
    waiter.abort();
    assert!(waiter.await.unwrap_err().is_cancelled());
    assert_eq!(
        counter("redisson_lock_acquisitions_total{kind=fair,outcome=cancelled}"),
        1
    );
    assert_eq!(gauge("redisson_lock_waiters{kind=fair}"), 0.0);
    eventually("the subscription is left", || {
        gauge("redisson_lock_subscriptions{}") == 0.0
    })
    .await;
    fair_guard.unlock().await.unwrap();
    assert_eq!(gauge("redisson_lock_held{kind=fair}"), 0.0);

    // Renewals (every 200 ms), then a loss when the key disappears.
    eventually("two renewals", || {
        counter("redisson_lock_renewals_total{}") >= 2
    })
    .await;
    // A permit without a lease is renewed by the same runs, counted as a renewal and as a
    // permit renewal.
    assert_eq!(counter("redisson_lock_permit_renewals_total{}"), 0);
    let ps = client.get_permit_expirable_semaphore("m:wdpsem");
    assert!(ps.try_set_permits(1).await.unwrap());
    let permit = ps.acquire(None).await.unwrap();
    let renewals = counter("redisson_lock_renewals_total{}");
    eventually("two permit renewals", || {
        counter("redisson_lock_permit_renewals_total{}") >= 2
    })
    .await;
    assert!(counter("redisson_lock_renewals_total{}") >= renewals + 2);
    assert!(permit.release().await.unwrap());
    let _: i64 = admin.redis.del("m:r").await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("the watchdog saw the loss");
    assert_eq!(counter("redisson_lock_lost_total{}"), 1);
    drop(guard);
    assert_eq!(gauge("redisson_lock_held{kind=reentrant}"), 0.0);
    let holds = samples("redisson_lock_hold_seconds{kind=reentrant}");
    assert_eq!(holds.len(), 1);
    assert!(holds[0] >= 0.2, "held through renewals: {holds:?}");

    // An error outcome: the key holds another type.
    let _: () = admin
        .redis
        .set("m:s", "x", None, None, false)
        .await
        .unwrap();
    assert!(client
        .get_spin_lock_with("m:s", redisson_lock::Owner::new(), Default::default())
        .try_lock()
        .await
        .is_err());
    assert_eq!(
        counter("redisson_lock_acquisitions_total{kind=spin,outcome=error}"),
        1
    );

    // A renewal that fails (the server is gone) is counted.
    let held = client
        .get_lock_with_owner("m:r2", redisson_lock::Owner::new())
        .lock()
        .await
        .unwrap();
    drop(s);
    eventually("a failed renewal", || {
        counter("redisson_lock_renewal_failures_total{}") >= 1
    })
    .await;
    held.keep();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronizer_acquisitions_waits_guards_and_operations_are_measured() {
    recording();
    let s = RedisServer::start();
    let client = Client::connect(&s.url(), Config::default()).await.unwrap();
    let sem = client.get_semaphore("m:sem");
    assert!(sem.try_set_permits(1).await.unwrap());
    let taken = sem.try_acquire(1).await.unwrap().expect("one permit");
    assert!(sem.try_acquire(1).await.unwrap().is_none());
    taken.release().await.unwrap();
    assert_eq!(
        counter("redisson_lock_acquisitions_total{kind=semaphore,outcome=acquired}"),
        1
    );
    assert_eq!(
        counter("redisson_lock_acquisitions_total{kind=semaphore,outcome=not_acquired}"),
        1
    );
    assert_eq!(
        counter("redisson_lock_sync_operations_total{object=semaphore,op=set}"),
        1
    );
    assert_eq!(
        counter("redisson_lock_sync_operations_total{object=semaphore,op=release}"),
        1
    );

    let ps = client.get_permit_expirable_semaphore("m:psem");
    assert!(ps.try_set_permits(1).await.unwrap());
    let permit = ps.acquire(None).await.unwrap();
    assert_eq!(gauge("redisson_lock_held{kind=permit_semaphore}"), 1.0);
    assert!(permit.release().await.unwrap());
    assert_eq!(gauge("redisson_lock_held{kind=permit_semaphore}"), 0.0);
    assert_eq!(
        samples("redisson_lock_hold_seconds{kind=permit_semaphore}").len(),
        1
    );

    let latch = client.get_count_down_latch("m:cdl");
    assert!(latch.try_set_count(1).await.unwrap());
    assert!(!latch.wait_for(Duration::from_millis(50)).await.unwrap());
    latch.count_down().await.unwrap();
    assert!(latch.wait_for(Duration::from_millis(50)).await.unwrap());
    assert_eq!(
        counter("redisson_lock_acquisitions_total{kind=count_down_latch,outcome=not_acquired}"),
        1
    );
    assert_eq!(
        counter("redisson_lock_acquisitions_total{kind=count_down_latch,outcome=acquired}"),
        1
    );
    assert_eq!(
        counter("redisson_lock_sync_operations_total{object=count_down_latch,op=count_down}"),
        1
    );
    client.shutdown().await;
}
