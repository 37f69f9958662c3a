//! TLS (`rediss://`, crate feature `tls`): lock, wait and wake over TLS on a server, a TLS-only
//! Sentinel set and a TLS-only cluster; a wrong CA, a wrongly named certificate, an expired
//! certificate, plain text against the TLS port and TLS against a plain port each fail fast
//! with a typed error; mutual TLS. Run with `cargo test --features tls --test tls`.
#![cfg(feature = "tls")]

use common::tls as tls_rig;
use redisson_lock_test_kit as common;

use std::{process::Command, time::Duration};

use common::{woke_within, RedisServer};
use redisson_lock::{Client, Config, ErrorKind, TlsSettings};
use tls_rig::{Certs, TlsRedis};
use tokio::time::Instant;

/// A TLS server that logs (verbose) to a file, and a count of the handshakes it saw refused
/// by the client's alert (`total_connections_received` counts only completed handshakes, so
/// it cannot count these; the fixture's readiness probe, a bare TCP connect, sends no alert).
fn logged_tls_server(certs: &Certs, cert: &str) -> (TlsRedis, impl Fn() -> usize) {
    let log = certs.path(&format!("{cert}-server.log"));
    let log_arg = log.to_str().unwrap().to_owned();
    let server = TlsRedis::start(
        certs,
        cert,
        false,
        &["--loglevel", "verbose", "--logfile", &log_arg],
    );
    let refused = move || {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("Error accepting a client connection") && l.contains(" alert "))
            .count()
    };
    (server, refused)
}

