//! Run-once jobs: a second instance skips while the first runs (and while a foreign holder
//! holds the name); after an early end the name stays held until `at_least` by its TTL (PTTL
//! bounds checked), then another instance runs; `at_most` cuts the job; the job is told the
//! moment its hold is lost.

use redisson_lock_test_kit as common;

use std::time::Duration;

use common::RedisServer;
use redisson_lock::{Client, Config, HoldState, RunOnce};
use tokio::time::{timeout, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_instance_skips_while_the_first_runs_or_a_foreign_holder_holds_the_name() {
    let server = RedisServer::start();
    let a = Client::connect(&server.url(), Config::default())
        .await
        .unwrap();
    let b = Client::connect(&server.url(), Config::default())
        .await
        .unwrap();
    let admin = common::Admin::connect(&server.url()).await;
    let (running_tx, running) = tokio::sync::oneshot::channel();
    let (finish_tx, finish) = tokio::sync::oneshot::channel::<()>();
    let first = tokio::spawn({
        let a = a.clone();
        async move {
            a.run_once(
                "tick",
                Duration::ZERO,
                Duration::from_secs(10),
                |hold| async move {
                    assert_eq!(hold.state(), HoldState::Held);
                    redisson_lock::assert_locked().unwrap();
                    running_tx.send(()).unwrap();
                    finish.await.unwrap();
                    7
                },
            )
            .await
        }
    });
    timeout(Duration::from_secs(5), running)
        .await
        .unwrap()
        .unwrap();
    let started = Instant::now();
    let second = b
        .run_once("tick", Duration::ZERO, Duration::from_secs(10), |_| async {
            panic!("must not run while the first runs")
        })
        .await
        .unwrap();
    assert_eq!(second, RunOnce::<()>::Skipped);
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "skipped at once"
    );
    finish_tx.send(()).unwrap();
    assert_eq!(first.await.unwrap().unwrap(), RunOnce::Ran(7));
    // at_least zero: released at the end.
    assert!(!admin.exists("tick").await);

    // A holder this crate did not write (a Java RLock holder) makes it skip too.
    admin
        .java_hold("tick", "0b5a55b0-1f6b-4b8e-9d0a-6d1c0e3b2a55:9", 30_000)
        .await;
    let skipped = b
        .run_once("tick", Duration::ZERO, Duration::from_secs(1), |_| async {})
        .await
        .unwrap();
    assert_eq!(skipped, RunOnce::Skipped);
    assert_eq!(
        admin.hgetall("tick").await.len(),
        1,
        "the foreign hold is untouched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_early_end_keeps_the_name_until_at_least_by_its_ttl_then_another_runs() {
    let server = RedisServer::start();
    // A watchdog timeout far from at_least: a TTL left by the watchdog would show.
    let config = Config::default().lock_watchdog_timeout(Duration::from_secs(10));
    let a = Client::connect(&server.url(), config.clone())
        .await
        .unwrap();
    let b = Client::connect(&server.url(), config).await.unwrap();
    let admin = common::Admin::connect(&server.url()).await;
    let at_least = Duration::from_millis(1500);
    let started = Instant::now();
    let ran = a
        .run_once("early", at_least, Duration::from_secs(5), |_| async { 1 })
        .await
        .unwrap();
    assert_eq!(ran, RunOnce::Ran(1));
    // The hold is kept by its TTL: at most what is left of at_least, and no longer renewed.
    let pttl = admin.pttl("early").await;
    let left = at_least.saturating_sub(started.elapsed()).as_millis() as i64;
    assert!(
        pttl > 0 && pttl <= left + 5,
        "PTTL {pttl} ms, {left} ms left"
    );
    assert!(pttl >= 1000, "PTTL {pttl} ms: most of at_least is left");
    assert_eq!(
        a.stats().watchdog_holds,
        0,
        "the watchdog no longer renews it"
    );
    // Another instance skips until then...
    let skipped = b
        .run_once("early", Duration::ZERO, Duration::from_secs(5), |_| async {
            2
        })
        .await
        .unwrap();
    assert_eq!(skipped, RunOnce::Skipped);
    // ...and runs once it has passed (the key expired, nothing released it early).
    let freed = common::eventually(Duration::from_secs(3), || async {
        !admin.exists("early").await
    })
    .await;
    assert!(freed);
    let expired_after = started.elapsed();
    assert!(
        expired_after >= at_least - Duration::from_millis(20),
        "{expired_after:?}"
    );
    let ran = b
        .run_once("early", Duration::ZERO, Duration::from_secs(5), |_| async {
            3
        })
        .await
        .unwrap();
    assert_eq!(ran, RunOnce::Ran(3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_cuts_the_job_and_the_job_is_told_when_its_hold_is_lost() {
    let server = RedisServer::start();
    let client = Client::connect(
        &server.url(),
        Config::default().lock_watchdog_timeout(Duration::from_millis(900)),
    )
    .await
    .unwrap();
    let admin = common::Admin::connect(&server.url()).await;
    // at_most: the job is dropped there and the name released.
    let started = Instant::now();
    let cut = client
        .run_once(
            "long",
            Duration::ZERO,
            Duration::from_millis(400),
            |_| async {
                std::future::pending::<()>().await;
            },
        )
        .await
        .unwrap();
    let took = started.elapsed();
    assert_eq!(cut, RunOnce::TimedOut);
    assert!(took >= Duration::from_millis(390), "{took:?}");
    assert!(took < Duration::from_secs(2), "{took:?}");
    assert!(!admin.exists("long").await);

    // The job learns of a loss (its key deleted) while it runs, and sees it in assert_locked.
    let admin2 = common::Admin::connect(&server.url()).await;
    let told = client
        .run_once(
            "told",
            Duration::ZERO,
            Duration::from_secs(5),
            |hold| async move {
                admin2.cmd("DEL", vec!["told".into()]).await.unwrap();
                timeout(Duration::from_secs(3), hold.lost())
                    .await
                    .expect("told of the loss");
                (hold.state(), redisson_lock::assert_locked().is_err())
            },
        )
        .await
        .unwrap();
    assert_eq!(told, RunOnce::Ran((HoldState::Lost, true)));
    // Bad bounds are refused before anything is sent.
    let err = client
        .run_once(
            "x",
            Duration::from_secs(2),
            Duration::from_secs(1),
            |_| async {},
        )
        .await
        .unwrap_err();
    assert_eq!(err.kind(), redisson_lock::ErrorKind::InvalidArgument);
}

struct Jobs {
    client: Client,
}

impl Jobs {
    #[redisson_lock::run_once(client = &self.client, name = "job:{day}", at_least = "1s", at_most = "5s")]
    async fn nightly(&self, day: u32) -> Result<u32, redisson_lock::Error> {
        redisson_lock::assert_locked()?;
        Ok(day)
    }

    #[redisson_lock::run_once(client = &self.client, name = "hang", at_most = "300ms")]
    async fn hangs(&self) -> Result<(), redisson_lock::Error> {
        std::future::pending::<()>().await;
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_attribute_runs_once_skips_while_kept_and_is_cut_at_at_most() {
    let server = RedisServer::start();
    let jobs = Jobs {
        client: Client::connect(&server.url(), Config::default())
            .await
            .unwrap(),
    };
    let admin = common::Admin::connect(&server.url()).await;
    assert_eq!(jobs.nightly(1).await.unwrap(), 1);
    let pttl = admin.pttl("job:1").await;
    assert!(
        pttl > 500 && pttl <= 1000,
        "kept until at_least: PTTL {pttl}"
    );
    let skipped = jobs.nightly(1).await.unwrap_err();
    assert_eq!(skipped.kind(), redisson_lock::ErrorKind::NotAcquired);
    let cut = jobs.hangs().await.unwrap_err();
    assert_eq!(cut.kind(), redisson_lock::ErrorKind::LockLost);
}

/// The blocking facade: the job runs on the calling thread, `assert_locked()` works there, an
/// early end keeps the name until `at_least` (PTTL), a held name skips; at `at_most` the hold
/// is cut under the running job: the name is free for another instance at once, the job sees
/// `Lost` (and `assert_locked` fails) from that moment, and its late end is `TimedOut`.
#[test]
fn the_blocking_facade_runs_skips_keeps_at_least_and_cuts_the_hold_at_at_most() {
    use redisson_lock::blocking;
    let server = RedisServer::start();
    let a = blocking::Client::connect(&server.url(), Config::default()).unwrap();
    let b = blocking::Client::connect(&server.url(), Config::default()).unwrap();

    // Ran, with at_least kept by the key's TTL; b skips meanwhile.
    let ran = a
        .run_once(
            "bjob",
            Duration::from_millis(1500),
            Duration::from_secs(10),
            |hold| {
                assert_eq!(hold.state(), HoldState::Held);
                redisson_lock::assert_locked().unwrap();
                5
            },
        )
        .unwrap();
    assert_eq!(ran, RunOnce::Ran(5));
    assert!(
        redisson_lock::assert_locked().is_err(),
        "no hold outside the job"
    );
    let skipped = b
        .run_once("bjob", Duration::ZERO, Duration::from_secs(5), |_| {
            panic!("must not run while a's at_least holds the name")
        })
        .unwrap();
    assert_eq!(skipped, RunOnce::Skipped);
    let ttl = b.get_lock("bjob").remaining_ttl().unwrap();
    assert!(
        matches!(ttl, redisson_lock::Ttl::Expires(d) if d <= Duration::from_millis(1500)),
        "{ttl:?}"
    );

    // Cut at at_most while the job still runs.
    let (cut_tx, cut_rx) = std::sync::mpsc::channel();
    let start = std::time::Instant::now();
    let outcome = std::thread::scope(|scope| {
        let job = scope.spawn(|| {
            a.run_once("bcut", Duration::ZERO, Duration::from_millis(800), |hold| {
                // A long job that checks before each step.
                while hold.is_held() {
                    redisson_lock::assert_locked().unwrap();
                    std::thread::sleep(Duration::from_millis(20));
                    assert!(start.elapsed() < Duration::from_secs(10), "never cut");
                }
                cut_tx.send(start.elapsed()).unwrap();
                assert_eq!(hold.state(), HoldState::Lost);
                assert!(redisson_lock::assert_locked().is_err());
                // Another instance takes the name while this job still runs.
                let taken = b
                    .get_lock("bcut")
                    .try_lock()
                    .unwrap()
                    .expect("free after the cut");
                taken.unlock().unwrap();
                "late"
            })
        });
        let cut_at = cut_rx.recv_timeout(Duration::from_secs(15)).expect("cut");
        assert!(
            cut_at >= Duration::from_millis(780) && cut_at < Duration::from_millis(2500),
            "cut at at_most: {cut_at:?}"
        );
        job.join().unwrap()
    });
    assert_eq!(outcome.unwrap(), RunOnce::TimedOut);
}

// ---------------------------------------------------------------------------------------------
// `at_least` longer than the watchdog timeout, across faults (issue 38, finding 3): the name is
// never free for a second instance before `at_least`, whatever ends the first run.

const AT_LEAST: Duration = Duration::from_secs(5);

/// A client with a 1 s watchdog (renewals every 333 ms): `at_least` is five timeouts.
fn short_watchdog() -> Config {
    Config::default().lock_watchdog_timeout(Duration::from_secs(1))
}

/// While `at_least` from `start` lasts (less a margin for the clock), every run of `name` by
/// `other` is skipped; after it, one runs within two seconds.
async fn skipped_until_at_least_then_runs(other: &Client, name: &str, start: Instant) {
    let margin = Duration::from_millis(300);
    while Instant::now() + margin < start + AT_LEAST {
        let at = start.elapsed();
        let outcome = other
            .run_once(name, Duration::ZERO, Duration::from_secs(5), |_| async {})
            .await
            .unwrap();
        assert_eq!(
            outcome,
            RunOnce::Skipped,
            "a second run {at:?} after the first began, inside at_least ({AT_LEAST:?})"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let deadline = start + AT_LEAST + Duration::from_secs(2);
    loop {
        let outcome = other
            .run_once(name, Duration::ZERO, Duration::from_secs(5), |_| async {})
            .await
            .unwrap();
        if outcome == RunOnce::Ran(()) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "still held {:?} after at_least",
            start.elapsed() - AT_LEAST
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The job ends after several renewals and the connection drops at that moment, refused for
/// longer than the command timeout: the TTL set at the end fails. The name stays held until
/// `at_least` (the acquisition's TTL covered it; renewals never lowered it), where it used to
/// end one watchdog timeout after the last renewal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_least_is_kept_when_the_connection_drops_as_the_job_ends() {
    let server = RedisServer::start();
    let proxy = std::sync::Arc::new(common::proxy::Proxy::start(server.port()).await);
    let a = Client::connect(
        &proxy.url(),
        short_watchdog()
            .timeout(Duration::from_millis(500))
            .retry_attempts(1),
    )
    .await
    .unwrap();
    let b = Client::connect(&server.url(), Config::default())
        .await
        .unwrap();
    let start = Instant::now();
    let job = {
        let proxy = proxy.clone();
        move |_| async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            proxy.refuse(true).await;
            proxy.reset();
        }
    };
    let ran = a
        .run_once("drop-at-end", AT_LEAST, Duration::from_secs(30), job)
        .await
        .unwrap();
    assert_eq!(ran, RunOnce::Ran(()));
    skipped_until_at_least_then_runs(&b, "drop-at-end", start).await;
    proxy.refuse(false).await;
}

/// The job ends as the server goes down, and it comes back from its AOF 1.5 s later (the TTL
/// set at the end fails meanwhile): the key comes back with the TTL the acquisition gave it, so
/// the name is held until `at_least` (it used to come back with the last renewal's, already
/// past).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_least_is_kept_across_a_restart_with_persistence() {
    let server = std::sync::Arc::new(parking_lot::Mutex::new(RedisServer::start_with(&[
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
    ])));
    let url = server.lock().url();
    let a = Client::connect(
        &url,
        short_watchdog()
            .timeout(Duration::from_millis(500))
            .retry_attempts(1),
    )
    .await
    .unwrap();
    let start = Instant::now();
    let job = {
        let server = server.clone();
        move |_| async move {
            tokio::time::sleep(Duration::from_millis(1500)).await;
            server.lock().kill();
            tokio::task::spawn_blocking(move || {
                std::thread::sleep(Duration::from_millis(1500));
                server.lock().restart()
            });
        }
    };
    let ran = a
        .run_once("restart-at-end", AT_LEAST, Duration::from_secs(30), job)
        .await
        .unwrap();
    assert_eq!(ran, RunOnce::Ran(()));
    let port = server.lock().port();
    let up = Instant::now() + Duration::from_secs(10);
    while !common::redis_server::ping(port) {
        assert!(Instant::now() < up, "the server did not come back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let b = Client::connect(&url, Config::default()).await.unwrap();
    skipped_until_at_least_then_runs(&b, "restart-at-end", start).await;
}

/// The run's future is dropped while its job runs: the job is dropped, and the name is kept
/// until `at_least` (it used to be released at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_least_is_kept_when_the_run_is_dropped() {
    let server = RedisServer::start();
    let a = Client::connect(&server.url(), short_watchdog())
        .await
        .unwrap();
    let b = Client::connect(&server.url(), Config::default())
        .await
        .unwrap();
    let (began_tx, began) = tokio::sync::oneshot::channel();
    let start = Instant::now();
    let run = a.run_once(
        "dropped",
        AT_LEAST,
        Duration::from_secs(30),
        |_| async move {
            began_tx.send(()).unwrap();
            std::future::pending::<()>().await
        },
    );
    tokio::select! {
        _ = run => panic!("the job never ends"),
        _ = began => {}
    }
    skipped_until_at_least_then_runs(&b, "dropped", start).await;
}

/// A blocking job that panics: the panic reaches the caller, and the name is kept until
/// `at_least`, then free (it used to stay held and renewed until `at_most`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_blocking_job_keeps_at_least_and_frees_the_name_after_it() {
    let server = RedisServer::start();
    let url = server.url();
    let start = Instant::now();
    // The client lives on (as in a service): only the panic ends the run.
    let (a, panicked) = tokio::task::spawn_blocking(move || {
        let a = redisson_lock::blocking::Client::connect(&url, short_watchdog()).unwrap();
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            a.run_once("panics", AT_LEAST, Duration::from_secs(60), |_| {
                std::thread::sleep(Duration::from_millis(500));
                panic!("the job fails")
            })
        }))
        .is_err();
        (a, panicked)
    })
    .await
    .unwrap();
    assert!(panicked, "the panic reaches the caller");
    let b = Client::connect(&server.url(), Config::default())
        .await
        .unwrap();
    skipped_until_at_least_then_runs(&b, "panics", start).await;
    tokio::task::spawn_blocking(move || drop(a)).await.unwrap();
}

/// On every deployment: a job that spans several renewals of a 1 s watchdog and ends early
/// keeps its name until `at_least` (five timeouts), then another instance runs it.
async fn a_long_at_least_holds_the_name_until_then(b: common::Backend) {
    let name = b.name("once:long");
    let a = b
        .client_with(b.config().lock_watchdog_timeout(Duration::from_secs(1)))
        .await;
    let other = b.client().await;
    let start = Instant::now();
    let ran = a
        .run_once(
            &name,
            AT_LEAST,
            Duration::from_secs(30),
            |hold| async move {
                tokio::time::sleep(Duration::from_millis(1500)).await;
                hold.assert_locked().unwrap();
            },
        )
        .await
        .unwrap();
    assert_eq!(ran, RunOnce::Ran(()));
    skipped_until_at_least_then_runs(&other, &name, start).await;
}

common::backend_tests!(any: a_long_at_least_holds_the_name_until_then);
