//! Leader election on the fenced lock's wire: one leader of two campaigning clients, a resign
//! that hands over and is observed at once, a leader whose key is deleted being lost (and
//! `run_as_leader`'s body cancelled), terms that strictly increase, the proclamation.

use redisson_lock_test_kit as common;

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        mpsc::RecvTimeoutError,
        Arc,
    },
    time::Duration,
};

use common::RedisServer;
use redisson_lock::{Client, Config, ErrorKind, HoldState, Leader, LeaderWatch};
use tokio::time::{timeout, Instant};

fn short_watchdog() -> Config {
    Config::default().lock_watchdog_timeout(Duration::from_millis(900))
}

type Seen = (Instant, Option<Leader>);

async fn next_seen(seen: &mut tokio::sync::mpsc::UnboundedReceiver<Seen>) -> Seen {
    timeout(Duration::from_secs(5), seen.recv())
        .await
        .expect("observed in time")
        .unwrap()
}

async fn next(watch: &mut LeaderWatch) -> Option<Leader> {
    timeout(Duration::from_secs(5), watch.next())
        .await
        .expect("a change in time")
        .expect("the stream is open")
        .expect("a look")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_of_two_clients_leads_and_a_resign_hands_over_observed_at_once() {
    let server = RedisServer::start();
    let a = Client::connect(&server.url(), Config::default())
        .await
        .unwrap();
    let b = Client::connect(&server.url(), Config::default())
        .await
        .unwrap();
    let admin = common::Admin::connect(&server.url()).await;
    // An observer that keeps looking, reporting each change with the time it saw it; a long
    // poll bound, so a change it sees within a second came by wake-up.
    let mut watch = a
        .get_election("el")
        .observe_every(Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(next(&mut watch).await, None, "nobody leads at first");
    let (seen_tx, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let observer = tokio::spawn(async move {
        loop {
            let change = next(&mut watch).await;
            if seen_tx.send((Instant::now(), change)).is_err() {
                return;
            }
        }
    });

    let first = a.get_election("el").campaign().await.unwrap();
    let waiting = tokio::spawn({
        let e = b.get_election("el");
        async move { e.campaign().await }
    });
    // b campaigns, but only a leads: the lock hash names a alone.
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiting.is_finished(), "b must not lead while a does");
    let fields = admin.hgetall("el").await;
    assert_eq!(fields.keys().collect::<Vec<_>>(), vec![first.holder()]);
    assert!(first.is_leading());
    assert!(first.proclaim("10.0.0.1:80").await.unwrap());
    // The observer learns a's leadership, then its proclaimed value.
    let seen_a = loop {
        let (_, l) = next_seen(&mut seen).await;
        let l = l.expect("a leads");
        if l.value.is_some() {
            break l;
        }
    };
    assert_eq!(seen_a.holder, first.holder());
    assert_eq!(seen_a.term, first.term());
    assert_eq!(seen_a.value.as_deref(), Some("10.0.0.1:80"));
    assert!(seen_a.is_of(&a) && !seen_a.is_of(&b));

    // The observer's looks slow down, doubling from 10 ms after each change: they come 1.27 s
    // and 2.55 s after the last change, then not before 5.11 s. Resigning at 2.7 s, only the
    // unlock message can make it see the change within a second.
    tokio::time::sleep(Duration::from_millis(2700)).await;
    let first_term = first.term();
    let resigned = Instant::now();
    first.resign().await.unwrap();
    let second = timeout(Duration::from_secs(5), waiting)
        .await
        .expect("b leads after the resign")
        .unwrap()
        .unwrap();
    assert!(second.term() > first_term);
    let (at, by_b) = loop {
        if let (at, Some(l)) = next_seen(&mut seen).await {
            break (at, l);
        }
    };
    let latency = at.saturating_duration_since(resigned);
    assert!(
        latency < Duration::from_secs(1),
        "observed after {latency:?}"
    );
    assert_eq!(by_b.holder, second.holder());
    assert_eq!(by_b.term, second.term());
    assert_eq!(
        by_b.value, None,
        "a's proclamation went with its leadership"
    );
    assert!(!admin.exists("redisson_lock_leader:{el}").await);
    second.resign().await.unwrap();
    assert!(!admin.exists("el").await);
    observer.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_key_is_deleted_is_lost_and_run_as_leader_cancels_its_body() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url(), short_watchdog())
        .await
        .unwrap();
    let admin = common::Admin::connect(&server.url()).await;

    // A campaign's leadership: deleted key → Lost at the next renewal (every 300 ms).
    let leadership = client.get_election("gone").campaign().await.unwrap();
    assert_eq!(leadership.state(), HoldState::Held);
    admin.cmd("DEL", vec!["gone".into()]).await.unwrap();
    timeout(Duration::from_secs(3), leadership.lost())
        .await
        .expect("lost after its key was deleted");
    assert_eq!(leadership.state(), HoldState::Lost);
    assert!(!leadership.is_leading());
    drop(leadership);

    // run_as_leader: the body runs, its key is deleted, the body is dropped and the campaign
    // starts again; the second term's body ends and its result comes back.
    let election = client.get_election("body");
    let started = Arc::new(tokio::sync::Notify::new());
    let cancelled = Arc::new(AtomicUsize::new(0));
    let terms = Arc::new(parking_lot::Mutex::new(Vec::new()));
    struct OnDrop(Arc<AtomicUsize>);
    impl Drop for OnDrop {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let run = tokio::spawn({
        let (started, cancelled, terms) = (started.clone(), cancelled.clone(), terms.clone());
        async move {
            election
                .run_as_leader(move |hold| {
                    let (started, cancelled, terms) =
                        (started.clone(), cancelled.clone(), terms.clone());
                    async move {
                        let first = {
                            let mut t = terms.lock();
                            t.push(hold.token().unwrap());
                            t.len() == 1
                        };
                        redisson_lock::assert_locked()?;
                        if first {
                            let _armed = OnDrop(cancelled);
                            started.notify_one();
                            std::future::pending::<()>().await;
                        }
                        Ok::<_, redisson_lock::Error>("second term done")
                    }
                })
                .await
        }
    });
    timeout(Duration::from_secs(5), started.notified())
        .await
        .expect("the body started");
    let deleted = Instant::now();
    admin.cmd("DEL", vec!["body".into()]).await.unwrap();
    let result = timeout(Duration::from_secs(5), run)
        .await
        .expect("the body was cancelled and the campaign won again")
        .unwrap()
        .unwrap();
    assert_eq!(result, "second term done");
    assert_eq!(
        cancelled.load(Ordering::SeqCst),
        1,
        "the first body was dropped"
    );
    assert!(deleted.elapsed() < Duration::from_secs(3));
    let terms = terms.lock().clone();
    assert_eq!(terms.len(), 2);
    assert!(terms[1] > terms[0], "{terms:?}");
    assert!(!admin.exists("body").await, "resigned after the body ended");
    assert!(
        redisson_lock::assert_locked().is_err(),
        "outside any recipe"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terms_strictly_increase_across_clients_and_a_foreign_holder_is_observed() {
    let server = RedisServer::start();
    let clients = [
        Client::connect(&server.url(), Config::default())
            .await
            .unwrap(),
        Client::connect(&server.url(), Config::default())
            .await
            .unwrap(),
    ];
    let admin = common::Admin::connect(&server.url()).await;
    let mut last = 0;
    for round in 0..6 {
        let l = clients[round % 2]
            .get_election("terms")
            .campaign()
            .await
            .unwrap();
        assert!(l.term() > last, "term {} after {last}", l.term());
        last = l.term();
        l.resign().await.unwrap();
    }
    // A holder this crate did not write (a Java RFencedLock holder's field) is the leader.
    admin
        .java_hold("terms", "0b5a55b0-1f6b-4b8e-9d0a-6d1c0e3b2a55:77", 30_000)
        .await;
    let leader = clients[0]
        .get_election("terms")
        .leader()
        .await
        .unwrap()
        .unwrap();
    assert_eq!(leader.holder, "0b5a55b0-1f6b-4b8e-9d0a-6d1c0e3b2a55:77");
    assert!(!leader.is_of(&clients[0]));
    assert!(clients[1]
        .get_election("terms")
        .try_campaign_for(Duration::ZERO)
        .await
        .unwrap()
        .is_none());
}

#[test]
fn the_blocking_facade_campaigns_proclaims_and_resigns() {
    let server = RedisServer::start();
    let a = redisson_lock::blocking::Client::connect(&server.url(), Config::default()).unwrap();
    let b = redisson_lock::blocking::Client::connect(&server.url(), Config::default()).unwrap();
    let first = a.get_election("bl").campaign().unwrap();
    assert!(first.is_leading());
    assert!(first.proclaim("a").unwrap());
    assert!(b
        .get_election("bl")
        .try_campaign_for(Duration::from_millis(100))
        .unwrap()
        .is_none());
    let seen = b.get_election("bl").leader().unwrap().unwrap();
    assert_eq!(seen.term, first.term());
    assert_eq!(seen.value.as_deref(), Some("a"));
    let term = first.term();
    first.resign().unwrap();
    let second = b.get_election("bl").campaign().unwrap();
    assert!(second.term() > term);
    second.resign().unwrap();
}

/// The blocking twin of `observe`: the first item is who leads now, the next the change a
/// resign makes (well within the 30 s poll), a bounded wait with
/// no change times out and keeps the watch, and the iterator ends after the client's shutdown.
#[test]
fn the_blocking_facade_observes_who_leads_and_ends_after_shutdown() {
    let server = RedisServer::start();
    let a = redisson_lock::blocking::Client::connect(&server.url(), Config::default()).unwrap();
    let b = redisson_lock::blocking::Client::connect(&server.url(), Config::default()).unwrap();
    assert_eq!(
        b.get_election("bl-watch")
            .observe_every(Duration::ZERO)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidArgument
    );
    let leading = a.get_election("bl-watch").campaign().unwrap();
    assert!(leading.proclaim("a:1").unwrap());
    // A poll of 30 s: the resign must be seen from its message, not by a poll.
    let mut leaders = b
        .get_election("bl-watch")
        .observe_every(Duration::from_secs(30))
        .unwrap();
    let now = leaders.next().expect("open").unwrap().expect("a leads");
    assert!(now.is_of(a.as_async()));
    assert_eq!(
        (now.term, now.value.as_deref()),
        (leading.term(), Some("a:1"))
    );
    assert_eq!(
        leaders
            .next_timeout(Duration::from_millis(200))
            .unwrap_err(),
        RecvTimeoutError::Timeout,
        "nothing changed"
    );
    let resigned = std::time::Instant::now();
    leading.resign().unwrap();
    let change = leaders
        .next_timeout(Duration::from_secs(10))
        .expect("the resign is a change")
        .unwrap();
    assert_eq!(change, None, "nobody leads");
    assert!(
        resigned.elapsed() < Duration::from_secs(5),
        "seen well within the 30 s poll"
    );
    b.shutdown();
    assert_eq!(
        leaders.next_timeout(Duration::from_secs(10)).unwrap_err(),
        RecvTimeoutError::Disconnected
    );
    assert!(leaders.next().is_none(), "the iterator ends");
}

// ---------------------------------------------------------------------------------------------
// run_as_leader under faults (issue 38, finding 4): the body stops while the term is in doubt
// and starts again in the same term once it is confirmed; a new term only after a loss.

/// The election's token counter: the terms spent so far.
fn terms_spent(port: u16, election: &str) -> u64 {
    common::sentinel::cli(
        port,
        &["GET", &format!("redisson_lock_token:{{{election}}}")],
    )
    .trim()
    .parse()
    .unwrap_or(0)
}

/// A restart that keeps the data (AOF): the connection drops, the term is in doubt and the body
/// stops; the renewal on the new connection confirms the hold and the body starts once more, in
/// the same term. No term is spent (the code before campaigned again: a new term).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_as_leader_keeps_its_term_across_a_restart_with_persistence() {
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "always"]);
    let client = Client::connect(&server.url(), short_watchdog())
        .await
        .unwrap();
    let mut leading = common::Leading::start(client.get_election("kept"));
    let term = leading.next_start(Duration::from_secs(5)).await;
    server.restart();
    let again = leading.next_start(Duration::from_secs(10)).await;
    assert_eq!(again, term, "the body starts again in the same term");
    assert_eq!(terms_spent(server.port(), "kept"), term, "no term spent");
    assert!(
        !leading.starts_within(Duration::from_secs(2)).await,
        "the body started once more, not twice"
    );
    drop(leading);
    client.shutdown().await;
}

/// A restart that loses the data: the term is lost and one new term begins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_as_leader_spends_one_term_when_a_restart_loses_its_hold() {
    let mut server = RedisServer::start();
    let client = Client::connect(&server.url(), short_watchdog())
        .await
        .unwrap();
    let mut leading = common::Leading::start(client.get_election("wiped"));
    let term = leading.next_start(Duration::from_secs(5)).await;
    server.restart_empty();
    // The token counter went with the data: the new term counts from 1 again.
    let next = leading.next_start(Duration::from_secs(10)).await;
    assert_eq!((term, next), (1, 1));
    assert!(
        !leading.starts_within(Duration::from_secs(2)).await,
        "one new term"
    );
    assert_eq!(
        terms_spent(server.port(), "wiped"),
        1,
        "one term spent since the wipe"
    );
    drop(leading);
    client.shutdown().await;
}