#[tokio::test]
async fn tls_lock_wait_and_wake_up() {
    let certs = Certs::make();
    let server = TlsRedis::start(&certs, "server", false, &[]);
    // A holder and, in another client (its own command and subscriber TLS connections), a waiter.
    let (client, other) = certs.two_clients(&server).await;
    let lock = client.get_lock("tls:lock");
    let guard = lock.lock().await.unwrap();
    assert!(lock.is_locked().await.unwrap());

    let waiter = {
        let lock = other.get_lock("tls:lock");
        tokio::spawn(async move {
            let g = lock.try_lock_for(Duration::from_secs(20)).await?;
            let at = Instant::now();
            Ok::<_, redisson_lock::Error>((at, g))
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released = Instant::now();
    guard.unlock().await.unwrap();
    let g = woke_within(waiter, released, common::WOKEN_BY_MESSAGE).await;
    assert!(g.is_some(), "the waiter got the lock");
    drop(g);
    client.shutdown().await;
    other.shutdown().await;
}

#[tokio::test]
async fn tls_ca_given_as_pem_bytes_and_via_localhost_name() {
    let certs = Certs::make();
    let server = TlsRedis::start(&certs, "server", false, &[]);
    let config = Config::default().tls(TlsSettings::new().ca_pem(certs.pem("ca.crt")));
    let url = format!("rediss://localhost:{}", server.port);
    let client = Client::connect(&url, config).await.expect("TLS connect");
    let g = client.get_lock("tls:bytes").lock().await.unwrap();
    g.unlock().await.unwrap();
    client.shutdown().await;
}

#[tokio::test]
async fn tls_wrong_ca_fails_fast_with_a_tls_error_and_no_retry_storm() {
    let certs = Certs::make();
    let (server, refused) = logged_tls_server(&certs, "server");
    let config = Config::default()
        .connect_timeout(Duration::from_secs(5))
        .tls(TlsSettings::new().ca_file(certs.path("other-ca.crt")));
    let t = Instant::now();
    let err = Client::connect(&server.url(), config).await.unwrap_err();
    let took = t.elapsed();
    assert_eq!(err.kind(), ErrorKind::Tls, "{err}");
    assert!(took < Duration::from_secs(2), "took {took:?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let attempts = refused();
    assert!((1..=2).contains(&attempts), "{attempts} refused handshakes");
    println!("wrong CA refused in {took:?} after {attempts} handshake(s)");
}

#[tokio::test]
async fn tls_wrong_server_name_fails_fast_unless_the_test_only_opt_out_is_set() {
    let certs = Certs::make();
    let (server, refused) = logged_tls_server(&certs, "wrongname");
    let t = Instant::now();
    let err = Client::connect(&server.url(), certs.config())
        .await
        .unwrap_err();
    let took = t.elapsed();
    assert_eq!(err.kind(), ErrorKind::Tls, "{err}");
    assert!(took < Duration::from_secs(2), "took {took:?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let attempts = refused();
    assert!((1..=2).contains(&attempts), "{attempts} refused handshakes");
    println!("wrong server name refused in {took:?} after {attempts} handshake(s): {err}");

    let config = Config::default().tls(
        TlsSettings::new()
            .ca_file(certs.path("ca.crt"))
            .dangerous_skip_server_name_check_for_tests(),
    );
    let client = Client::connect(&server.url(), config).await.unwrap();
    client
        .get_lock("tls:name")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    client.shutdown().await;

    // The opt-out does not accept an unknown CA.
    let config = Config::default().tls(
        TlsSettings::new()
            .ca_file(certs.path("other-ca.crt"))
            .dangerous_skip_server_name_check_for_tests(),
    );
    let err = Client::connect(&server.url(), config).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Tls, "{err}");
}

#[tokio::test]
async fn tls_expired_server_certificate_fails_fast_with_a_tls_error_and_no_retry_storm() {
    let certs = Certs::make();
    let (server, refused) = logged_tls_server(&certs, "expired");
    let t = Instant::now();
    let err = Client::connect(&server.url(), certs.config())
        .await
        .unwrap_err();
    let took = t.elapsed();
    assert_eq!(err.kind(), ErrorKind::Tls, "{err:?}");
    assert!(
        format!("{err:#}").contains("Expired"),
        "the message with its source says why: {err:#}"
    );
    // Well under the 5 s connect timeout: refused at the first handshake, not timed out.
    assert!(took < Duration::from_secs(2), "took {took:?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let attempts = refused();
    assert!((1..=2).contains(&attempts), "{attempts} refused handshakes");
    println!("expired certificate refused in {took:?} after {attempts} handshake(s): {err}");
    // The test-only name opt-out does not accept an expired certificate either.
    let config = Config::default().tls(
        TlsSettings::new()
            .ca_file(certs.path("ca.crt"))
            .dangerous_skip_server_name_check_for_tests(),
    );
    let err = Client::connect(&server.url(), config).await.unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Tls, "{err:?}");
}

#[tokio::test]
async fn tls_plaintext_against_the_tls_port_fails_fast() {
    let certs = Certs::make();
    let server = TlsRedis::start(&certs, "server", false, &[]);
    let url = format!("redis://127.0.0.1:{}", server.port);
    let t = Instant::now();
    let err = Client::connect(
        &url,
        Config::default().connect_timeout(Duration::from_secs(5)),
    )
    .await
    .unwrap_err();
    let took = t.elapsed();
    assert!(
        matches!(
            err.kind(),
            ErrorKind::Connection | ErrorKind::Timeout | ErrorKind::Tls
        ),
        "{err:?}"
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
    println!("plain text against the TLS port refused in {took:?}: {err}");
}

#[tokio::test]
async fn tls_url_against_a_plain_server_never_sends_plaintext() {
    let certs = Certs::make();
    let plain = RedisServer::start();
    let url = format!("rediss://:tls-Secret-pw@127.0.0.1:{}", plain.port());
    let t = Instant::now();
    let config = certs.config().connect_timeout(Duration::from_secs(2));
    let err = Client::connect(&url, config).await.unwrap_err();
    // A plain server waits for a line end that a ClientHello never sends: the connect timeout
    // ends it.
    let took = t.elapsed();
    assert!(took < Duration::from_millis(2900), "{took:?}");
    println!("TLS against a plain server gave up in {took:?}: {err}");
    assert!(
        matches!(err.kind(), ErrorKind::Tls | ErrorKind::Connection),
        "{err:?}"
    );
    assert!(!format!("{err} {err:?}").contains("tls-Secret-pw"));
    // The plain server never saw a command: no AUTH, HELLO, PING or script.
    let out = Command::new("redis-cli")
        .args(["-p", &plain.port().to_string(), "INFO", "commandstats"])
        .output()
        .unwrap();
    let stats = String::from_utf8_lossy(&out.stdout);
    // (The fixture's own readiness PING is the only command expected.)
    for cmd in ["auth", "hello", "evalsha", "script", "client", "select"] {
        assert!(
            !stats.contains(&format!("cmdstat_{cmd}:")),
            "{cmd} was sent in plain text: {stats}"
        );
    }
}

#[tokio::test]
async fn tls_mutual_needs_the_client_certificate() {
    let certs = Certs::make();
    let server = TlsRedis::start(&certs, "server", true, &[]);
    let err = Client::connect(&server.url(), certs.config())
        .await
        .unwrap_err();
    assert!(
        matches!(err.kind(), ErrorKind::Tls | ErrorKind::Connection),
        "{err:?}"
    );
    let config = Config::default().tls(
        TlsSettings::new()
            .ca_file(certs.path("ca.crt"))
            .client_identity_files(certs.path("client.crt"), certs.path("client.key")),
    );
    let client = Client::connect(&server.url(), config).await.expect("mTLS");
    client
        .get_lock("tls:mutual")
        .lock()
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
    client.shutdown().await;
}

#[tokio::test]
async fn tls_settings_without_a_tls_url_are_refused() {
    let err = Client::connect(
        "redis://127.0.0.1:1",
        Config::default().tls(TlsSettings::new()),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.to_string().contains("rediss://"), "{err}");
    let err = Client::connect(
        "rediss://127.0.0.1:1",
        Config::default().tls(TlsSettings::new().ca_file("/nonexistent/ca.pem")),
    )
    .await
    .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
}

/// A holder in `a`, a waiter in `b` (each with its own command and subscriber TLS connections);
/// the waiter must wake well before the lock's TTL would have bounded its sleep.
async fn tls_lock_wait_wake(a: &Client, b: &Client, name: &str) {
    let guard = a.get_lock(name).lock().await.unwrap();
    let waiter = {
        let lock = b.get_lock(name);
        tokio::spawn(async move {
            let g = lock.try_lock_for(Duration::from_secs(20)).await?;
            Ok::<_, redisson_lock::Error>((Instant::now(), g))
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let released = Instant::now();
    guard.unlock().await.unwrap();
    let g = woke_within(waiter, released, Duration::from_secs(1)).await;
    g.expect("the waiter got the lock").unlock().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_cluster_lock_wait_and_wake_up() {
    let certs = Certs::make();
    let cluster = tls_rig::TlsCluster::start(&certs);
    let (a, b) = certs.two_clients(&cluster).await;
    // Names on several slots, so more than one master is reached over TLS.
    for name in ["tls:cluster:a", "tls:cluster:b", "tls:cluster:c"] {
        tls_lock_wait_wake(&a, &b, name).await;
    }
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_sentinel_lock_wait_and_wake_up() {
    let certs = Certs::make();
    let set = tls_rig::TlsSentinelSet::start(&certs);
    let (a, b) = certs.two_clients(&set).await;
    tls_lock_wait_wake(&a, &b, "tls:sentinel").await;
    a.shutdown().await;
    b.shutdown().await;
}

/// Semaphore, permit-expirable semaphore and count-down latch waits woken over TLS, on a
/// server, a Sentinel set and a cluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_synchronizers_wait_and_wake_up() {
    let certs = Certs::make();
    let server = TlsRedis::start(&certs, "server", false, &[]);
    let (a, b) = certs.two_clients(&server).await;
    common::synchronizers_wait_wake(&a, &b, "tls:sync", Duration::from_millis(500)).await;
    a.shutdown().await;
    b.shutdown().await;

    let set = tls_rig::TlsSentinelSet::start(&certs);
    let (a, b) = certs.two_clients(&set).await;
    common::synchronizers_wait_wake(&a, &b, "tls:sentinel:sync", Duration::from_millis(500)).await;
    a.shutdown().await;
    b.shutdown().await;
    drop(set);

    let cluster = tls_rig::TlsCluster::start(&certs);
    let (a, b) = certs.two_clients(&cluster).await;
    common::synchronizers_wait_wake(&a, &b, "tls:cluster:sync", Duration::from_millis(500)).await;
    a.shutdown().await;
    b.shutdown().await;
}

/// The non-reentrant and group locks over TLS: the re-entry refused, a waiter in another client
/// woken by the release.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_non_reentrant_and_group_locks_wait_and_wake() {
    let certs = Certs::make();
    let server = TlsRedis::start(&certs, "server", false, &[]);
    let (a, b) = certs.two_clients(&server).await;
    let nr = a.get_non_reentrant_lock("tls:nr");
    let g = nr.lock().await.unwrap();
    assert_eq!(nr.try_lock().await.unwrap_err().kind(), ErrorKind::Reentry);
    let waiter = {
        let lock = b.get_non_reentrant_lock("tls:nr");
        tokio::spawn(async move {
            let g = lock.try_lock_for(Duration::from_secs(20)).await?;
            Ok::<_, redisson_lock::Error>((Instant::now(), g))
        })
    };
    // The waiter is in (its subscription made or being made: it attempts again once it is).
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            b.stats().channel_waiters("redisson_lock__channel:{tls:nr}") > 0
        })
        .await
    );
    let released = Instant::now();
    g.unlock().await.unwrap();
    woke_within(waiter, released, common::WOKEN_BY_MESSAGE)
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();

    let group = a.get_group_lock("tls:group", ["x", "y"]);
    let g = group.lock().await.unwrap();
    let waiter = {
        let lock = b.get_group_lock("tls:group", ["y", "z"]);
        tokio::spawn(async move {
            let g = lock.try_lock_for(Duration::from_secs(20)).await?;
            Ok::<_, redisson_lock::Error>((Instant::now(), g))
        })
    };
    // The waiter is in (its subscription made or being made: it attempts again once it is).
    assert!(
        common::eventually(Duration::from_secs(5), || async {
            b.stats()
                .channel_waiters("redisson_lock__channel:{tls:group}")
                > 0
        })
        .await
    );
    let released = Instant::now();
    g.unlock().await.unwrap();
    woke_within(waiter, released, common::WOKEN_BY_MESSAGE)
        .await
        .unwrap()
        .unlock()
        .await
        .unwrap();
}
