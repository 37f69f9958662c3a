//! The runner: servers, workers, the seeded nemesis schedule, and the final check.

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::Stdio,
    sync::{Arc, Mutex},
    time::Duration,
};

use redisson_lock_chaos::{check_with, clock::now_ns, FaultSpan, Faults, Report};
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    process::{Child, Command},
    time::Instant,
};

use crate::{
    cluster::RedisCluster,
    lock_names,
    proxy::{Direction, Proxy},
    redis_server::RedisServer,
    sentinel::{self, SentinelSet},
    Rng, RunArgs, Topology,
};

/// One kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// `kill -9` of the master, restarted at once from its AOF (`appendfsync always`).
    KillPersist,
    /// `kill -9` of the master, restarted at once without its data (disk lost).
    KillWipe,
    /// `kill -9` of the master (no persistence); the deployment fails over; the old one is
    /// restarted empty and rejoins as a replica.
    KillFailover,
    /// `SIGSTOP` of one worker process for 1.3–2 leases, then `SIGCONT`.
    PauseClient,
    /// `SIGSTOP` of the master for 0.5–2.5 s, then `SIGCONT`.
    PauseServer,
    /// The proxy in front of the master forwards nothing for 0.5–4 s (connections stay open),
    /// then delivers what it held.
    Partition,
    /// A partition whose held bytes are discarded, then every connection reset: requests and
    /// replies lost.
    ReplyLoss,
    /// 50–300 ms more latency each way for 2–5 s.
    Latency,
    /// `DEBUG SLEEP` 0.3–2 s on the master (a clock-free pause of the server).
    DebugSleep,
    /// `SENTINEL FAILOVER` (a manual failover).
    SentinelFailover,
    /// `CLUSTER FAILOVER` on a replica of the master of a lock's slot.
    ClusterFailover,
    /// A lock's slot is migrated to another master, its `ASK` phase held 0.5–3 s.
    Migrate,
    /// `kill -9` of one RedLock node, restarted at once without its data.
    RedlockRestart,
    /// Sentinel: the replicas are stopped (`SIGSTOP`) and the master's links to them dropped
    /// (`CLIENT KILL TYPE replica`) for 0.3–1.5 s, the master is killed (`kill -9`) at the end
    /// of it and the replicas resumed: the sentinels promote a replica that never received the
    /// master's last writes (asynchronous replication loss), and the old master is restarted
    /// empty. Replica sync is the protection against it.
    LagKill,
    /// `FLUSHALL` on the master: the locks vanish while every connection stays open, as with
    /// a server restarted behind a proxy that keeps the client's connection (a documented
    /// exception; not part of `full`).
    Flush,
    /// `DEL` of one lock key that is held (its holders read from the hash in the same script),
    /// every connection kept: `flush`, but per key, as a force-unlock by an outsider would do
    /// (a documented exception, not part of `full`; its overlaps are counted apart while the
    /// holder could not have learnt it yet: see the checker's deletion window).
    DelKey,
}

const ALL: [(&str, Fault); 16] = [
    ("kill-persist", Fault::KillPersist),
    ("kill-wipe", Fault::KillWipe),
    ("kill-failover", Fault::KillFailover),
    ("pause-client", Fault::PauseClient),
    ("pause-server", Fault::PauseServer),
    ("partition", Fault::Partition),
    ("reply-loss", Fault::ReplyLoss),
    ("latency", Fault::Latency),
    ("debug-sleep", Fault::DebugSleep),
    ("sentinel-failover", Fault::SentinelFailover),
    ("cluster-failover", Fault::ClusterFailover),
    ("migrate", Fault::Migrate),
    ("redlock-restart", Fault::RedlockRestart),
    ("flush", Fault::Flush),
    ("lag-kill", Fault::LagKill),
    ("del-key", Fault::DelKey),
];

impl Fault {
    fn name(self) -> &'static str {
        ALL.iter().find(|(_, f)| *f == self).map_or("?", |(n, _)| n)
    }

    /// The faults of `full` on a topology.
    fn full(topology: Topology) -> Vec<Fault> {
        use Fault::*;
        match topology {
            Topology::Standalone => vec![
                KillPersist,
                KillWipe,
                PauseClient,
                PauseServer,
                Partition,
                ReplyLoss,
                Latency,
                DebugSleep,
                RedlockRestart,
            ],
            Topology::Sentinel | Topology::Sentinel11 => vec![
                KillFailover,
                LagKill,
                SentinelFailover,
                PauseClient,
                PauseServer,
                DebugSleep,
                RedlockRestart,
            ],
            Topology::Cluster => vec![
                KillFailover,
                ClusterFailover,
                Migrate,
                PauseClient,
                PauseServer,
                DebugSleep,
                RedlockRestart,
            ],
        }
    }

    /// Whether the fault can run on a topology.
    fn fits(self, topology: Topology) -> bool {
        matches!(self, Fault::Flush | Fault::DelKey) || Fault::full(topology).contains(&self)
    }

    /// Whether the fault can make two holders of one lock overlap: it stops renewals longer
    /// than the lease can last (pauses, a partition, lost requests), loses the locks (data, a
    /// failover, a slot in its `ASK` phase), or slows a RedLock acquisition past its validity
    /// (a node restarting). A master restarted from its AOF keeps every lock, and latency
    /// below the command timeout delays renewals without stopping them: after those two, and
    /// with no fault at all, an overlap is a defect even when the holder was told.
    pub fn can_overlap(self) -> bool {
        !matches!(self, Fault::KillPersist | Fault::Latency)
    }

    /// Whether the fault can stop a hold's renewals, or its holder, long enough for the hold's
    /// validity deadline to pass unrenewed: a process or a server stopped or killed, requests
    /// held back or lost, a failover or a migration under way. Latency (below the command
    /// timeout), a deletion and a RedLock node's restart do not: after them, an overlap
    /// announced only by a deadline is unexplained.
    pub fn stalls(self) -> bool {
        !matches!(
            self,
            Fault::Latency | Fault::RedlockRestart | Fault::Flush | Fault::DelKey
        )
    }

    /// Whether the fault can tell a holder of the deployment that its hold is in doubt or lost:
    /// all but the restart of a RedLock node (RedLock holds are not counted as told).
    pub fn tells(self) -> bool {
        self != Fault::RedlockRestart
    }

    /// Whether the fault can lose data on the deployment, the fencing token counter with it:
    /// a restart without data, a flush, and, on Sentinel and cluster, a failover that can
    /// promote a replica which missed the last writes (a kill, the lag-kill, a master paused
    /// or asleep past the failure detection). Manual failovers wait for the replica.
    pub fn loses_data(self, topology: Topology) -> bool {
        match self {
            Fault::KillWipe | Fault::Flush | Fault::KillFailover | Fault::LagKill => true,
            Fault::PauseServer | Fault::DebugSleep => topology != Topology::Standalone,
            _ => false,
        }
    }
}

/// Prints the faults of every topology.
pub fn list_faults() {
    for t in [
        Topology::Standalone,
        Topology::Sentinel,
        Topology::Sentinel11,
        Topology::Cluster,
    ] {
        let names: Vec<&str> = Fault::full(t).iter().map(|f| f.name()).collect();
        println!(
            "{}: full = {} (+ flush, del-key on request)",
            t.name(),
            names.join(",")
        );
    }
}