/// A watch already waiting when its client shuts down ends at once, not at its next look: with
/// a 60 s poll and 3 s of quiet its next look was about 2 s away (the waits double from 10 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_leader_watch_ends_when_its_client_shuts_down() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url(), Config::default())
        .await
        .unwrap();
    let mut watch = client
        .get_election("ends-waiting")
        .observe_every(Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(next(&mut watch).await, None, "nobody leads");
    let waiting = tokio::spawn(async move { watch.next().await.map(|r| r.is_ok()) });
    tokio::time::sleep(Duration::from_secs(3)).await;
    let shut = Instant::now();
    client.shutdown().await;
    let ended = timeout(Duration::from_secs(10), waiting)
        .await
        .expect("an answer in time")
        .unwrap();
    assert_eq!(ended, None, "the watch ends");
    assert!(
        shut.elapsed() < Duration::from_secs(1),
        "ended {:?} after the shutdown",
        shut.elapsed()
    );
}

/// Issue 38, finding 5: a watch of a client that was shut down ends (`None`), as documented,
/// instead of answering errors for ever to a consumer that keeps asking.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_watch_ends_once_its_client_is_shut_down() {
    let server = RedisServer::start();
    let client = Client::connect(&server.url(), Config::default())
        .await
        .unwrap();
    let mut watch = client.get_election("ends").observe().await.unwrap();
    assert_eq!(next(&mut watch).await, None, "nobody leads");
    client.shutdown().await;
    let ended = timeout(Duration::from_secs(5), watch.next())
        .await
        .expect("an answer in time");
    assert!(ended.is_none(), "the watch ends: {ended:?}");
}

