//! The loopback proxy of `test-kit/src/proxy.rs`, tested against a real `redis-server` with raw
//! fred clients (and raw RESP where byte-exactness matters), so fault tests can trust it.

use redisson_lock_test_kit as common;

use std::time::Duration;

use common::{
    proxy::{Direction, Proxy},
    Admin, RedisServer,
};
use fred::{
    clients::Client as FredClient,
    interfaces::{ClientLike, EventInterface, KeysInterface},
    types::{
        config::{Config as FredConfig, ReconnectPolicy},
        Builder,
    },
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
    time::Instant,
};

/// Bound of every wait on an event.
const T: Duration = Duration::from_secs(10);

/// A fred client through `url` with a command timeout and a fast constant reconnect policy.
async fn fred_client(url: &str, command_timeout: Duration) -> FredClient {
    let mut builder = Builder::from_config(FredConfig::from_url(url).unwrap());
    builder
        .with_performance_config(|p| p.default_command_timeout = command_timeout)
        .with_connection_config(|c| c.max_command_attempts = 1)
        .set_policy(ReconnectPolicy::new_constant(0, 50));
    let client = builder.build().unwrap();
    client.init().await.expect("connect through the proxy");
    client
}

async fn ping_rtt(client: &FredClient) -> Duration {
    let started = Instant::now();
    let _: String = client.ping(None).await.expect("PING");
    started.elapsed()
}

/// Reads from a raw connection until `want` bytes arrived or `within` passed.
async fn read_exactly(conn: &mut TcpStream, want: usize, within: Duration) -> Vec<u8> {
    let mut got = Vec::new();
    let deadline = Instant::now() + within;
    let mut buf = [0u8; 256];
    while got.len() < want {
        match tokio::time::timeout_at(deadline, conn.read(&mut buf)).await {
            Ok(Ok(0)) | Err(_) => break,
            Ok(Ok(n)) => got.extend_from_slice(&buf[..n]),
            Ok(Err(e)) => panic!("read: {e}"),
        }
    }
    got
}

#[tokio::test]
async fn latency_adds_at_least_the_set_delay_to_a_round_trip_per_direction() {
    let s = RedisServer::start();
    let proxy = Proxy::start(s.port()).await;
    let client = fred_client(&proxy.url(), Duration::from_secs(5)).await;
    assert_eq!(proxy.connections(), 1);
    let base = ping_rtt(&client).await;

    proxy.set_latency(Direction::Downstream, Duration::from_millis(200));
    let rtt = ping_rtt(&client).await;
    assert!(rtt >= Duration::from_millis(200), "{rtt:?}");

    proxy.set_latency(Direction::Upstream, Duration::from_millis(150));
    let rtt = ping_rtt(&client).await;
    assert!(rtt >= Duration::from_millis(350), "{rtt:?}");

    // Jitter never shortens below zero and keeps order: every reply still matches its request.
    proxy.set_latency(Direction::Downstream, Duration::ZERO);
    proxy.set_latency(Direction::Upstream, Duration::from_millis(100));
    proxy.set_jitter(Direction::Upstream, Duration::from_millis(80));
    let sets = (0..20).map(|i| {
        let c = client.clone();
        async move {
            let _: () = c.set(format!("j{i}"), i, None, None, false).await.unwrap();
            let v: i64 = c.get(format!("j{i}")).await.unwrap();
            v
        }
    });
    let values = futures::future::join_all(sets).await;
    assert_eq!(values, (0..20).collect::<Vec<i64>>());

    proxy.set_latency(Direction::Upstream, Duration::ZERO);
    proxy.set_jitter(Direction::Upstream, Duration::ZERO);
    let rtt = ping_rtt(&client).await;
    assert!(
        rtt < base + Duration::from_millis(100),
        "{rtt:?} vs {base:?}"
    );
}

