//! Test rig: a throwaway Redis Cluster of six `redis-server` processes (3 masters, 3 replicas)
//! on free loopback ports, with helpers to move the topology (manual failover, slot migration,
//! killing a master and waiting for the automatic failover).
//!
//! * [`RedisCluster::start`] gives a cluster owned by the test; it is stopped (SIGKILL, by PID)
//!   when dropped. Use one for every test that changes the topology.
//! * [`RedisCluster::shared`] gives one cluster per test binary, started on first use and shared
//!   by the tests that only read and write keys. Statics are never dropped, so its processes are
//!   stopped by a watchdog: a `sh` child that reads the PIDs of the servers from a pipe and, when
//!   the pipe closes (the test binary exits, however it exits: normally, by a panic, by a signal),
//!   `kill -9`s them, then removes the cluster's directory under the temp dir. Owned clusters use the same watchdog, so a test binary killed in the middle
//!   of a test leaves no server behind either. Tests must not change the shared cluster's
//!   topology (no failover, migration or kill): the other tests run against it in parallel.
//!
//! Every node listens on a free port and has its cluster bus on a second free port
//! (`--cluster-port`, Redis ≥ 7), so no "port + 10000" has to be free. Persistence is off,
//! replication is diskless without delay, and `--cluster-node-timeout` is
//! [`NODE_TIMEOUT_MS`], so an automatic failover after a kill takes about 3 s.
//!
//! Nodes are named by their port. Helpers that wait return once every live node reports
//! `cluster_state:ok`, all live nodes agree on the whole topology (`CLUSTER NODES`: roles,
//! masters, slots, failed nodes) and every live replica's link is up (in sync).

use std::{
    collections::{BTreeMap, HashSet},
    io::{BufRead, BufReader, Write},
    net::{SocketAddr, TcpStream},
    path::{Path, PathBuf},
    process::{Child, ChildStdin, Command, Stdio},
    sync::{
        atomic::{AtomicBool, AtomicUsize, Ordering},
        Mutex, OnceLock,
    },
    time::{Duration, Instant},
};

use crate::redis_server::{free_port, ping};

/// `--cluster-node-timeout` of every node.
pub const NODE_TIMEOUT_MS: u64 = 1000;
/// Number of hash slots.
pub const SLOTS: u16 = 16384;
/// The longest any helper waits for the cluster to settle (a bound for a broken cluster, not a
/// timing: a new cluster under heavy load once needed more than 30 s for a first replica ack).
const SETTLE: Duration = Duration::from_secs(60);
const POLL: Duration = Duration::from_millis(20);

/// A reply of the raw RESP2 connection used by the fixture ([`RedisCluster::query`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    Status(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Option<Vec<Reply>>),
}

impl Reply {
    /// The text of a status, error, integer or bulk reply ("" for nil and arrays).
    pub fn text(&self) -> String {
        match self {
            Reply::Status(s) | Reply::Error(s) => s.clone(),
            Reply::Int(i) => i.to_string(),
            Reply::Bulk(Some(b)) => String::from_utf8_lossy(b).into_owned(),
            Reply::Bulk(None) | Reply::Array(_) => String::new(),
        }
    }

    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }

    pub fn int(&self) -> Option<i64> {
        match self {
            Reply::Int(i) => Some(*i),
            Reply::Bulk(Some(_)) | Reply::Status(_) => self.text().parse().ok(),
            _ => None,
        }
    }

    /// The elements of an array reply (empty for anything else).
    pub fn items(self) -> Vec<Reply> {
        match self {
            Reply::Array(Some(v)) => v,
            _ => Vec::new(),
        }
    }
}

fn read_reply(r: &mut impl BufRead) -> std::io::Result<Reply> {
    use std::io::{Error, ErrorKind};
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(Error::new(ErrorKind::UnexpectedEof, "connection closed"));
    }
    let line = line.trim_end_matches(['\r', '\n']);
    if line.is_empty() {
        return Err(Error::new(ErrorKind::InvalidData, "empty reply line"));
    }
    let (kind, rest) = line.split_at(1);
    let number = || {
        rest.parse::<i64>()
            .map_err(|_| Error::new(ErrorKind::InvalidData, format!("bad reply line {line:?}")))
    };
    Ok(match kind {
        "+" => Reply::Status(rest.to_string()),
        "-" => Reply::Error(rest.to_string()),
        ":" => Reply::Int(number()?),
        "$" => match number()? {
            n if n < 0 => Reply::Bulk(None),
            n => {
                let mut buf = vec![0u8; n as usize + 2];
                r.read_exact(&mut buf)?;
                buf.truncate(n as usize);
                Reply::Bulk(Some(buf))
            }
        },
        "*" => match number()? {
            n if n < 0 => Reply::Array(None),
            n => {
                let mut items = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    items.push(read_reply(r)?);
                }
                Reply::Array(Some(items))
            }
        },
        _ => {
            return Err(Error::new(
                ErrorKind::InvalidData,
                format!("bad reply line {line:?}"),
            ))
        }
    })
}