/// A look at the leader that fails while the client is open is reported by the watch (an
/// error item), not taken for the end of the watch: the watch ends (`None`) only once the
/// client is shut down. Kills the mutant that ended the watch on any failed look (found by
/// the mutation run of issue 49).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_look_is_reported_and_the_watch_ends_only_at_shutdown() {
    let server = RedisServer::start();
    let proxy = common::proxy::Proxy::start(server.port()).await;
    let config = Config::default().timeout(Duration::from_millis(300));
    let client = Client::connect(&proxy.url(), config).await.unwrap();
    let mut watch = client
        .get_election("watched")
        .observe_every(Duration::from_millis(50))
        .await
        .unwrap();
    let first = timeout(Duration::from_secs(5), watch.next()).await.unwrap();
    assert!(matches!(first, Some(Ok(None))), "nobody leads: {first:?}");
    proxy.freeze();
    let failed = timeout(Duration::from_secs(10), watch.next())
        .await
        .expect("the failed look is reported in time");
    assert!(
        matches!(failed, Some(Err(_))),
        "a failed look is an error item, not the end: {failed:?}"
    );
    proxy.unfreeze();
    client.shutdown().await;
    let ended = timeout(Duration::from_secs(5), watch.next()).await.unwrap();
    assert!(ended.is_none(), "the watch ends at shutdown: {ended:?}");
}