fn parse_faults(spec: &str, topology: Topology) -> Result<Vec<Fault>, String> {
    match spec {
        "full" => return Ok(Fault::full(topology)),
        "none" => return Ok(Vec::new()),
        _ => {}
    }
    let mut out = Vec::new();
    for word in spec.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let (name, fault) = match word {
            "full" => {
                out.extend(Fault::full(topology));
                continue;
            }
            w => ALL
                .iter()
                .find(|(n, _)| *n == w)
                .copied()
                .ok_or_else(|| format!("unknown fault {w:?} (see --list-faults)"))?,
        };
        if !fault.fits(topology) {
            return Err(format!("fault {name} does not apply to {topology:?}"));
        }
        out.push(fault);
    }
    Ok(out)
}

/// One step of the schedule.
#[derive(Clone, Debug)]
struct Step {
    at_ms: u64,
    fault: Fault,
    /// The fault's length in ms (where it has one).
    ms: u64,
    /// Which target (a worker, a master, a lock), reduced modulo the candidates.
    pick: u64,
}

fn schedule(args: &RunArgs, faults: &[Fault], seed: u64) -> Vec<Step> {
    let mut rng = Rng::new(seed);
    let mut steps = Vec::new();
    if faults.is_empty() {
        return steps;
    }
    let end = args.duration.saturating_mul(1000).saturating_sub(4000);
    // With `--calm-end`, every step ends before the calm stretch.
    let calm = (args.calm_end > 0).then(|| {
        args.duration
            .saturating_sub(args.calm_end)
            .saturating_mul(1000)
    });
    let mut t = 2000 + rng.below(args.interval * 500);
    // `--cover`: the faults come out of a bag, shuffled, each once before any twice.
    let mut bag: Vec<Fault> = Vec::new();
    while t < end {
        let fault = if args.cover {
            if bag.is_empty() {
                bag = faults.to_vec();
                for i in (1..bag.len()).rev() {
                    bag.swap(i, rng.below(i as u64 + 1) as usize);
                }
            }
            bag.remove(0)
        } else {
            faults[rng.below(faults.len() as u64) as usize]
        };
        let lease = args.watchdog_ms;
        let ms = match fault {
            Fault::PauseClient => lease * 13 / 10 + rng.below(lease * 7 / 10),
            Fault::PauseServer => 500 + rng.below(2000),
            Fault::Partition => 500 + rng.below(3500),
            Fault::ReplyLoss => 200 + rng.below(1000),
            Fault::Latency => 2000 + rng.below(3000),
            Fault::DebugSleep => 300 + rng.below(1700),
            Fault::Migrate => 500 + rng.below(2500),
            Fault::LagKill => 300 + rng.below(1200),
            _ => 0,
        };
        let pick = rng.next_u64();
        if calm.is_some_and(|c| t + ms > c) {
            break;
        }
        steps.push(Step {
            at_ms: t,
            fault,
            ms,
            pick,
        });
        t += ms + args.interval * 500 + rng.below(args.interval * 1000);
    }
    steps
}

/// The servers of a run.
struct Deployment {
    topology: Topology,
    register: RedisServer,
    redlock: Vec<Mutex<RedisServer>>,
    /// Standalone: the master, its replica, the clients' proxy.
    master: Option<Mutex<RedisServer>>,
    replica: Option<RedisServer>,
    proxy: Option<Proxy>,
    sentinel: Option<Mutex<SentinelSet>>,
    cluster: Option<RedisCluster>,
    /// The worker processes: each one's PIDs (a Java worker's with its JVM's).
    workers: Vec<Vec<u32>>,
}

/// `SIGSTOP` (`stop`) or `SIGCONT` to a process.
fn signal(pid: u32, stop: bool) -> Result<(), String> {
    let p = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
        .ok_or_else(|| format!("bad pid {pid}"))?;
    let sig = if stop {
        rustix::process::Signal::STOP
    } else {
        rustix::process::Signal::CONT
    };
    rustix::process::kill_process(p, sig).map_err(|e| format!("signal to pid {pid}: {e}"))
}

/// The state letter of a process (`/proc/<pid>/stat`: `T` stopped, `R`/`S` running or
/// sleeping, `Z` zombie), `None` if there is no such process.
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Whether a process exists (a zombie does not count).
fn alive(pid: Option<u32>) -> bool {
    pid.and_then(proc_state)
        .is_some_and(|s| s != 'Z' && s != 'X')
}

