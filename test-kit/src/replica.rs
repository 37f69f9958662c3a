//! Test rig for replica-synced acquisition: a master and one replica that replicates through
//! a loopback [`Proxy`], so the test can freeze the replication link (both directions: the
//! write stream and the replica's acknowledgements). `SIGSTOP` of the replica would not do: it
//! still receives into its socket buffer. Everything on free loopback ports, stopped by PID.

use std::time::Duration;

use tokio::time::Instant;

use crate::{proxy::Proxy, redis_server::RedisServer};

/// A master with one replica behind a proxy.
pub struct ReplicaSet {
    pub master: RedisServer,
    pub replica: RedisServer,
    /// The replica's link to the master.
    pub proxy: Proxy,
}

/// `redis-cli -p <port> <args>` (raw reply, trimmed).
pub async fn cli(port: u16, args: &[&str]) -> String {
    let out = tokio::process::Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("run redis-cli");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Several commands on one `redis-cli` connection (one per line of `script`); the raw replies.
pub async fn cli_lines(port: u16, script: &str) -> String {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run redis-cli");
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(script.as_bytes()).await.unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.expect("redis-cli output");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The integer field `name` of `INFO <section>` on `port` (0 when absent).
pub async fn info_field(port: u16, section: &str, name: &str) -> u64 {
    let info = cli(port, &["INFO", section]).await;
    let prefix = format!("{name}:");
    info.lines()
        .find_map(|l| l.trim().strip_prefix(prefix.as_str()))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Polls `f` every 20 ms until it is true; panics after `within`.
pub async fn until<F, Fut>(what: &str, within: Duration, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

impl ReplicaSet {
    /// Starts the master, the proxy and the replica (`--replicaof` the proxy), and waits until
    /// the master lists the replica `state=online`. Needs a Tokio runtime (the proxy runs on it).
    pub async fn start() -> ReplicaSet {
        Self::start_linked(true).await
    }

    /// The same with the replica connected to the master directly (the proxy runs, unused):
    /// for latency figures without the proxy's hops.
    pub async fn start_direct() -> ReplicaSet {
        Self::start_linked(false).await
    }

    async fn start_linked(through_proxy: bool) -> ReplicaSet {
        let master = RedisServer::start_with(&[
            "--repl-diskless-sync",
            "yes",
            "--repl-diskless-sync-delay",
            "0",
        ]);
        let proxy = Proxy::start(master.port()).await;
        let upstream = if through_proxy {
            proxy.port()
        } else {
            master.port()
        };
        let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &upstream.to_string()]);
        let port = master.port();
        until(
            "the replica online",
            Duration::from_secs(30),
            || async move {
                cli(port, &["INFO", "replication"])
                    .await
                    .contains("state=online")
            },
        )
        .await;
        // `state=online` comes before the replica has loaded the snapshot and acknowledged
        // anything (the master starts the stream on its first ACK, up to a second later): wait
        // until a write is acknowledged, then clear the statistics of that `WAIT`.
        let ready = "SET replica-fixture:ready 1\nWAIT 1 100\nDEL replica-fixture:ready\n";
        until(
            "the replica acknowledging writes",
            Duration::from_secs(30),
            || async move {
                cli_lines(port, ready).await.lines().nth(1).map(str::trim) == Some("1")
            },
        )
        .await;
        cli(port, &["CONFIG", "RESETSTAT"]).await;
        ReplicaSet {
            master,
            replica,
            proxy,
        }
    }

    /// The master's URL (clients connect here directly).
    pub fn url(&self) -> String {
        self.master.url()
    }

    /// Clients blocked on the master (e.g. in `WAIT`).
    pub async fn blocked_clients(&self) -> u64 {
        info_field(self.master.port(), "clients", "blocked_clients").await
    }

    /// `calls` of `WAIT` on the master (`INFO commandstats`).
    pub async fn wait_calls(&self) -> u64 {
        wait_calls(self.master.port()).await
    }

    /// Waits until the replica has acknowledged everything the master wrote so far (its
    /// `offset=` in the master's `INFO replication` reached `master_repl_offset`).
    pub async fn await_in_sync(&self) {
        let port = self.master.port();
        until(
            "the replica in sync",
            Duration::from_secs(30),
            || async move {
                let info = cli(port, &["INFO", "replication"]).await;
                let master = info
                    .lines()
                    .find_map(|l| l.trim().strip_prefix("master_repl_offset:"))
                    .and_then(|v| v.trim().parse::<u64>().ok());
                let acked = info
                    .lines()
                    .find(|l| l.starts_with("slave0:"))
                    .and_then(|l| l.split(',').find_map(|kv| kv.strip_prefix("offset=")))
                    .and_then(|v| v.trim().parse::<u64>().ok());
                matches!((master, acked), (Some(m), Some(a)) if a >= m)
            },
        )
        .await;
    }
}

/// `calls` of `WAIT` on the server at `port`.
pub async fn wait_calls(port: u16) -> u64 {
    let stats = cli(port, &["INFO", "commandstats"]).await;
    stats
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_wait:calls="))
        .and_then(|rest| rest.split(',').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}