/// One node as one `CLUSTER NODES` line describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeView {
    pub id: String,
    pub port: u16,
    pub master: bool,
    /// The id of its master, for a replica.
    pub master_id: Option<String>,
    /// Owned slot ranges (inclusive), migrating/importing markers left out.
    pub slots: Vec<(u16, u16)>,
    /// Flagged `fail` (agreed by the majority; the local `fail?` is not counted).
    pub failed: bool,
    /// The line of the node that answered.
    pub myself: bool,
}

impl NodeView {
    pub fn owns(&self, slot: u16) -> bool {
        self.slots.iter().any(|&(a, b)| a <= slot && slot <= b)
    }

    fn slot_count(&self) -> usize {
        self.slots.iter().map(|&(a, b)| (b - a) as usize + 1).sum()
    }
}

/// Parses the text of `CLUSTER NODES`.
pub fn parse_cluster_nodes(text: &str) -> Vec<NodeView> {
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 {
            continue;
        }
        let port = f[1]
            .split('@')
            .next()
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        let flags: Vec<&str> = f[2].split(',').collect();
        let slots = f[8..]
            .iter()
            .filter(|s| !s.starts_with('['))
            .filter_map(|s| match s.split_once('-') {
                Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                None => s.parse().ok().map(|x| (x, x)),
            })
            .collect();
        out.push(NodeView {
            id: f[0].to_string(),
            port,
            master: flags.contains(&"master"),
            master_id: (f[3] != "-").then(|| f[3].to_string()),
            slots,
            failed: flags.contains(&"fail"),
            myself: flags.contains(&"myself"),
        });
    }
    out
}

/// What every node must agree on: per port, (master?, master's port, slots, failed).
type Agreement = BTreeMap<u16, (bool, Option<u16>, Vec<(u16, u16)>, bool)>;

fn agreement(views: &[NodeView]) -> Agreement {
    let port_of = |id: &str| views.iter().find(|v| v.id == id).map(|v| v.port);
    views
        .iter()
        .map(|v| {
            let mut slots = v.slots.clone();
            slots.sort_unstable();
            let master = v.master_id.as_deref().and_then(port_of);
            (v.port, (v.master, master, slots, v.failed))
        })
        .collect()
}

/// The process that kills the servers when the test binary goes away (see the module doc),
/// then removes the cluster's directory under the temp dir.
/// Its stdin gets one line per server: `<pid>` to watch, `-<pid>` when the server was stopped
/// and reaped by the test (so that a PID reused later is never killed).
struct Watchdog {
    child: Child,
    stdin: Option<ChildStdin>,
}

const WATCHDOG: &str = r#"trap '' INT TERM HUP
pids=' '
while IFS= read -r line; do
  case "$line" in
    -*) pids=$(printf '%s' "$pids" | sed "s/ ${line#-} / /") ;;
    *) pids="$pids$line " ;;
  esac
done
kill -9 $pids 2>/dev/null
# Wait (at most 5 s) until the killed servers are gone, then remove the cluster's directory.
i=0
while [ $i -lt 50 ]; do
  alive=0
  for p in $pids; do kill -0 "$p" 2>/dev/null && alive=1; done
  [ $alive -eq 0 ] && break
  sleep 0.1
  i=$((i+1))
done
[ -n "$1" ] && rm -rf -- "$1"
exit 0"#;

impl Watchdog {
    /// `root` is removed once the servers are killed (the shared cluster is never dropped).
    fn spawn(root: &Path) -> Watchdog {
        let mut child = Command::new("sh")
            .args(["-c", WATCHDOG, "cluster-watchdog"])
            .arg(root)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the watchdog shell");
        let stdin = child.stdin.take();
        Watchdog { child, stdin }
    }

    fn send(&mut self, line: String) {
        if let Some(stdin) = self.stdin.as_mut() {
            let _ = stdin.write_all(format!("{line}\n").as_bytes());
            let _ = stdin.flush();
        }
    }

    /// Closes the pipe (the watchdog kills what is left) and waits for it.
    fn finish(&mut self) {
        self.stdin = None;
        let _ = self.child.wait();
    }
}

struct Node {
    port: u16,
    bus_port: u16,
    dir: PathBuf,
    child: Mutex<Option<Child>>,
}

