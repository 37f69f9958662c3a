//! Test rig for Redis Sentinel: one master, two replicas (or as many as asked: `--replicaof`,
//! `repl-diskless-sync-delay 0`, ready when the master lists them all `state=online`) and three
//! sentinels (`redis-server sentinel.conf --sentinel`, `down-after-milliseconds 2000`,
//! `failover-timeout 3000`), all on free loopback ports and stopped by PID.

use std::{
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use crate::redis_server::{free_port, RedisServer};

pub const MASTER_NAME: &str = "mymaster";
/// How long a sentinel waits for a PING reply before it calls a server down: 2 s, not 1 s.
/// A sentinel that moves to a new master (`+switch-master`) reconnects to it at most once a
/// second (its last try, to the dead master, counts) and starts the down timer at the switch,
/// so at 1 s its first PING's reply races the timer: a lost race (3 failovers in 39
/// here) has it call the new master down at once, with its peers' stale votes about the old
/// one making a quorum, and the sentinels fail the new master over too.
pub const DOWN_AFTER_MS: u64 = 2000;
pub const FAILOVER_TIMEOUT_MS: u64 = 3000;

/// One reply of `redis-cli` (raw output, trimmed).
pub fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run redis-cli");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Several commands on one `redis-cli` connection (one per line of `script`); the raw replies.
pub fn cli_lines(port: u16, script: &str) -> String {
    use std::io::Write;
    let mut child = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run redis-cli");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().expect("redis-cli output");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `redis-cli` with a password (`--user`/`--pass`), warnings silenced.
pub fn cli_auth(port: u16, user: &str, pass: &str, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(["--user", user, "--pass", pass, "--no-auth-warning"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run redis-cli");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

pub fn wait_for(what: &str, within: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

struct SentinelProcess {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
}

impl Drop for SentinelProcess {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Optional passwords: `data` for the master and replicas (`requirepass` + `masterauth`),
/// `sentinel` for the sentinels themselves (`requirepass` in sentinel.conf).
#[derive(Default, Clone)]
pub struct Auth {
    pub data: Option<String>,
    pub sentinel: Option<String>,
}

pub struct SentinelSet {
    /// The servers by index: 0 is the first master, 1 and 2 (by default) its replicas. A killed one is
    /// `None`.
    pub servers: Vec<Option<RedisServer>>,
    sentinels: Vec<SentinelProcess>,
    pub auth: Auth,
}

impl SentinelSet {
    pub fn start() -> SentinelSet {
        Self::start_with(Auth::default())
    }

    pub fn start_with(auth: Auth) -> SentinelSet {
        Self::start_full(auth, 2)
    }

    /// One master and `replicas` replicas (the servers 1..=replicas), no passwords.
    pub fn start_with_replicas(replicas: usize) -> SentinelSet {
        Self::start_full(Auth::default(), replicas)
    }

    fn start_full(auth: Auth, replicas: usize) -> SentinelSet {
        // The readiness check pings without a password: `requirepass` is set once all are up.
        let common: Vec<String> = vec!["--repl-diskless-sync-delay".into(), "0".into()];
        let refs = |v: &[String]| v.iter().map(|s| s.to_owned()).collect::<Vec<String>>();
        let master_args = refs(&common);
        let master =
            RedisServer::start_with(&master_args.iter().map(String::as_str).collect::<Vec<_>>());
        let mport = master.port();
        let mut servers = vec![Some(master)];
        for _ in 0..replicas {
            let mut args = refs(&common);
            args.extend(["--replicaof".into(), "127.0.0.1".into(), mport.to_string()]);
            let replica =
                RedisServer::start_with(&args.iter().map(String::as_str).collect::<Vec<_>>());
            servers.push(Some(replica));
        }
        wait_for("every replica online", Duration::from_secs(20), || {
            cli(mport, &["INFO", "replication"])
                .matches("state=online")
                .count()
                == replicas
        });
        // `state=online` comes before a replica has loaded the snapshot and acknowledged
        // anything; replica-synced acquisitions (on by default) need acknowledgements.
        let wait = format!(
            "SET sentinel-fixture:ready 1\nWAIT {replicas} 100\nDEL sentinel-fixture:ready\n"
        );
        let all = replicas.to_string();
        wait_for(
            "every replica acknowledging writes",
            Duration::from_secs(20),
            || {
                let replies = cli_lines(mport, &wait);
                replies.lines().nth(1).map(str::trim) == Some(all.as_str())
            },
        );
        if let Some(p) = &auth.data {
            for s in servers.iter().flatten() {
                assert_eq!(
                    cli(
                        s.port(),
                        &["CONFIG", "SET", "masterauth", p, "requirepass", p]
                    ),
                    "OK"
                );
            }
        }

        let mut sentinels = Vec::new();
        for _ in 0..3 {
            sentinels.push(Self::spawn_sentinel(mport, &auth));
        }
        let set = SentinelSet {
            servers,
            sentinels,
            auth,
        };
        // Every sentinel knows the replicas and the two other sentinels (their hello
        // messages travel through the master every 2 s).
        wait_for(
            "sentinels discover each other",
            Duration::from_secs(30),
            || {
                set.sentinel_ports().iter().all(|&p| {
                    let others = set.sentinel_cli(p, &["SENTINEL", "sentinels", MASTER_NAME]);
                    let known = set.sentinel_cli(p, &["SENTINEL", "replicas", MASTER_NAME]);
                    others.matches("runid").count() == 2
                        && known.matches("runid").count() == replicas
                })
            },
        );
        set
    }

    fn spawn_sentinel(master_port: u16, auth: &Auth) -> SentinelProcess {
        crate::redis_server::sweep_stale_dirs();
        for _ in 0..20 {
            let port = free_port();
            if port == 6379 || port == 26379 {
                continue;
            }
            let dir = std::env::temp_dir().join(format!(
                "redisson-lock-sentinel-{}-{port}",
                std::process::id()
            ));
            std::fs::create_dir_all(&dir).unwrap();
            let mut conf = format!(
                "port {port}\nbind 127.0.0.1\ndaemonize no\nprotected-mode no\ndir {}\n\
                 sentinel monitor {MASTER_NAME} 127.0.0.1 {master_port} 2\n\
                 sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n\
                 sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}\n\
                 sentinel parallel-syncs {MASTER_NAME} 2\n",
                dir.display()
            );
            if let Some(logs) = crate::redis_server::fixture_log_dir() {
                conf.push_str(&format!(
                    "logfile {}\n",
                    logs.join(format!("sentinel-{port}.log")).display()
                ));
            }
            if let Some(p) = &auth.data {
                conf.push_str(&format!("sentinel auth-pass {MASTER_NAME} {p}\n"));
            }
            if let Some(p) = &auth.sentinel {
                conf.push_str(&format!("requirepass {p}\nsentinel sentinel-pass {p}\n"));
            }
            let path = dir.join("sentinel.conf");
            std::fs::write(&path, conf).unwrap();
            let mut child = Command::new("redis-server")
                .arg(&path)
                .arg("--sentinel")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("run redis-server --sentinel");
            let up = crate::redis_server::came_up(&mut child, port, || {
                let pong = match &auth.sentinel {
                    Some(p) => cli_auth(port, "default", p, &["PING"]),
                    None => cli(port, &["PING"]),
                };
                pong == "PONG"
            });
            if up {
                return SentinelProcess {
                    child: Some(child),
                    port,
                    dir,
                };
            }
        }
        panic!("could not start a sentinel");
    }

    pub fn sentinel_cli(&self, port: u16, args: &[&str]) -> String {
        match &self.auth.sentinel {
            Some(p) => cli_auth(port, "default", p, args),
            None => cli(port, args),
        }
    }

    pub fn data_cli(&self, port: u16, args: &[&str]) -> String {
        match &self.auth.data {
            Some(p) => cli_auth(port, "default", p, args),
            None => cli(port, args),
        }
    }

    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(|s| s.port).collect()
    }

    /// `redis://127.0.0.1:<port>` of every sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinel_ports()
            .iter()
            .map(|p| format!("redis://127.0.0.1:{p}"))
            .collect()
    }

    /// The master's port as the (first live) sentinel reports it.
    pub fn master_port(&self) -> u16 {
        let reply = self.sentinel_cli(
            self.sentinels[0].port,
            &["SENTINEL", "get-master-addr-by-name", MASTER_NAME],
        );
        reply
            .lines()
            .nth(1)
            .and_then(|p| p.trim().parse().ok())
            .unwrap_or_else(|| panic!("no master address in {reply:?}"))
    }

    /// `kill -9` of the server on `port`; returns its index.
    pub fn kill_port(&mut self, port: u16) -> usize {
        let i = self
            .servers
            .iter()
            .position(|s| s.as_ref().is_some_and(|s| s.port() == port))
            .expect("a live server on that port");
        if let Some(mut s) = self.servers[i].take() {
            s.kill();
        }
        i
    }

    /// Waits until every sentinel names a master other than `old`, and that server says it is a
    /// master; returns its port.
    pub fn await_new_master(&self, old: u16, within: Duration) -> u16 {
        let mut new = 0;
        wait_for("the failover", within, || {
            let ports: Vec<u16> = self
                .sentinel_ports()
                .iter()
                .filter_map(|&p| {
                    self.sentinel_cli(p, &["SENTINEL", "get-master-addr-by-name", MASTER_NAME])
                        .lines()
                        .nth(1)
                        .and_then(|l| l.trim().parse().ok())
                })
                .collect();
            if ports.len() == 3 && ports.iter().all(|&p| p != old && p == ports[0]) {
                new = ports[0];
                self.data_cli(new, &["ROLE"]).starts_with("master")
            } else {
                false
            }
        });
        new
    }
}