/// Waits (at most 2 s) until the process is stopped (`true`) or running (`false`).
async fn until_stopped(pid: u32, stopped: bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let s = proc_state(pid);
        if s.is_some_and(|s| (s == 'T' || s == 't') == stopped) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// `SIGSTOP` to every process of `pids`, `pause`, `SIGCONT`, each seen in the processes'
/// state: stopped within the pause, still stopped at its end, running again after.
async fn pause_process(pids: &[u32], pause: Duration) -> Result<String, String> {
    let start = Instant::now();
    let mut stopped = Vec::new();
    for &pid in pids {
        signal(pid, true)?;
    }
    for &pid in pids {
        stopped.push(until_stopped(pid, true).await);
    }
    tokio::time::sleep_until(start + pause).await;
    let still: Vec<Option<char>> = pids.iter().map(|&p| proc_state(p)).collect();
    let resumed: Vec<Result<(), String>> = pids.iter().map(|&p| signal(p, false)).collect();
    let mut running = Vec::new();
    for &pid in pids {
        running.push(until_stopped(pid, false).await);
    }
    resumed.into_iter().collect::<Result<Vec<()>, String>>()?;
    let ok = stopped.iter().all(|s| *s)
        && still.iter().all(|s| matches!(s, Some('T' | 't')))
        && running.iter().all(|r| *r);
    if !ok {
        return Err(format!(
            "pids {pids:?}: seen stopped {stopped:?}, state at the end {still:?}, running again \
             {running:?}"
        ));
    }
    Ok("seen stopped, and running again after".to_owned())
}

/// Waits (at most 60 s) until a Sentinel deployment has settled: every sentinel names the
/// same master, none sees it down or is failing it over, that server says it is a master, and
/// it has a replica online (its initial sync done) that acknowledged within the last second;
/// all of it on two looks at least a second apart. Returns how long it took, or what was still
/// unsettled.
fn settle_sentinel(set: &SentinelSet) -> Result<std::time::Duration, String> {
    let start = std::time::Instant::now();
    let mut since: Option<std::time::Instant> = None;
    let mut last = String::new();
    while start.elapsed() < Duration::from_secs(60) {
        let look = || -> Result<(), String> {
            let mut named = Vec::new();
            for p in set.sentinel_ports() {
                let m = set.sentinel_cli(p, &["SENTINEL", "master", sentinel::MASTER_NAME]);
                let lines: Vec<&str> = m.lines().map(str::trim).collect();
                let get = |k: &str| {
                    lines
                        .iter()
                        .position(|l| *l == k)
                        .and_then(|i| lines.get(i + 1))
                        .copied()
                        .unwrap_or("")
                };
                let flags = get("flags");
                if flags != "master" {
                    return Err(format!("sentinel {p}: flags {flags:?}"));
                }
                named.push(get("port").to_owned());
            }
            if named.iter().any(|n| *n != named[0]) {
                return Err(format!("the sentinels name {named:?}"));
            }
            let port: u16 = named[0].parse().map_err(|_| format!("master {named:?}"))?;
            let info = set.data_cli(port, &["INFO", "replication"]);
            if !info.contains("role:master") {
                return Err(format!("{port} is not a master"));
            }
            let synced = info.lines().any(|l| {
                l.starts_with("slave")
                    && l.contains("state=online")
                    && l.split(',')
                        .find_map(|kv| kv.strip_prefix("lag="))
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .is_some_and(|lag| lag <= 1)
            });
            if !synced {
                return Err(format!(
                    "master {port}: no replica online and acknowledging"
                ));
            }
            Ok(())
        };
        match look() {
            Ok(()) => {
                let t = *since.get_or_insert_with(std::time::Instant::now);
                if t.elapsed() >= Duration::from_secs(1) {
                    return Ok(start.elapsed());
                }
            }
            Err(e) => {
                since = None;
                last = e;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(format!("not within 60 s: {last}"))
}

/// A key the kill faults write before the kill and read after the restart: kept from the AOF,
/// gone without data.
const MARKER: &str = "chaos:nemesis:marker";

/// A raw connection of the nemesis to the proxy, to see a fault's effect on a `PING`.
struct Probe(tokio::net::TcpStream);

impl Probe {
    async fn connect(port: u16) -> Result<Probe, String> {
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .map(Probe)
            .map_err(|e| format!("probe connection: {e}"))
    }

    async fn send_ping(&mut self) -> Result<(), String> {
        self.0
            .write_all(b"PING\r\n")
            .await
            .map_err(|e| format!("probe: {e}"))
    }

    /// The next reply line, if one comes within `within`: `+PONG`, else an error.
    async fn reply(&mut self, within: Duration) -> Result<(), String> {
        use tokio::io::AsyncReadExt;
        let read = async {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 64];
            while !buf.ends_with(b"\r\n") {
                let n = self.0.read(&mut chunk).await.map_err(|e| e.to_string())?;
                if n == 0 {
                    return Err("connection closed".to_owned());
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            if buf.starts_with(b"+PONG") {
                Ok(())
            } else {
                Err(format!("reply {:?}", String::from_utf8_lossy(&buf)))
            }
        };
        tokio::time::timeout(within, read)
            .await
            .map_err(|_| format!("no reply within {within:?}"))?
    }

    /// A `PING` and its reply within `within`.
    async fn ping(&mut self, within: Duration) -> Result<(), String> {
        self.send_ping().await?;
        self.reply(within).await
    }
}

/// The round trip of a `PING` on a new connection to `port` (the proxy), at most 10 s.
async fn ping_rtt(port: u16) -> Result<Duration, String> {
    let mut probe = Probe::connect(port).await?;
    let t = Instant::now();
    probe.ping(Duration::from_secs(10)).await?;
    Ok(t.elapsed())
}

/// `redis-cli` on a port, blocking (the fixture's).
fn cli(port: u16, args: &[&str]) -> String {
    sentinel::cli(port, args)
}

impl Deployment {
    async fn start(topology: Topology) -> Deployment {
        let register = RedisServer::start();
        let redlock = (0..3)
            .map(|_| Mutex::new(RedisServer::start()))
            .collect::<Vec<_>>();
        let mut d = Deployment {
            topology,
            register,
            redlock,
            master: None,
            replica: None,
            proxy: None,
            sentinel: None,
            cluster: None,
            workers: Vec::new(),
        };
        match topology {
            Topology::Standalone => {
                let master = RedisServer::start_with(&[
                    "--appendonly",
                    "yes",
                    "--appendfsync",
                    "always",
                    "--repl-diskless-sync",
                    "yes",
                    "--repl-diskless-sync-delay",
                    "0",
                ]);
                let mport = master.port();
                let replica =
                    RedisServer::start_with(&["--replicaof", "127.0.0.1", &mport.to_string()]);
                sentinel::wait_for("the replica", Duration::from_secs(30), || {
                    cli(mport, &["INFO", "replication"]).contains("state=online")
                });
                d.proxy = Some(Proxy::start(mport).await);
                d.master = Some(Mutex::new(master));
                d.replica = Some(replica);
            }
            Topology::Sentinel | Topology::Sentinel11 => {
                let replicas = if topology == Topology::Sentinel { 2 } else { 1 };
                let set =
                    tokio::task::spawn_blocking(move || SentinelSet::start_with_replicas(replicas))
                        .await
                        .expect("start the sentinel set");
                d.sentinel = Some(Mutex::new(set));
            }
            Topology::Cluster => {
                let c = tokio::task::spawn_blocking(RedisCluster::start)
                    .await
                    .expect("start the cluster");
                // The workers write all the time: the fixture's waits take a replica that
                // acknowledged within the last second as in sync.
                c.set_steady_load(true);
                d.cluster = Some(c);
            }
        }
        d
    }

    fn connect_spec(&self) -> String {
        match self.topology {
            Topology::Standalone => {
                format!(
                    "standalone:{}",
                    self.proxy.as_ref().map(|p| p.url()).unwrap_or_default()
                )
            }
            Topology::Sentinel | Topology::Sentinel11 => {
                let set = self
                    .sentinel
                    .as_ref()
                    .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()));
                let urls = set.map(|s| s.sentinel_urls().join(",")).unwrap_or_default();
                format!("sentinel:{}:{urls}", sentinel::MASTER_NAME)
            }
            Topology::Cluster => {
                let urls = self
                    .cluster
                    .as_ref()
                    .map(|c| c.seed_urls().join(","))
                    .unwrap_or_default();
                format!("cluster:{urls}")
            }
        }
    }

    /// The port of the master that serves the locks (on a cluster: of `name`'s slot).
    fn master_port(&self, name: &str) -> u16 {
        match self.topology {
            Topology::Standalone => self
                .master
                .as_ref()
                .map(|m| m.lock().unwrap_or_else(|e| e.into_inner()).port())
                .unwrap_or(0),
            Topology::Sentinel | Topology::Sentinel11 => self
                .sentinel
                .as_ref()
                .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).master_port())
                .unwrap_or(0),
            Topology::Cluster => self
                .cluster
                .as_ref()
                .map(|c| c.master_for_key(name))
                .unwrap_or(0),
        }
    }

    fn master_pid(&self, port: u16) -> Option<u32> {
        match self.topology {
            Topology::Standalone => self
                .master
                .as_ref()
                .and_then(|m| m.lock().unwrap_or_else(|e| e.into_inner()).pid()),
            Topology::Sentinel | Topology::Sentinel11 => self.sentinel.as_ref().and_then(|s| {
                let s = s.lock().unwrap_or_else(|e| e.into_inner());
                s.servers
                    .iter()
                    .flatten()
                    .find(|r| r.port() == port)
                    .and_then(RedisServer::pid)
            }),
            Topology::Cluster => self.cluster.as_ref().and_then(|c| c.pid(port)),
        }
    }

    /// Runs one step: what was done and the effect it was seen to have (`Ok`), or what failed,
    /// or the effect that was not seen (the step did nothing provable); and its target for the
    /// checker (`process=<p>` for a client pause, `lock=<key>` for a key deleted), if any.
    async fn run_step(
        self: Arc<Self>,
        step: Step,
        names: Vec<String>,
    ) -> (Result<String, String>, String) {
        match step.fault {
            Fault::PauseClient => {
                let p = (step.pick % self.workers.len() as u64) as usize;
                let pids = &self.workers[p];
                let what = match pause_process(pids, Duration::from_millis(step.ms)).await {
                    Ok(seen) => Ok(format!(
                        "SIGSTOP worker {p} (pids {pids:?}) for {} ms: {seen}",
                        step.ms
                    )),
                    Err(e) => Err(e),
                };
                (what, format!("process={p}"))
            }
            Fault::DelKey => self.del_key(&names, step.pick).await,
            _ => {
                let fault = step.fault;
                let done = self.clone().run_other(step, names).await;
                (self.settle_after(fault, done).await, String::new())
            }
        }
    }

    /// On Sentinel and on the cluster, a fault that can fail a master over ends when the
    /// deployment has settled (see [`settle_sentinel`]; the cluster fixture's `wait_stable`:
    /// every node agrees, every slot served, every replica in sync and acknowledging): a
    /// failover started late (after a pause of a master, once a restarted replica is back)
    /// falls within the fault's span, and the next fault starts from a settled deployment.
    async fn settle_after(
        self: Arc<Self>,
        fault: Fault,
        done: Result<String, String>,
    ) -> Result<String, String> {
        let disturbs = matches!(
            fault,
            Fault::KillFailover
                | Fault::LagKill
                | Fault::SentinelFailover
                | Fault::ClusterFailover
                | Fault::Migrate
                | Fault::PauseServer
                | Fault::DebugSleep
        );
        if !disturbs || self.topology == Topology::Standalone {
            return done;
        }
        let this = self.clone();
        let settled = if self.topology == Topology::Cluster {
            let t = Instant::now();
            tokio::spawn(async move {
                if let Some(c) = &this.cluster {
                    c.wait_stable().await;
                }
            })
            .await
            .map(|()| t.elapsed())
            .map_err(|e| format!("{e}"))
        } else {
            tokio::task::spawn_blocking(move || match &this.sentinel {
                Some(set) => settle_sentinel(&set.lock().unwrap_or_else(|e| e.into_inner())),
                None => Err("no sentinel".into()),
            })
            .await
            .unwrap_or_else(|e| Err(format!("settle: {e}")))
        };
        match (done, settled) {
            (Ok(s), Ok(t)) => Ok(format!("{s}; settled {} ms later", t.as_millis())),
            (Ok(s), Err(e)) => Err(format!("{s}; NOT settled: {e}")),
            (Err(s), Ok(t)) => Err(format!("{s}; settled {} ms later", t.as_millis())),
            (Err(s), Err(e)) => Err(format!("{s}; NOT settled: {e}")),
        }
    }

    /// `DEL` of a held lock key, with its holders' fields read in the same script; the first
    /// held one of `names` from `pick` on (tried again for up to 2 s if none is held).
    async fn del_key(&self, names: &[String], pick: u64) -> (Result<String, String>, String) {
        const DEL: &str = "local f = redis.call('HKEYS', KEYS[1]); \
                           if #f == 0 then return 0 end; redis.call('DEL', KEYS[1]); return f";
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut tried = 0;
        while Instant::now() < deadline {
            for i in 0..names.len() {
                let name = &names[(pick as usize + i) % names.len()];
                let port = self.master_port(name);
                let (n, p) = (name.clone(), port);
                let reply = tokio::task::spawn_blocking(move || cli(p, &["EVAL", DEL, "1", &n]))
                    .await
                    .unwrap_or_default();
                tried += 1;
                let fields: Vec<&str> = reply.lines().map(str::trim).collect();
                if reply.trim() == "0" || fields.is_empty() {
                    continue;
                }
                if fields
                    .iter()
                    .any(|f| f.starts_with("ERR") || f.starts_with("MOVED"))
                {
                    return (
                        Err(format!("DEL {name} on {port}: {reply:?}")),
                        format!("lock={name}"),
                    );
                }
                return (
                    Ok(format!(
                        "DEL {name} on {port}, held (fields {}), deleted in the same script; \
                         every connection kept",
                        fields.join(" ")
                    )),
                    format!("lock={name}"),
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        (
            Err(format!("no held lock key found in {tried} tries over 2 s")),
            String::new(),
        )
    }

    /// The steps without a target.
    async fn run_other(self: Arc<Self>, step: Step, names: Vec<String>) -> Result<String, String> {
        let name = names[(step.pick % names.len() as u64) as usize].clone();
        let pause = Duration::from_millis(step.ms);
        match step.fault {
            Fault::PauseClient | Fault::DelKey => Err("targeted".into()),
            Fault::PauseServer => {
                let port = self.master_port(&name);
                let Some(pid) = self.master_pid(port) else {
                    return Err(format!("no master pid for {port}"));
                };
                let seen = pause_process(&[pid], pause).await?;
                Ok(format!("SIGSTOP master {port} for {} ms: {seen}", step.ms))
            }
            Fault::DebugSleep => {
                let port = self.master_port(&name);
                let secs = format!("{:.3}", step.ms as f64 / 1000.0);
                let s2 = secs.clone();
                let t = Instant::now();
                let reply =
                    tokio::task::spawn_blocking(move || cli(port, &["DEBUG", "SLEEP", &s2]))
                        .await
                        .map_err(|e| format!("DEBUG SLEEP {secs} on {port}: {e}"))?;
                let took = t.elapsed();
                // The reply comes once the server has slept (it answers nothing meanwhile).
                if reply != "OK" || took < pause.mul_f64(0.95) {
                    return Err(format!(
                        "DEBUG SLEEP {secs} on {port}: reply {reply:?} after {took:?}"
                    ));
                }
                Ok(format!(
                    "DEBUG SLEEP {secs} on {port}: replied OK after {} ms",
                    took.as_millis()
                ))
            }
            Fault::KillPersist | Fault::KillWipe => {
                let Some(m) = &self.master else {
                    return Err("no master".into());
                };
                let wiped = step.fault == Fault::KillWipe;
                let mut m = m.lock().unwrap_or_else(|e| e.into_inner());
                let port = m.port();
                let old = m.pid();
                let marker = now_ns().to_string();
                let set = cli(port, &["SET", MARKER, &marker]);
                if set != "OK" {
                    return Err(format!("master {port}: SET of the marker answered {set:?}"));
                }
                if wiped {
                    m.restart_empty();
                } else {
                    m.restart();
                }
                let new = m.pid();
                let got = cli(port, &["GET", MARKER]);
                let what = format!(
                    "kill -9 master {port} (pid {old:?}) and restart {} (pid {new:?})",
                    if wiped {
                        "without its data"
                    } else {
                        "from its AOF"
                    }
                );
                let data_as_expected = if wiped { got.is_empty() } else { got == marker };
                if old.is_none() || old == new || alive(old) || !data_as_expected {
                    return Err(format!("{what}: marker after the restart {got:?}"));
                }
                Ok(format!(
                    "{what}: new pid, the old one gone, the marker written before {}",
                    if wiped { "gone" } else { "kept" }
                ))
            }
            Fault::KillFailover => self.kill_failover(&name).await,
            Fault::LagKill => self.lag_kill(pause).await,
            Fault::Partition | Fault::ReplyLoss => {
                let Some(p) = &self.proxy else {
                    return Err("no proxy".into());
                };
                // A probe connection of the nemesis through the proxy: a PING sent in the
                // fault must get no reply during it, and then its reply late (partition) or
                // never, its connection reset (reply loss), whatever the workers sent.
                let mut probe = Probe::connect(p.port()).await?;
                probe.ping(Duration::from_secs(5)).await?;
                p.freeze();
                // Chunks being written as the freeze began are through by then.
                let settle = Duration::from_millis(20).min(pause / 2);
                tokio::time::sleep(settle).await;
                let before = p.stats();
                probe.send_ping().await?;
                let during = probe.reply(pause - settle).await;
                let stats = p.stats();
                let held: u64 = (0..2).map(|d| stats.received[d] - before.received[d]).sum();
                let forwarded: u64 = (0..2)
                    .map(|d| stats.forwarded[d] - before.forwarded[d])
                    .sum();
                if step.fault == Fault::Partition {
                    p.unfreeze();
                    let after = probe.reply(Duration::from_secs(5)).await;
                    let what = format!("partition (proxy frozen) for {} ms", step.ms);
                    match (during, after) {
                        (Err(_), Ok(_)) if forwarded == 0 => Ok(format!(
                            "{what}: a PING sent in it answered only after it, {held} chunks \
                             held, none forwarded"
                        )),
                        (during, after) => Err(format!(
                            "{what}: a PING sent in it got {during:?} in it and {after:?} after \
                             it; {held} chunks held, {forwarded} forwarded"
                        )),
                    }
                } else {
                    p.unfreeze_dropping();
                    let dropped_before = before.dropped[0] + before.dropped[1];
                    let dropped = p
                        .wait_for(
                            |s| s.dropped[0] + s.dropped[1] > dropped_before,
                            Duration::from_secs(2),
                        )
                        .await;
                    let (open, accepted) = (p.connections(), p.accepted());
                    p.reset();
                    // The probe's connection is reset without its reply; the workers noticed
                    // theirs and connect again.
                    let after = probe.reply(Duration::from_secs(5)).await;
                    let reconnected = p
                        .wait_for(|s| s.accepted > accepted, Duration::from_secs(10))
                        .await;
                    let dropped_n = {
                        let s = p.stats();
                        s.dropped[0] + s.dropped[1] - dropped_before
                    };
                    let what = format!(
                        "requests and replies of {} ms lost ({dropped_n} chunks discarded), {open} \
                         connections reset",
                        step.ms
                    );
                    match (during, after) {
                        (Err(_), Err(_)) if forwarded == 0 && dropped && reconnected => {
                            Ok(format!(
                            "{what}: a PING sent in it never answered, its connection reset; the \
                             clients connected again"
                        ))
                        }
                        (during, after) => Err(format!(
                            "{what}: a PING sent in it got {during:?} in it and {after:?} after \
                             it; {forwarded} chunks forwarded in it, some discarded: {dropped}, \
                             the clients connected again: {reconnected}"
                        )),
                    }
                }
            }
            Fault::Latency => {
                let Some(p) = &self.proxy else {
                    return Err("no proxy".into());
                };
                let extra = Duration::from_millis(50 + step.pick % 250);
                p.set_latency(Direction::Upstream, extra);
                p.set_latency(Direction::Downstream, extra);
                let t = Instant::now();
                let rtt = ping_rtt(p.port()).await;
                tokio::time::sleep_until(t + pause).await;
                p.set_latency(Direction::Upstream, Duration::ZERO);
                p.set_latency(Direction::Downstream, Duration::ZERO);
                let what = format!(
                    "latency +{} ms each way for {} ms",
                    extra.as_millis(),
                    step.ms
                );
                match rtt {
                    Ok(rtt) if rtt >= extra * 2 => Ok(format!(
                        "{what}: a PING through the proxy took {} ms",
                        rtt.as_millis()
                    )),
                    other => Err(format!("{what}: a PING through the proxy: {other:?}")),
                }
            }
            Fault::SentinelFailover => {
                let this = self.clone();
                tokio::task::spawn_blocking(move || {
                    let Some(set) = &this.sentinel else {
                        return Err("no sentinel".to_owned());
                    };
                    let set = set.lock().unwrap_or_else(|e| e.into_inner());
                    let old = set.master_port();
                    let s = set.sentinel_ports()[0];
                    let r = set.sentinel_cli(s, &["SENTINEL", "FAILOVER", sentinel::MASTER_NAME]);
                    let new = set.await_new_master(old, Duration::from_secs(30));
                    // The old master is alive: it stays a master, with its clients' connections
                    // open, until a sentinel converts it into a replica.
                    let t = std::time::Instant::now();
                    let mut demoted = None;
                    while t.elapsed() < Duration::from_secs(20) {
                        if cli(old, &["ROLE"]).starts_with("slave") {
                            demoted = Some(t.elapsed().as_millis());
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    let what = format!(
                        "SENTINEL FAILOVER ({r}): {old} -> {new}; the old master still a master for \
                         {} ms after the new one was named",
                        demoted.map_or_else(|| ">20000".to_owned(), |ms| ms.to_string())
                    );
                    if r == "OK" && new != old && new != 0 {
                        Ok(what)
                    } else {
                        Err(what)
                    }
                })
                .await
                .unwrap_or_else(|e| Err(format!("failed: {e}")))
            }
            Fault::ClusterFailover => {
                let Some(c) = &self.cluster else {
                    return Err("no cluster".into());
                };
                let master = c.master_for_key(&name);
                let replica = c.replica_of(master);
                c.failover_under_load(replica).await;
                let now = c.master_for_key(&name);
                let what = format!("CLUSTER FAILOVER {master} -> {replica} (slot of {name})");
                if now == replica {
                    Ok(format!("{what}: {replica} serves the slot"))
                } else {
                    Err(format!("{what}: the slot is served by {now}"))
                }
            }
            Fault::Migrate => {
                let Some(c) = &self.cluster else {
                    return Err("no cluster".into());
                };
                let slot = c.keyslot(&name);
                let from = c.master_of_slot(slot);
                let masters: Vec<u16> = c.masters().into_iter().filter(|m| *m != from).collect();
                let to = masters[(step.pick % masters.len() as u64) as usize];
                c.begin_migration(slot, from, to);
                tokio::time::sleep(pause).await;
                // Keys created on the source during the ASK phase move too.
                c.begin_migration(slot, from, to);
                c.finish_migration(slot, from, to).await;
                let now = c.master_of_slot(slot);
                let what = format!(
                    "slot {slot} ({name}) {from} -> {to}, ASK phase {} ms",
                    step.ms
                );
                if now == to {
                    Ok(format!("{what}: {to} serves it"))
                } else {
                    Err(format!("{what}: served by {now}"))
                }
            }
            Fault::RedlockRestart => {
                let i = (step.pick % self.redlock.len() as u64) as usize;
                let mut s = self.redlock[i].lock().unwrap_or_else(|e| e.into_inner());
                let port = s.port();
                let old = s.pid();
                let marker = now_ns().to_string();
                let set = cli(port, &["SET", MARKER, &marker]);
                s.restart_empty();
                let new = s.pid();
                let got = cli(port, &["GET", MARKER]);
                let what = format!(
                    "kill -9 RedLock node {port} (pid {old:?}) and restart it empty (pid {new:?})"
                );
                if set != "OK" || old.is_none() || old == new || alive(old) || !got.is_empty() {
                    return Err(format!(
                        "{what}: SET of the marker {set:?}, after the restart {got:?}"
                    ));
                }
                Ok(format!(
                    "{what}: new pid, the old one gone, the marker gone"
                ))
            }
            Fault::Flush => {
                let port = self.master_port(&name);
                let r = tokio::task::spawn_blocking(move || cli(port, &["FLUSHALL"]))
                    .await
                    .unwrap_or_default();
                if r == "OK" {
                    Ok(format!("FLUSHALL on {port}: {r}"))
                } else {
                    Err(format!("FLUSHALL on {port}: {r:?}"))
                }
            }
        }
    }

    /// See [`Fault::LagKill`].
    async fn lag_kill(&self, pause: Duration) -> Result<String, String> {
        let Some(set) = &self.sentinel else {
            return Err("no sentinel".into());
        };
        let (old, i, replicas) = {
            let set = set.lock().unwrap_or_else(|e| e.into_inner());
            let old = set.master_port();
            let i = set
                .servers
                .iter()
                .position(|s| s.as_ref().is_some_and(|s| s.port() == old));
            let replicas: Vec<(u16, u32)> = set
                .servers
                .iter()
                .flatten()
                .filter(|s| s.port() != old)
                .filter_map(|s| s.pid().map(|pid| (s.port(), pid)))
                .collect();
            (old, i, replicas)
        };
        for (_, pid) in &replicas {
            let _ = signal(*pid, true);
        }
        // A stopped replica's kernel still takes in what the master sends (loopback socket
        // buffers hold megabytes) and hands it over once it runs again, so stopping is not
        // enough to lose writes: the master also drops its replica links, and what it is
        // written from then on reaches no replica (the stopped ones cannot reconnect).
        let links = {
            let set = set.lock().unwrap_or_else(|e| e.into_inner());
            set.data_cli(old, &["CLIENT", "KILL", "TYPE", "replica"])
        };
        tokio::time::sleep(pause).await;
        if let Some(i) = i {
            let mut set = set.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(s) = set.servers[i].as_mut() {
                s.kill();
            }
        }
        for (_, pid) in &replicas {
            let _ = signal(*pid, false);
        }
        let set2 = set;
        let new = {
            let set = set2.lock().unwrap_or_else(|e| e.into_inner());
            set.await_new_master(old, Duration::from_secs(60))
        };
        if let Some(i) = i {
            let mut set = set2.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(s) = set.servers[i].as_mut() {
                s.restart_empty();
            }
        }
        let what = format!(
            "replicas {:?} stopped for {} ms and {links} replica links of the master dropped, \
             master {old} killed at its end: {new} promoted; {old} restarted empty",
            replicas.iter().map(|(p, _)| p).collect::<Vec<_>>(),
            pause.as_millis()
        );
        if new != old && new != 0 && !replicas.is_empty() {
            Ok(what)
        } else {
            Err(what)
        }
    }

    async fn kill_failover(&self, name: &str) -> Result<String, String> {
        match self.topology {
            Topology::Cluster => {
                let Some(c) = &self.cluster else {
                    return Err("no cluster".into());
                };
                let master = c.master_for_key(name);
                let idx = c.masters().iter().position(|m| *m == master).unwrap_or(0);
                let (killed, promoted) = c.kill_master(idx).await;
                c.restart_node(killed).await;
                let what = format!(
                    "kill -9 master {killed} (slot of {name}): {promoted} promoted; {killed} \
                     restarted empty"
                );
                if promoted != killed && c.master_for_key(name) == promoted {
                    Ok(what)
                } else {
                    Err(what)
                }
            }
            Topology::Sentinel | Topology::Sentinel11 => {
                let Some(set) = &self.sentinel else {
                    return Err("no sentinel".into());
                };
                let (old, i) = {
                    let mut set = set.lock().unwrap_or_else(|e| e.into_inner());
                    let old = set.master_port();
                    let i = set
                        .servers
                        .iter()
                        .position(|s| s.as_ref().is_some_and(|s| s.port() == old));
                    if let Some(i) = i {
                        if let Some(s) = set.servers[i].as_mut() {
                            s.kill();
                        }
                    }
                    (old, i)
                };
                let new = {
                    let set = set.lock().unwrap_or_else(|e| e.into_inner());
                    set.await_new_master(old, Duration::from_secs(60))
                };
                if let Some(i) = i {
                    let mut set = set.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(s) = set.servers[i].as_mut() {
                        s.restart_empty();
                    }
                }
                let what = format!("kill -9 master {old}: {new} promoted; {old} restarted empty");
                if i.is_some() && new != old && new != 0 {
                    Ok(what)
                } else {
                    Err(what)
                }
            }
            Topology::Standalone => Err("no failover here".into()),
        }
    }
}

fn history_files(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "history") {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// The faults of a run from its `nemesis.log`: lines `# window_ms <n>`, `# deletion_window_ms
/// <n>` and `# told_window_ms <n>`, then one line per step, `<start_ns> <end_ns> <fault> <can
/// overlap 0|1> <loses data 0|1> <ok|FAILED> [process=<p>] [lock=<key>] t=...` (the target of
/// a client pause or a key deletion); whether a fault can stall renewals or tell a holder
/// follows from its name.
pub fn read_faults(dir: &Path) -> Faults {
    let log = std::fs::read_to_string(dir.join("nemesis.log")).unwrap_or_default();
    let mut faults = Faults::default();
    let ms = |v: &str| v.trim().parse::<u64>().unwrap_or(0) * 1_000_000;
    for l in log.lines() {
        if let Some(v) = l.strip_prefix("# window_ms ") {
            faults.window_ns = ms(v);
            continue;
        }
        if let Some(v) = l.strip_prefix("# deletion_window_ms ") {
            faults.deletion_window_ns = ms(v);
            continue;
        }
        if let Some(v) = l.strip_prefix("# told_window_ms ") {
            faults.told_window_ns = ms(v);
            continue;
        }
        let w: Vec<&str> = l.split_whitespace().collect();
        let (Some(start), Some(end)) = (
            w.first().and_then(|v| v.parse().ok()),
            w.get(1).and_then(|v| v.parse().ok()),
        ) else {
            continue;
        };
        let name = w.get(2).map_or("?", |v| v).to_owned();
        let target = |prefix: &str| {
            w.iter()
                .skip(6)
                .take_while(|v| !v.starts_with("t="))
                .find_map(|v| v.strip_prefix(prefix))
        };
        let fault = ALL.iter().find(|(n, _)| *n == name).map(|(_, f)| *f);
        faults.spans.push(FaultSpan {
            deletes: name == "del-key" || name == "flush",
            stalls: fault.is_none_or(Fault::stalls),
            tells: fault.is_none_or(Fault::tells),
            start,
            end,
            can_overlap: w.get(3) == Some(&"1"),
            loses_data: w.get(4) == Some(&"1"),
            process: target("process=").and_then(|p| p.parse().ok()),
            lock: target("lock=").map(str::to_owned),
            name,
        });
    }
    faults
}

/// Checks every `*.history` file of `dir`, with the faults of its `nemesis.log`.
pub fn check_dir(dir: &Path, stuck_ms: u64) -> Result<Report, String> {
    let mut text = String::new();
    for f in history_files(dir).map_err(|e| format!("{}: {e}", dir.display()))? {
        text.push_str(&std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?);
        text.push('\n');
    }
    check_with(text.lines(), stuck_ms, &read_faults(dir)).map_err(|e| e.to_string())
}

/// Compiles the Java driver against `REDISSON_CLASSPATH` (`compat-tests/java/build.sh`, which
/// keeps a build newer than the source) and returns the directory of its classes.
fn build_java() -> Result<String, String> {
    if std::env::var("REDISSON_CLASSPATH").map_or(true, |c| c.trim().is_empty()) {
        return Err(
            "--java needs REDISSON_CLASSPATH: the class path of Redisson and its dependencies \
             (README, \"Beside real Java Redisson\")"
                .into(),
        );
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../compat-tests/java/build.sh");
    let out = std::process::Command::new("bash")
        .arg(&script)
        .output()
        .map_err(|e| format!("{}: {e}", script.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} failed: {}",
            script.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// The standard output of a worker just started.
type WorkerOut = tokio::io::Lines<BufReader<tokio::process::ChildStdout>>;

/// Starts worker `process` (a Java worker with the driver's classes in `java`); see
/// [`worker_ready`].
fn spawn_worker(
    args: &RunArgs,
    d: &Deployment,
    process: u32,
    dir: &Path,
    seed: u64,
    java: Option<&str>,
) -> Result<(Child, WorkerOut), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let redlock: Vec<String> = d
        .redlock
        .iter()
        .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).url())
        .collect();
    let mut cmd = Command::new(exe);
    cmd.arg("worker")
        .args(["--process", &process.to_string()])
        .args(["--connect", &d.connect_spec()])
        .args(["--redlock", &redlock.join(",")])
        .args(["--register", &d.register.url()])
        .arg("--history")
        .arg(dir.join(format!("worker-{process}.history")))
        .args(["--owners", &args.owners.to_string()])
        .args(["--locks", &args.locks.to_string()])
        .args(["--variants", &args.variants])
        .args(["--watchdog-ms", &args.watchdog_ms.to_string()])
        .args(["--timeout-ms", &args.timeout_ms.to_string()])
        .args(["--wait-ms", &args.wait_ms.to_string()])
        .args(["--long-holds", &args.long_holds.to_string()])
        .args(["--seed", &seed.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    if args.no_replica_sync {
        cmd.arg("--no-replica-sync");
    }
    if let Some(classes) = java {
        cmd.args(["--java-classes", classes]);
    }
    let mut child = cmd.spawn().map_err(|e| format!("spawn worker: {e}"))?;
    let out = child.stdout.take().ok_or("worker stdout")?;
    Ok((child, BufReader::new(out).lines()))
}

/// Waits for a worker's `ready` line; returns its PIDs (a Java worker's JVM too).
async fn worker_ready(
    process: u32,
    child: &Child,
    mut lines: WorkerOut,
) -> Result<Vec<u32>, String> {
    let first = tokio::time::timeout(Duration::from_secs(90), lines.next_line()).await;
    let mut pids: Vec<u32> = child.id().into_iter().collect();
    match first {
        Ok(Ok(Some(l))) if l == "ready" => {}
        Ok(Ok(Some(l))) if l.starts_with("ready java_pid=") => {
            let jvm: Option<u32> = l["ready java_pid=".len()..].trim().parse().ok();
            pids.extend(jvm);
        }
        other => return Err(format!("worker {process} did not start: {other:?}")),
    }
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Ok(pids)
}

/// The table header and row of a run (docs/faults.md, "Measured runs"): topology, nemesis,
/// length and seed, ops, overlaps, unannounced ones of a crate holder (those in a deletion's
/// window apart), fenced writes refused, stale ones accepted, stuck waits, the longest wait. A
/// mixed fleet's row counts per side: the crate's holders must always be told (0 unannounced
/// with a crate holder first), and the crate must never break a Java hold (0 unexplained with a
/// Java holder first and a crate holder after it); Java holders are never told. It also gives
/// the holds of each process (crate processes first, then Java), so a starved process shows.
fn table_row(args: &RunArgs, nemesis: &str, seed: u64, r: &Report) -> (String, String) {
    let topology = format!(
        "{}{}",
        match args.topology {
            Topology::Standalone => "standalone + replica, through the proxy",
            Topology::Sentinel => "Sentinel 1 + 2",
            Topology::Sentinel11 => "Sentinel 1 + 1",
            Topology::Cluster => "cluster 3+3",
        },
        if args.no_replica_sync {
            ", no replica sync"
        } else {
            ""
        }
    );
    let side = |k: &str| r.by_side.get(k).copied().unwrap_or_default();
    let window = |n: u64| {
        if n > 0 {
            format!(" (+{n} in a deletion's window)")
        } else {
            String::new()
        }
    };
    let tail = format!(
        " {} / {} | {} | {} | {:.1} s |",
        r.fenced_rejected,
        r.fenced_writes,
        r.stale_accepted,
        r.stuck_waits,
        r.max_wait_ms / 1000.0
    );
    if args.java == 0 {
        let header =
            "| topology | nemesis | length, seed | ops (ops/s) | overlaps | unannounced | \
                      fenced rejected / writes | stale accepted | stuck | max wait |";
        let row = format!(
            "| {topology} | {nemesis} | {} s, seed {seed} | {} ({:.1}/s) | {} | **{}**{} |{tail}",
            args.duration,
            r.ops,
            r.ops_per_s(),
            r.overlaps,
            r.unannounced_crate,
            window(r.in_deletion_window),
        );
        return (header.to_owned(), row);
    }
    let per_process = r.process_ops();
    let holds = |range: std::ops::Range<u32>| -> String {
        range
            .map(|p| per_process.get(&p).copied().unwrap_or(0).to_string())
            .collect::<Vec<_>>()
            .join(" / ")
    };
    let crates = args.processes;
    let workers = crates + args.java;
    let header = "| topology (crate + Java workers) | nemesis | length, seed | ops: crate + Java \
                  (ops/s) | holds per process: crate; Java | crate holder first: overlaps | of them unannounced | Java holder \
                  first: overlaps (crate / Java after it) | of them unannounced | the crate broke \
                  a Java hold | fenced rejected / writes | stale accepted | stuck | max wait |";
    let (cc, cj, jc, jj) = (
        side("crate>crate"),
        side("crate>java"),
        side("java>crate"),
        side("java>java"),
    );
    let row = format!(
        "| {topology} ({} + {}) | {nemesis} | {} s, seed {seed} | {} + {} ({:.1}/s) | {}; {} | \
         {} | **{}**{} | {} / {} | {} | **{}** |{tail}",
        args.processes,
        args.java,
        args.duration,
        r.ops_by_side.get("crate").copied().unwrap_or(0),
        r.ops_by_side.get("java").copied().unwrap_or(0),
        r.ops_per_s(),
        holds(0..crates),
        holds(crates..workers),
        cc.all + cj.all,
        r.unannounced_crate,
        window(cc.in_deletion_window + cj.in_deletion_window),
        jc.all,
        jj.all,
        jc.unannounced + jj.unannounced,
        r.java_broken,
    );
    (header.to_owned(), row)
}

/// `chaos run`: returns whether the run passed `--expect-safe` (always `true` without it).
pub async fn run(args: RunArgs) -> Result<bool, String> {
    let faults = parse_faults(&args.nemesis, args.topology)?;
    let seed = args.seed.unwrap_or_else(|| now_ns() % 1_000_000);
    let steps = schedule(&args, &faults, seed);
    let java_classes = if args.java > 0 {
        Some(build_java()?)
    } else {
        None
    };
    let command = format!(
        "cargo run --release -p redisson-lock-chaos -- run --topology {} --duration {} --seed {seed} \
         --processes {} --owners {} --nemesis {} --interval {}{}{}{}{}{}{}",
        args.topology.name(),
        args.duration,
        args.processes,
        args.owners,
        args.nemesis,
        args.interval,
        if args.long_holds > 0 {
            format!(" --long-holds {}", args.long_holds)
        } else {
            String::new()
        },
        if args.calm_end > 0 {
            format!(" --calm-end {}", args.calm_end)
        } else {
            String::new()
        },
        if args.watchdog_ms == 3000 {
            String::new()
        } else {
            format!(" --watchdog-ms {}", args.watchdog_ms)
        },
        if args.java > 0 {
            format!(" --java {}", args.java)
        } else {
            String::new()
        },
        if args.cover { " --cover" } else { "" },
        if args.no_replica_sync { " --no-replica-sync" } else { "" }
    );
    println!("chaos: {command}");
    println!("nemesis schedule (seed {seed}):");
    for s in &steps {
        println!(
            "  t={:>7.1}s {:<17} ms={:<5} pick={}",
            s.at_ms as f64 / 1000.0,
            s.fault.name(),
            s.ms,
            s.pick % 1000
        );
    }
    let (dir, keep) = match &args.keep {
        Some(d) => (d.clone(), true),
        None => (
            std::env::temp_dir().join(format!("redisson-lock-chaos-{}", std::process::id())),
            false,
        ),
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for f in history_files(&dir).unwrap_or_default() {
        let _ = std::fs::remove_file(f);
    }
    let t_setup = Instant::now();
    let mut d = Deployment::start(args.topology).await;
    println!("servers up in {:.1}s", t_setup.elapsed().as_secs_f64());
    // Every worker starts at once (a JVM takes a few seconds); then each one's ready line.
    let mut children = Vec::new();
    let mut outs = Vec::new();
    for p in 0..args.processes + args.java {
        let java = (p >= args.processes)
            .then_some(java_classes.as_deref())
            .flatten();
        let (child, out) = spawn_worker(&args, &d, p, &dir, seed.wrapping_add(p as u64), java)?;
        children.push(child);
        outs.push(out);
    }
    for (p, out) in outs.into_iter().enumerate() {
        let pids = worker_ready(p as u32, &children[p], out).await?;
        d.workers.push(pids);
    }
    let d = Arc::new(d);
    let mut names = Vec::new();
    for v in args.variants.split(',').filter(|v| *v != "redlock") {
        names.extend(lock_names(v, args.locks));
    }
    if names.is_empty() {
        names.push(lock_names("reentrant", 1).remove(0));
    }
    let mut log = std::fs::File::create(dir.join("nemesis.log")).map_err(|e| e.to_string())?;
    // How long after a fault's end an overlap can still be its doing: a holder whose renewals
    // stopped is told by its deadline at most a lease later, and a waiter takes the freed lock
    // within its next attempt (a command timeout, a retry).
    let window_ms = 2 * args.watchdog_ms + args.timeout_ms;
    let _ = writeln!(log, "# window_ms {window_ms}");
    // How long a watchdog holder whose key was deleted may not know it: its next renewal comes
    // within a renewal period (a third of the watchdog timeout) and answers within a command
    // timeout; another period of slack for a loaded machine.
    let deletion_window_ms = 2 * args.watchdog_ms / 3 + args.timeout_ms;
    let _ = writeln!(log, "# deletion_window_ms {deletion_window_ms}");
    // How long after a fault's end a holder can still learn of it: a renewal sent during it
    // times out a command timeout later, the first renewal after it finds a lost field within
    // a renewal period and a command timeout, a resumed process sees its deadline passed at
    // once; a lease of slack for a loaded machine (the longest seen in the smoke run: 55 ms).
    let told_window_ms = args.watchdog_ms + args.timeout_ms;
    let _ = writeln!(log, "# told_window_ms {told_window_ms}");
    let start = Instant::now();
    let total = steps.len();
    let (mut verified, mut failed, mut not_run) = (0usize, 0usize, 0usize);
    for (i, step) in steps.into_iter().enumerate() {
        // A fault that took longer than scheduled (a failover that waits for the sentinels)
        // delays the next ones; none starts after the run's length.
        if start.elapsed() >= Duration::from_secs(args.duration) {
            not_run = total - i;
            let line = format!("{not_run} scheduled fault(s) not run: past the run's length");
            println!("nemesis {line}");
            let _ = writeln!(log, "# {line}");
            break;
        }
        let at = start + Duration::from_millis(step.at_ms);
        tokio::time::sleep_until(at).await;
        let t0 = now_ns();
        let res = tokio::spawn(d.clone().run_step(step.clone(), names.clone())).await;
        let t1 = now_ns();
        let (ok, done, target) = match res {
            Ok((Ok(s), target)) => (true, s, target),
            Ok((Err(s), target)) => (false, s, target),
            Err(e) => (false, format!("{:?}: {e}", step.fault), String::new()),
        };
        if ok {
            verified += 1;
        } else {
            failed += 1;
        }
        let line = format!(
            "t={:.1}s {} ({} ms): {}{done}",
            start.elapsed().as_secs_f64(),
            step.fault.name(),
            (t1 - t0) / 1_000_000,
            if ok { "" } else { "FAILED: " }
        );
        println!("nemesis {line}");
        let _ = writeln!(
            log,
            "{t0} {t1} {} {} {} {} {target} {line}",
            step.fault.name(),
            u8::from(step.fault.can_overlap()),
            u8::from(step.fault.loses_data(args.topology)),
            if ok { "ok" } else { "FAILED" }
        );
    }
    println!(
        "nemesis steps={total} verified={verified} failed={failed} not_run={not_run} \
         (each step's effect seen: a process stopped and running again, a DEBUG SLEEP's reply \
         after its length, a new pid and the marker kept or gone, chunks held or discarded, a \
         PING slowed, a new master, a held key deleted)"
    );
    tokio::time::sleep_until(start + Duration::from_secs(args.duration)).await;
    // Stop: every worker running again, then asked to finish its current attempt and exit.
    for pid in d.workers.iter().flatten() {
        let _ = signal(*pid, false);
    }
    for c in &mut children {
        if let Some(mut stdin) = c.stdin.take() {
            let _ = stdin.write_all(b"stop\n").await;
        }
    }
    let stop_bound = Duration::from_millis(args.wait_ms + 4 * args.watchdog_ms + 30_000);
    let (mut killed, mut worker_failures) = (0, Vec::new());
    for (p, c) in children.iter_mut().enumerate() {
        match tokio::time::timeout(stop_bound, c.wait()).await {
            Ok(Ok(status)) if status.success() => {}
            Ok(Ok(status)) => worker_failures.push(format!("worker {p} exited with {status}")),
            Ok(Err(e)) => worker_failures.push(format!("worker {p}: {e}")),
            Err(_) => {
                killed += 1;
                let _ = c.kill().await;
            }
        }
    }
    if killed > 0 {
        println!("{killed} worker(s) did not stop within {stop_bound:?} and were killed");
    }
    println!(
        "workers={} java_workers={} failed={} ({})",
        children.len(),
        args.java,
        worker_failures.len(),
        if worker_failures.is_empty() {
            "every one exited with status 0".to_owned()
        } else {
            worker_failures.join("; ")
        }
    );
    let stuck_ms = args.wait_ms + 2 * args.watchdog_ms + 20_000;
    let report = check_dir(&dir, stuck_ms)?;
    println!(
        "history: {}",
        if keep {
            dir.display().to_string()
        } else {
            "removed".into()
        }
    );
    println!("result {}", report.summary());
    println!("{}", report.by_fault_line());
    println!("{}", report.recovery_line());
    let nemesis = if args.nemesis == "full" {
        format!(
            "`full`: {} ({total} faults)",
            faults
                .iter()
                .map(|f| f.name())
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        format!("`{}` ({total} faults)", args.nemesis)
    };
    let (header, row) = table_row(&args, &nemesis, seed, &report);
    println!("table header: {header}");
    println!("table row: {row}");
    if !keep {
        let _ = std::fs::remove_dir_all(&dir);
    }
    drop(d);
    let owners = ((args.processes + args.java) * args.owners) as usize;
    let checks = [
        (failed == 0, "a fault step failed or had no effect"),
        (worker_failures.is_empty() && killed == 0, "a worker failed"),
        (
            report.owner_ops.len() == owners && report.min_owner_ops() > 0,
            "an owner never acquired",
        ),
        (
            report.unannounced_crate == 0,
            "unannounced overlaps of a crate holder",
        ),
        (
            report.java_broken == 0,
            "a Java holder's exclusion broken by the crate",
        ),
        (
            report.unexplained == 0,
            "overlaps no fault before them explains",
        ),
        (
            report.told_unexplained == 0,
            "holds told in doubt or lost that no fault explains",
        ),
        (
            report.token_regressions == 0,
            "tokens that did not increase while the counter survived",
        ),
        (report.stuck_waits == 0, "stuck waits"),
        (report.stale_accepted == 0, "stale fenced writes accepted"),
    ];
    let broken: Vec<&str> = checks.iter().filter(|c| !c.0).map(|c| c.1).collect();
    println!(
        "verdict {}",
        if broken.is_empty() {
            "safe".to_owned()
        } else {
            format!("NOT SAFE: {}", broken.join("; "))
        }
    );
    Ok(!args.expect_safe || broken.is_empty())
}