impl Node {
    fn spawn(dir: &Path, port: u16, bus_port: u16) -> Child {
        let _ = std::fs::create_dir_all(dir);
        Command::new("redis-server")
            .args(["--port", &port.to_string()])
            .args(["--cluster-port", &bus_port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--cluster-enabled", "yes"])
            .args(["--cluster-config-file", "nodes.conf"])
            .args(["--cluster-node-timeout", &NODE_TIMEOUT_MS.to_string()])
            // A replica may always take over, however long its link was down.
            .args(["--cluster-replica-validity-factor", "0"])
            .args(["--cluster-allow-replica-migration", "no"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--repl-diskless-sync", "yes"])
            .args(["--repl-diskless-sync-delay", "0"])
            .args(["--daemonize", "no"])
            .args(["--protected-mode", "no"])
            .args(["--enable-debug-command", "local"])
            .args(["--logfile", "redis.log"])
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot run redis-server: {e} (run scripts/test.sh to install it)")
            })
    }

    /// Waits until the freshly spawned server listens on both its ports and answers PING;
    /// false if it exited (a port taken). The bus is bound after the client port, and a
    /// node that cannot bind it exits then.
    fn came_up(child: &mut Child, port: u16, bus_port: u16) -> bool {
        let pid = child.id();
        crate::redis_server::came_up(child, port, || {
            crate::redis_server::listens(pid, bus_port) && ping(port)
        })
    }
}

static NEXT_CLUSTER: AtomicUsize = AtomicUsize::new(0);

/// A Redis Cluster of 3 masters and 3 replicas (see the module doc).
pub struct RedisCluster {
    nodes: Vec<Node>,
    root: PathBuf,
    watchdog: Mutex<Watchdog>,
    started_in: Duration,
    /// See [`RedisCluster::set_steady_load`].
    steady_load: AtomicBool,
}

impl RedisCluster {
    /// Starts six nodes, joins them with `redis-cli --cluster create … --cluster-replicas 1`
    /// and waits until the cluster is settled and every replica is in sync.
    pub fn start() -> RedisCluster {
        let t0 = Instant::now();
        let root = std::env::temp_dir().join(format!(
            "redisson-lock-cluster-{}-{}",
            std::process::id(),
            NEXT_CLUSTER.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&root);
        let mut watchdog = Watchdog::spawn(&root);
        let mut used = HashSet::new();
        let mut nodes: Vec<Node> = Vec::new();
        for i in 0..6 {
            let dir = root.join(format!("node{i}"));
            let mut attempts = 0;
            loop {
                attempts += 1;
                assert!(
                    attempts <= 20,
                    "could not start redis-server (cluster node)"
                );
                let (port, bus_port) = (free_port(), free_port());
                if port == 6379
                    || bus_port == 6379
                    || port == bus_port
                    || used.contains(&port)
                    || used.contains(&bus_port)
                {
                    continue;
                }
                let mut child = Node::spawn(&dir, port, bus_port);
                watchdog.send(child.id().to_string());
                if Node::came_up(&mut child, port, bus_port) {
                    used.extend([port, bus_port]);
                    nodes.push(Node {
                        port,
                        bus_port,
                        dir: dir.clone(),
                        child: Mutex::new(Some(child)),
                    });
                    break;
                }
                let _ = child.kill();
                watchdog.send(format!("-{}", child.id()));
                let _ = child.wait();
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
        let mut cluster = RedisCluster {
            nodes,
            root,
            watchdog: Mutex::new(watchdog),
            started_in: Duration::ZERO,
            steady_load: AtomicBool::new(false),
        };
        // Bounded: a create whose nodes cannot meet waits for the join forever (CI saw a whole
        // run held so, a node of the cluster having been another test binary's, killed by it).
        let out = Command::new("timeout")
            .args(["60", "redis-cli", "--cluster", "create"])
            .args(cluster.ports().iter().map(|p| format!("127.0.0.1:{p}")))
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed ({}; 124: timed out): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        cluster.wait_blocking("the new cluster", |v| {
            v.iter().filter(|n| n.master && !n.slots.is_empty()).count() == 3
                && v.iter().filter(|n| !n.master).count() == 3
        });
        cluster.started_in = t0.elapsed();
        cluster
    }

    /// The cluster shared by the tests of this binary (started on first use, never changed
    /// by them; stopped by the watchdog when the binary exits).
    pub fn shared() -> &'static RedisCluster {
        static SHARED: OnceLock<RedisCluster> = OnceLock::new();
        SHARED.get_or_init(RedisCluster::start)
    }

    /// How long [`start`](Self::start) took.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The ports of all six nodes (alive or not), in start order.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// The ports of the nodes whose process runs.
    pub fn live_ports(&self) -> Vec<u16> {
        self.nodes
            .iter()
            .filter(|n| n.child.lock().unwrap_or_else(|e| e.into_inner()).is_some())
            .map(|n| n.port)
            .collect()
    }

    /// `redis://127.0.0.1:<port>`
    pub fn url(port: u16) -> String {
        format!("redis://127.0.0.1:{port}")
    }

    /// `redis://127.0.0.1:<port>` of every live node: the seed list of a cluster client.
    pub fn seed_urls(&self) -> Vec<String> {
        self.live_ports().into_iter().map(Self::url).collect()
    }

    /// The fred form of the seed list:
    /// `redis-cluster://127.0.0.1:<p1>?node=127.0.0.1:<p2>&node=…` (every live node).
    pub fn cluster_url(&self) -> String {
        let ports = self.live_ports();
        let rest: Vec<String> = ports[1..]
            .iter()
            .map(|p| format!("node=127.0.0.1:{p}"))
            .collect();
        format!("redis-cluster://127.0.0.1:{}?{}", ports[0], rest.join("&"))
    }

    /// The PID of a node's process, if it runs.
    pub fn pid(&self, port: u16) -> Option<u32> {
        self.node(port)
            .child
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|c| c.id())
    }

    fn node(&self, port: u16) -> &Node {
        self.nodes
            .iter()
            .find(|n| n.port == port)
            .unwrap_or_else(|| panic!("no cluster node on port {port}"))
    }

    /// Sends one command on a fresh connection to `127.0.0.1:<port>`. `Err` is a transport
    /// error; a Redis error is `Ok(Reply::Error(..))`.
    pub fn query<A: AsRef<[u8]>>(port: u16, args: &[A]) -> Result<Reply, String> {
        Self::query_all(port, &[args]).map(|mut r| r.remove(0))
    }

    /// Sends several commands on one fresh connection (e.g. `ASKING` and the command it
    /// allows) and returns their replies in order.
    pub fn query_all<A: AsRef<[u8]>>(port: u16, commands: &[&[A]]) -> Result<Vec<Reply>, String> {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500))
            .map_err(|e| format!("connect {port}: {e}"))?;
        let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
        let _ = s.set_nodelay(true);
        let mut buf = Vec::new();
        for args in commands {
            buf.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for a in *args {
                let a = a.as_ref();
                buf.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
                buf.extend_from_slice(a);
                buf.extend_from_slice(b"\r\n");
            }
        }
        s.write_all(&buf)
            .map_err(|e| format!("write {port}: {e}"))?;
        let mut reader = BufReader::new(s);
        commands
            .iter()
            .map(|_| read_reply(&mut reader).map_err(|e| format!("read {port}: {e}")))
            .collect()
    }

    /// `ASKING` then `args` on one connection to `port`: the reply to `args` (a key of a slot
    /// the node imports can be read there).
    pub fn cmd_asking(port: u16, args: &[&str]) -> Reply {
        let replies = Self::query_all(port, &[&["ASKING"][..], args])
            .unwrap_or_else(|e| panic!("ASKING {args:?} on {port}: {e}"));
        replies.into_iter().nth(1).expect("two replies")
    }

    /// [`query`](Self::query) that panics on a transport error or a Redis error.
    pub fn cmd<A: AsRef<[u8]>>(port: u16, args: &[A]) -> Reply {
        let show = || {
            args.iter()
                .map(|a| String::from_utf8_lossy(a.as_ref()).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        };
        match Self::query(port, args) {
            Ok(Reply::Error(e)) => panic!("{} on {port}: {e}", show()),
            Ok(r) => r,
            Err(e) => panic!("{} on {port}: {e}", show()),
        }
    }

    /// The node id (`CLUSTER MYID`).
    pub fn node_id(&self, port: u16) -> String {
        Self::cmd(port, &["CLUSTER", "MYID"]).text()
    }

    /// The topology as the first live node sees it.
    pub fn topology(&self) -> Vec<NodeView> {
        let port = *self.live_ports().first().expect("a live node");
        parse_cluster_nodes(&Self::cmd(port, &["CLUSTER", "NODES"]).text())
    }

    /// The masters that own slots, ordered by their lowest slot (so at start index 0, 1, 2 own
    /// 0-5460, 5461-10922, 10923-16383).
    pub fn masters(&self) -> Vec<u16> {
        let mut m: Vec<(u16, u16)> = self
            .topology()
            .into_iter()
            .filter(|v| v.master && !v.failed && !v.slots.is_empty())
            .map(|v| (v.slots.iter().map(|s| s.0).min().unwrap(), v.port))
            .collect();
        m.sort_unstable();
        m.into_iter().map(|(_, p)| p).collect()
    }

    /// The live replicas.
    pub fn replicas(&self) -> Vec<u16> {
        self.topology()
            .into_iter()
            .filter(|v| !v.master && !v.failed)
            .map(|v| v.port)
            .collect()
    }

    /// A live replica of `master`.
    pub fn replica_of(&self, master: u16) -> u16 {
        let t = self.topology();
        let id = &t.iter().find(|v| v.port == master).expect("master").id;
        t.iter()
            .find(|v| !v.master && !v.failed && v.master_id.as_ref() == Some(id))
            .unwrap_or_else(|| panic!("{master} has no live replica"))
            .port
    }

    /// The master of `replica`.
    pub fn master_of(&self, replica: u16) -> u16 {
        let t = self.topology();
        let id = t
            .iter()
            .find(|v| v.port == replica)
            .and_then(|v| v.master_id.clone())
            .unwrap_or_else(|| panic!("{replica} is not a replica"));
        t.iter().find(|v| v.id == id).expect("its master").port
    }

    /// The hash slot of a key, computed locally (fred's CRC16, hash tags included).
    pub fn slot(key: &str) -> u16 {
        fred::util::redis_keyslot(key.as_bytes())
    }

    /// The hash slot of a key as the server computes it (`CLUSTER KEYSLOT`).
    pub fn keyslot(&self, key: &str) -> u16 {
        let port = self.live_ports()[0];
        Self::cmd(port, &["CLUSTER", "KEYSLOT", key]).int().unwrap() as u16
    }

    /// The master that owns `slot`.
    pub fn master_of_slot(&self, slot: u16) -> u16 {
        self.topology()
            .into_iter()
            .find(|v| v.master && !v.failed && v.owns(slot))
            .unwrap_or_else(|| panic!("no master owns slot {slot}"))
            .port
    }

    /// The master that owns the slot of `key`.
    pub fn master_for_key(&self, key: &str) -> u16 {
        self.master_of_slot(self.keyslot(key))
    }

    /// A replica of the master that owns the slot of `key`.
    pub fn replica_for_key(&self, key: &str) -> u16 {
        self.replica_of(self.master_for_key(key))
    }

    /// `n` names `<prefix><i>` (in `i` order) whose slot `master` owns.
    pub fn names_on(&self, master: u16, prefix: &str, n: usize) -> Vec<String> {
        let view = self
            .topology()
            .into_iter()
            .find(|v| v.port == master && v.master)
            .unwrap_or_else(|| panic!("{master} is not a master"));
        (0..)
            .map(|i| format!("{prefix}{i}"))
            .filter(|name| view.owns(Self::slot(name)))
            .take(n)
            .collect()
    }

    /// One name per master, in [`masters`](Self::masters) order: `<prefix><i>` for the lowest
    /// `i` that lands on that master.
    pub fn name_per_master(&self, prefix: &str) -> Vec<String> {
        self.masters()
            .into_iter()
            .map(|m| self.names_on(m, prefix, 1).remove(0))
            .collect()
    }

    /// Under a steady write load (the chaos runner's workers) a master's replication stream
    /// always runs ahead of its replicas' acknowledgements (sent once a second), so the waits
    /// would never see every replica caught up: with `on`, a master's replicas count as in sync
    /// once each has acknowledged at least once and within the last second (`INFO
    /// replication`'s `offset=` above 0 and `lag=` 0 or 1). Tests keep the default (`false`):
    /// every replica has acknowledged the whole stream.
    pub fn set_steady_load(&self, on: bool) {
        self.steady_load.store(on, Ordering::SeqCst);
    }

    /// One settledness check (see the module doc): `Ok(topology)` or what is not settled yet.
    fn settled(&self) -> Result<Vec<NodeView>, String> {
        let live = self.live_ports();
        let mut first: Option<(Agreement, Vec<NodeView>)> = None;
        for &port in &live {
            let info = Self::query(port, &["CLUSTER", "INFO"])?.text();
            if !info.contains("cluster_state:ok") {
                return Err(format!("{port}: cluster_state not ok"));
            }
            let views = parse_cluster_nodes(&Self::query(port, &["CLUSTER", "NODES"])?.text());
            let agreed = agreement(&views);
            match &first {
                None => first = Some((agreed, views.clone())),
                Some((a, _)) if *a != agreed => {
                    return Err(format!("{port} disagrees: {agreed:?} vs {a:?}"))
                }
                Some(_) => {}
            }
            let me = views
                .iter()
                .find(|v| v.myself)
                .ok_or_else(|| format!("{port}: no myself line"))?;
            let repl = Self::query(port, &["INFO", "replication"])?.text();
            if !me.master {
                if !repl.contains("master_link_status:up")
                    || !repl.contains("master_sync_in_progress:0")
                {
                    return Err(format!("replica {port} not in sync"));
                }
            } else if !replicas_acknowledged(&repl, self.steady_load.load(Ordering::SeqCst)) {
                // A replica reports `online` before its first acknowledgement (up to a
                // second later); replica-synced acquisitions (on by default) need it.
                return Err(format!("master {port}: a replica has not acknowledged yet"));
            }
        }
        let (_, views) = first.ok_or("no live node")?;
        for v in &views {
            let alive = live.contains(&v.port);
            if alive == v.failed {
                return Err(format!("{} alive={alive} failed={}", v.port, v.failed));
            }
        }
        let covered: usize = views
            .iter()
            .filter(|v| v.master && !v.failed)
            .map(NodeView::slot_count)
            .sum();
        if covered != SLOTS as usize {
            return Err(format!("{covered} slots covered"));
        }
        for v in views.iter().filter(|v| !v.master && !v.failed) {
            let m = views.iter().find(|m| Some(&m.id) == v.master_id.as_ref());
            if !m.is_some_and(|m| m.master && !m.failed) {
                return Err(format!("replica {} has no live master", v.port));
            }
        }
        Ok(views)
    }

    /// One check of a wait: the topology when settled and `cond` holds; panics once `deadline`
    /// has passed without it.
    fn check(
        &self,
        what: &str,
        cond: &impl Fn(&[NodeView]) -> bool,
        deadline: Instant,
    ) -> Option<Vec<NodeView>> {
        let last = match self.settled() {
            Ok(v) if cond(&v) => return Some(v),
            Ok(v) => format!("condition not met: {v:?}"),
            Err(e) => e,
        };
        assert!(
            Instant::now() < deadline,
            "{what}: cluster not settled after {SETTLE:?}: {last}"
        );
        None
    }

    fn wait_blocking(&self, what: &str, cond: impl Fn(&[NodeView]) -> bool) -> Vec<NodeView> {
        let deadline = Instant::now() + SETTLE;
        loop {
            if let Some(v) = self.check(what, &cond, deadline) {
                return v;
            }
            std::thread::sleep(POLL);
        }
    }

    async fn wait_for(&self, what: &str, cond: impl Fn(&[NodeView]) -> bool) -> Vec<NodeView> {
        let deadline = Instant::now() + SETTLE;
        loop {
            if let Some(v) = self.check(what, &cond, deadline) {
                return v;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until the cluster is settled (see the module doc).
    pub async fn wait_stable(&self) -> Vec<NodeView> {
        self.wait_for("wait_stable", |_| true).await
    }

    /// `CLUSTER FAILOVER` on `replica`, then waits until it is the master, its old master
    /// replicates it and in sync, and every node agrees.
    pub async fn failover(&self, replica: u16) {
        let old_master = self.master_of(replica);
        let (new_id, old_id) = (self.node_id(replica), self.node_id(old_master));
        let switched = |v: &[NodeView]| {
            v.iter()
                .any(|n| n.id == new_id && n.master && !n.slots.is_empty())
                && v.iter()
                    .any(|n| n.id == old_id && n.master_id.as_ref() == Some(&new_id))
        };
        for attempt in 0..3 {
            Self::cmd(replica, &["CLUSTER", "FAILOVER"]);
            // A manual failover gives up after 5 s (CLUSTER_MF_TIMEOUT): try again then.
            let deadline = Instant::now() + Duration::from_secs(8);
            while Instant::now() < deadline {
                if self.settled().is_ok_and(|v| switched(&v)) {
                    return;
                }
                tokio::time::sleep(POLL).await;
            }
            eprintln!("failover of {old_master} to {replica}: attempt {attempt} timed out");
        }
        self.wait_for("failover", switched).await;
    }

    /// Waits until every live node agrees on the whole topology and all slots are covered,
    /// without waiting for the replicas' acknowledgements (which trail a master under load).
    pub async fn wait_agreed(&self) {
        let deadline = Instant::now() + SETTLE;
        loop {
            let mut views = self.live_ports().into_iter().map(|p| {
                Self::query(p, &["CLUSTER", "NODES"]).map(|r| parse_cluster_nodes(&r.text()))
            });
            let first = views.next().and_then(|v| v.ok());
            let agreed = first.as_ref().is_some_and(|f| {
                let a = agreement(f);
                let covered: usize = f
                    .iter()
                    .filter(|v| v.master && !v.failed)
                    .map(NodeView::slot_count)
                    .sum();
                covered == SLOTS as usize && views.all(|v| v.is_ok_and(|v| agreement(&v) == a))
            });
            if agreed {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "nodes did not agree within {SETTLE:?}"
            );
            tokio::time::sleep(POLL).await;
        }
    }

    /// `CLUSTER FAILOVER` on `replica` for a cluster under load: waits only until every live
    /// node sees it as a master owning slots (not for the replicas' acknowledgements, which
    /// trail a loaded master all the time, as [`failover`](Self::failover) does).
    pub async fn failover_under_load(&self, replica: u16) {
        let id = self.node_id(replica);
        let promoted = |port: u16| {
            Self::query(port, &["CLUSTER", "NODES"]).is_ok_and(|r| {
                parse_cluster_nodes(&r.text())
                    .iter()
                    .any(|n| n.id == id && n.master && !n.slots.is_empty())
            })
        };
        self.wait_agreed().await;
        for _ in 0..3 {
            if !promoted(replica) {
                Self::cmd(replica, &["CLUSTER", "FAILOVER"]);
            }
            let deadline = Instant::now() + Duration::from_secs(8);
            while Instant::now() < deadline {
                if self.live_ports().into_iter().all(promoted) {
                    self.wait_agreed().await;
                    return;
                }
                tokio::time::sleep(POLL).await;
            }
        }
        panic!("failover to {replica} not seen by every node");
    }

    /// Moves `slot` from master `from` to master `to` as `redis-cli --cluster reshard` does:
    /// SETSLOT IMPORTING/MIGRATING, MIGRATE the keys in batches of 100, SETSLOT NODE on the
    /// target, the source and the other masters; then waits until every node agrees.
    pub async fn migrate_slot(&self, slot: u16, from: u16, to: u16) {
        self.begin_migration(slot, from, to);
        self.finish_migration(slot, from, to).await;
    }

    /// The first half of [`migrate_slot`](Self::migrate_slot): marks `slot` IMPORTING on `to`
    /// and MIGRATING on `from`, and MIGRATEs every key of it (batches of 100). The slot is then
    /// in its `ASK` phase: `from` answers `-ASK` for every key of it, until
    /// [`finish_migration`](Self::finish_migration).
    pub fn begin_migration(&self, slot: u16, from: u16, to: u16) {
        self.mark_migrating(slot, from, to);
        let s = slot.to_string();
        loop {
            let keys = Self::cmd(from, &["CLUSTER", "GETKEYSINSLOT", &s, "100"]).items();
            if keys.is_empty() {
                break;
            }
            let keys: Vec<Vec<u8>> = keys
                .into_iter()
                .filter_map(|k| match k {
                    Reply::Bulk(Some(k)) => Some(k),
                    _ => None,
                })
                .collect();
            Self::migrate_keys(from, to, &keys);
        }
    }

    /// Marks `slot` IMPORTING on `to` and MIGRATING on `from` (no key moved yet).
    pub fn mark_migrating(&self, slot: u16, from: u16, to: u16) {
        let (from_id, to_id) = (self.node_id(from), self.node_id(to));
        let s = slot.to_string();
        Self::cmd(to, &["CLUSTER", "SETSLOT", &s, "IMPORTING", &from_id]);
        Self::cmd(from, &["CLUSTER", "SETSLOT", &s, "MIGRATING", &to_id]);
    }

    /// `MIGRATE`s `keys` (of a slot marked migrating) from `from` to `to` in one call.
    pub fn migrate_keys<K: AsRef<[u8]>>(from: u16, to: u16, keys: &[K]) {
        let mut args: Vec<Vec<u8>> = ["MIGRATE", "127.0.0.1", &to.to_string(), ""]
            .iter()
            .map(|a| a.as_bytes().to_vec())
            .collect();
        args.extend(["0", "5000", "REPLACE", "KEYS"].map(|a| a.as_bytes().to_vec()));
        args.extend(keys.iter().map(|k| k.as_ref().to_vec()));
        Self::cmd(from, &args);
    }

    /// The second half of [`migrate_slot`](Self::migrate_slot): `SETSLOT NODE` on the target,
    /// the source and the other masters, then waits until every node agrees.
    pub async fn finish_migration(&self, slot: u16, from: u16, to: u16) {
        let (from_id, to_id) = (self.node_id(from), self.node_id(to));
        let s = slot.to_string();
        Self::cmd(to, &["CLUSTER", "SETSLOT", &s, "NODE", &to_id]);
        Self::cmd(from, &["CLUSTER", "SETSLOT", &s, "NODE", &to_id]);
        for m in self.masters() {
            if m != from && m != to {
                Self::cmd(m, &["CLUSTER", "SETSLOT", &s, "NODE", &to_id]);
            }
        }
        self.wait_for("migrate_slot", |v| {
            v.iter().any(|n| n.id == to_id && n.owns(slot))
                && !v.iter().any(|n| n.id == from_id && n.owns(slot))
        })
        .await;
    }

    /// `redis-cli --cluster reshard`: moves `slots` slots (the lowest ones `from` owns) from
    /// master `from` to master `to`, key by key with `MIGRATE` (`pipeline` keys per call), as
    /// an operator does. Blocking (run it with `spawn_blocking` beside the load); panics if
    /// `redis-cli` fails. Returns how long it took.
    pub fn reshard(&self, from: u16, to: u16, slots: usize, pipeline: usize) -> Duration {
        let t0 = Instant::now();
        // Bounded, as the create is: a reshard waits for the nodes to agree.
        let out = Command::new("timeout")
            .args([
                "120",
                "redis-cli",
                "--cluster",
                "reshard",
                &format!("127.0.0.1:{from}"),
            ])
            .args(["--cluster-from", &self.node_id(from)])
            .args(["--cluster-to", &self.node_id(to)])
            .args(["--cluster-slots", &slots.to_string()])
            .args(["--cluster-pipeline", &pipeline.to_string()])
            .arg("--cluster-yes")
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster reshard");
        assert!(
            out.status.success(),
            "redis-cli --cluster reshard failed ({}; 124: timed out): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        t0.elapsed()
    }

    /// The slots `master` owns, lowest first.
    pub fn slots_of(&self, master: u16) -> Vec<u16> {
        self.topology()
            .into_iter()
            .find(|v| v.port == master && v.master)
            .map(|v| v.slots.iter().flat_map(|&(a, b)| a..=b).collect())
            .unwrap_or_default()
    }

    /// SIGKILLs a node (by PID) and reaps it; returns at once.
    pub fn kill_node(&self, port: u16) {
        let node = self.node(port);
        if let Some(mut c) = node.child.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = c.kill();
            // Tell the watchdog before reaping, so that it never kills a reused PID.
            self.watchdog
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .send(format!("-{}", c.id()));
            let _ = c.wait();
        }
    }

    /// SIGKILLs the master `masters()[idx]` and waits for the automatic failover: its replica
    /// owns the slots, every live node flags the dead one `fail` and agrees. Returns
    /// `(killed, promoted)`.
    pub async fn kill_master(&self, idx: usize) -> (u16, u16) {
        let master = self.masters()[idx];
        let replica = self.replica_of(master);
        let slots = self
            .topology()
            .into_iter()
            .find(|v| v.port == master)
            .unwrap()
            .slots;
        self.kill_node(master);
        self.wait_for("automatic failover", |v| {
            v.iter()
                .any(|n| n.port == replica && n.master && slots.iter().all(|&(a, _)| n.owns(a)))
        })
        .await;
        (master, replica)
    }

    /// Starts a killed node again on its port, with its cluster config (so it rejoins, as a
    /// replica if its slots were taken over), and waits until it is in sync and all agree.
    pub async fn restart_node(&self, port: u16) {
        let node = self.node(port);
        assert!(
            node.child
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .is_none(),
            "{port} still runs"
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mut child = Node::spawn(&node.dir, node.port, node.bus_port);
            self.watchdog
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .send(child.id().to_string());
            if Node::came_up(&mut child, port, node.bus_port) {
                *node.child.lock().unwrap_or_else(|e| e.into_inner()) = Some(child);
                break;
            }
            let _ = child.kill();
            self.watchdog
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .send(format!("-{}", child.id()));
            let _ = child.wait();
            assert!(Instant::now() < deadline, "{port} did not restart");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.wait_for("restart_node", |v| v.iter().any(|n| n.port == port))
            .await;
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        // Kill and reap every server (deregistered first, so that the watchdog neither kills a
        // reused PID nor waits for a zombie), then let the watchdog remove the directory.
        for port in self.ports() {
            self.kill_node(port);
        }
        self.watchdog
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .finish();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// `true` when every replica in a master's `INFO replication` has acknowledged the master's
/// whole replication stream (`slaveN:...,offset=` ≥ `master_repl_offset`), or, with
/// `steady_load` (see [`RedisCluster::set_steady_load`]), has acknowledged at least once
/// (`offset=` above 0) and within the last second (`lag=` 0 or 1).
fn replicas_acknowledged(info: &str, steady_load: bool) -> bool {
    let master = info
        .lines()
        .find_map(|l| l.trim().strip_prefix("master_repl_offset:"))
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(0);
    info.lines().filter(|l| l.starts_with("slave")).all(|l| {
        let field = |name: &str| {
            l.split(',')
                .find_map(|kv| kv.strip_prefix(name))
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        let (acked, lag) = (field("offset="), field("lag="));
        acked.is_some_and(|a| a >= master || (steady_load && a > 0 && lag.is_some_and(|l| l <= 1)))
    })
}