#[tokio::test]
async fn a_frozen_command_times_out_and_unfreeze_delivers_it() {
    let s = RedisServer::start();
    let admin = Admin::connect(&s.url()).await;
    let proxy = Proxy::start(s.port()).await;
    let client = fred_client(&proxy.url(), Duration::from_millis(300)).await;

    proxy.freeze();
    let r: Result<i64, _> = client.incr("frozen").await;
    assert!(r.is_err(), "{r:?}");
    assert!(!admin.exists("frozen").await, "nothing reached the server");
    assert_eq!(proxy.connections(), 1, "a freeze closes nothing");

    proxy.unfreeze();
    assert!(
        common::eventually(T, || async { admin.exists("frozen").await }).await,
        "the held INCR was delivered"
    );
    // Its reply was delivered too (and matched to the timed-out INCR): the connection is in
    // step and the next command works.
    assert!(
        proxy
            .wait_for(|s| s.forwarded[Direction::Downstream as usize] >= 2, T)
            .await
    );
    let v: i64 = client.incr("frozen").await.unwrap();
    assert_eq!(v, 2);
}

#[tokio::test]
async fn unfreeze_dropping_discards_what_was_held() {
    let s = RedisServer::start();
    let admin = Admin::connect(&s.url()).await;
    let proxy = Proxy::start(s.port()).await;
    let mut raw = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .unwrap();

    proxy.freeze();
    raw.write_all(b"INCR dropped\r\n").await.unwrap();
    // The proxy read (and holds) the request; then the freeze ends by dropping it.
    assert!(
        proxy
            .wait_for(|s| s.received[Direction::Upstream as usize] == 1, T)
            .await
    );
    proxy.unfreeze_dropping();
    assert!(
        proxy
            .wait_for(|s| s.dropped[Direction::Upstream as usize] == 1, T)
            .await
    );
    raw.write_all(b"INCR dropped\r\n").await.unwrap();
    assert_eq!(read_exactly(&mut raw, 4, T).await, b":1\r\n");
    assert_eq!(admin.redis.get::<i64, _>("dropped").await.unwrap(), 1);
}

#[tokio::test]
async fn drop_next_reply_makes_exactly_one_reply_vanish() {
    let s = RedisServer::start();
    let proxy = Proxy::start(s.port()).await;
    let mut raw = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .unwrap();

    let dropped = proxy.drop_next_reply();
    raw.write_all(b"PING\r\n").await.unwrap();
    assert_eq!(dropped.wait_caught(T).await.unwrap(), b"+PONG\r\n");
    raw.write_all(b"ECHO one\r\n").await.unwrap();
    assert_eq!(read_exactly(&mut raw, 9, T).await, b"$3\r\none\r\n");
    raw.write_all(b"ECHO two\r\n").await.unwrap();
    assert_eq!(read_exactly(&mut raw, 9, T).await, b"$3\r\ntwo\r\n");
    let stats = proxy.stats();
    assert_eq!(stats.dropped, [0, 1]);
    assert_eq!(stats.forwarded[Direction::Downstream as usize], 2);
}

#[tokio::test]
async fn a_dropped_reply_is_an_ambiguous_outcome_for_a_fred_client() {
    // S10's situation: the command ran, its reply never came.
    let s = RedisServer::start();
    let admin = Admin::connect(&s.url()).await;
    let proxy = Proxy::start(s.port()).await;
    let client = fred_client(&proxy.url(), Duration::from_millis(300)).await;
    let dropped = proxy.drop_next_reply_matching(|b| b.starts_with(b":"));
    let r: Result<i64, _> = client.incr("ambiguous").await;
    assert!(r.is_err(), "{r:?}");
    assert_eq!(dropped.wait_caught(T).await.unwrap(), b":1\r\n");
    assert_eq!(admin.redis.get::<i64, _>("ambiguous").await.unwrap(), 1);
}

#[tokio::test]
async fn hold_next_reply_delays_one_reply_until_released() {
    let s = RedisServer::start();
    let proxy = Proxy::start(s.port()).await;
    let client = fred_client(&proxy.url(), Duration::from_secs(5)).await;
    let held = proxy.hold_next_reply();
    let c = client.clone();
    let incr = tokio::spawn(async move { c.incr::<i64, _>("held").await });
    assert_eq!(held.wait_caught(T).await.unwrap(), b":1\r\n");
    assert!(!incr.is_finished());
    held.release();
    let v = tokio::time::timeout(T, incr)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(v, 1);

    // A discarded hold: the next reply goes through.
    let held = proxy.hold_next_reply_matching(|b| b == b":2\r\n");
    let c = client.clone();
    let incr = tokio::spawn(async move { c.incr::<i64, _>("held").await });
    held.wait_caught(T).await.unwrap();
    held.discard();
    drop(incr);
    assert!(
        proxy
            .wait_for(|s| s.dropped[Direction::Downstream as usize] == 1, T)
            .await
    );
}

#[tokio::test]
async fn reset_closes_connections_with_rst_and_fred_reconnects() {
    let s = RedisServer::start();
    let proxy = Proxy::start(s.port()).await;

    // Raw: the client side sees a reset, not an orderly end of stream.
    let mut raw = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .unwrap();
    raw.write_all(b"PING\r\n").await.unwrap();
    assert_eq!(read_exactly(&mut raw, 7, T).await, b"+PONG\r\n");
    proxy.reset();
    let mut buf = [0u8; 16];
    let r = tokio::time::timeout(T, raw.read(&mut buf)).await.unwrap();
    assert_eq!(
        r.map_err(|e| e.kind()).err(),
        Some(std::io::ErrorKind::ConnectionReset),
        "expected a reset"
    );
    assert!(proxy.wait_for(|s| s.open == 0, T).await);

    // fred: reconnects through the proxy by itself.
    let client = fred_client(&proxy.url(), Duration::from_secs(2)).await;
    let mut reconnects = client.reconnect_rx();
    let accepted = proxy.accepted();
    proxy.reset();
    tokio::time::timeout(T, reconnects.recv())
        .await
        .expect("fred reconnected")
        .unwrap();
    assert!(proxy.accepted() > accepted);
    assert_eq!(proxy.connections(), 1);
    ping_rtt(&client).await;
}

#[tokio::test]
async fn refuse_closes_the_listener_and_reopens_it_on_the_same_port() {
    let s = RedisServer::start();
    let proxy = Proxy::start(s.port()).await;
    let mut kept = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .unwrap();
    assert!(proxy.wait_for(|s| s.open == 1, T).await);

    proxy.refuse(true).await;
    let e = TcpStream::connect(("127.0.0.1", proxy.port()))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
    // Connections already open are left alone.
    kept.write_all(b"PING\r\n").await.unwrap();
    assert_eq!(read_exactly(&mut kept, 7, T).await, b"+PONG\r\n");

    proxy.refuse(false).await;
    let client = fred_client(&proxy.url(), Duration::from_secs(2)).await;
    ping_rtt(&client).await;
    assert_eq!(proxy.accepted(), 2);
}

#[tokio::test]
async fn dropping_the_proxy_closes_everything() {
    let s = RedisServer::start();
    let proxy = Proxy::start(s.port()).await;
    let port = proxy.port();
    let mut raw = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    raw.write_all(b"PING\r\n").await.unwrap();
    assert_eq!(read_exactly(&mut raw, 7, T).await, b"+PONG\r\n");
    drop(proxy);
    let mut buf = [0u8; 16];
    let r = tokio::time::timeout(T, raw.read(&mut buf)).await.unwrap();
    assert!(matches!(r, Ok(0) | Err(_)), "{r:?}");
    // The listener closes when its task, aborted by the drop, is next polled.
    assert!(
        common::eventually(T, || async {
            TcpStream::connect(("127.0.0.1", port)).await.is_err()
        })
        .await,
        "the proxy's port still accepts"
    );
}
