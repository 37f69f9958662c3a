//! Test rig for TLS: a throwaway CA and certificates made with the `openssl` command line, and a
//! TLS-only `redis-server` (`--port 0 --tls-port P`) on a free loopback port, stopped by PID.

use std::{
    future::Future,
    net::TcpStream,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use crate::redis_server::free_port;
use redisson_lock::{Client, Config, TlsSettings};

/// A directory of PEM files: `ca.crt`, `server.crt/key` (127.0.0.1 and localhost),
/// `wrongname.crt/key` (only `wrong.example`), `expired.crt/key`, `node.crt/key` (server and
/// client use, for nodes that connect to each other), `client.crt/key`, and a second,
/// unrelated CA `other-ca.crt`.
pub struct Certs {
    pub dir: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run openssl (install the openssl package)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An EC P-256 key and a signing request.
fn key_and_csr(dir: &Path, name: &str, cn: &str) {
    openssl(
        dir,
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.csr"),
            "-subj",
            &format!("/CN={cn}"),
        ],
    );
}

fn self_signed_ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.crt"),
            "-days",
            "2",
            "-subj",
            &format!("/CN={name}"),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ],
    );
}

fn sign(dir: &Path, name: &str, ext: &str, days: &str) {
    std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            &format!("{name}.crt"),
            "-days",
            days,
            "-extfile",
            &format!("{name}.ext"),
        ],
    );
}

/// Signs `name.csr` with the test CA for a validity window in the past (`openssl ca` takes
/// `-startdate/-enddate`; `openssl x509 -days` cannot go backwards, and OpenSSL 3.0 lacks
/// `x509 -not_before/-not_after`): an expired certificate.
fn sign_expired(dir: &Path, name: &str, ext: &str) {
    std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
    std::fs::write(
        dir.join("expired-ca.cnf"),
        "[ ca ]\ndefault_ca = throwaway\n[ throwaway ]\ndatabase = expired-index.txt\n\
         new_certs_dir = .\nserial = expired-serial\ndefault_md = sha256\npolicy = any\n\
         [ any ]\ncommonName = supplied\n",
    )
    .unwrap();
    std::fs::write(dir.join("expired-index.txt"), "").unwrap();
    std::fs::write(dir.join("expired-serial"), "01\n").unwrap();
    openssl(
        dir,
        &[
            "ca",
            "-batch",
            "-config",
            "expired-ca.cnf",
            "-cert",
            "ca.crt",
            "-keyfile",
            "ca.key",
            "-in",
            &format!("{name}.csr"),
            "-out",
            &format!("{name}.crt"),
            "-startdate",
            "20200101000000Z",
            "-enddate",
            "20200102000000Z",
            "-extfile",
            &format!("{name}.ext"),
            "-notext",
        ],
    );
}

impl Certs {
    pub fn make() -> Certs {
        crate::redis_server::sweep_stale_dirs();
        let dir = std::env::temp_dir().join(format!(
            "redisson-lock-tls-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        self_signed_ca(&dir, "ca");
        self_signed_ca(&dir, "other-ca");
        let server =
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n";
        key_and_csr(&dir, "server", "localhost");
        sign(
            &dir,
            "server",
            &format!("{server}subjectAltName=IP:127.0.0.1,DNS:localhost\n"),
            "2",
        );
        key_and_csr(&dir, "wrongname", "wrong.example");
        sign(
            &dir,
            "wrongname",
            &format!("{server}subjectAltName=DNS:wrong.example\n"),
            "2",
        );
        // Right name and CA, validity 2020-01-01 to 2020-01-02.
        key_and_csr(&dir, "expired", "localhost");
        sign_expired(
            &dir,
            "expired",
            &format!("{server}subjectAltName=IP:127.0.0.1,DNS:localhost\n"),
        );
        // For nodes that also connect to each other (cluster bus, replication, sentinels):
        // Redis verifies the certificate a peer node presents as a client.
        key_and_csr(&dir, "node", "localhost");
        sign(
            &dir,
            "node",
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\n\
             extendedKeyUsage=serverAuth,clientAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n",
            "2",
        );
        key_and_csr(&dir, "client", "lock-client");
        sign(
            &dir,
            "client",
            "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n",
            "2",
        );
        Certs { dir }
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.join(file)
    }

    pub fn pem(&self, file: &str) -> Vec<u8> {
        std::fs::read(self.path(file)).unwrap()
    }

    /// The crate configuration that trusts this CA (`ca.crt`), connecting within 5 s.
    pub fn config(&self) -> Config {
        Config::default()
            .connect_timeout(Duration::from_secs(5))
            .tls(TlsSettings::new().ca_file(self.path("ca.crt")))
    }

    /// Two clients of `deployment` with [`config`](Self::config), each with its own command and
    /// subscriber TLS connections (a holder and a waiter).
    pub async fn two_clients(&self, deployment: &impl TlsDeployment) -> (Client, Client) {
        let a = deployment
            .connect(self.config())
            .await
            .expect("TLS connect");
        let b = deployment
            .connect(self.config())
            .await
            .expect("TLS connect");
        (a, b)
    }
}

/// A TLS-only deployment a client connects to: a server, a Sentinel set or a cluster.
pub trait TlsDeployment {
    /// A client of this deployment with `config` (which must trust its CA).
    fn connect(&self, config: Config) -> impl Future<Output = redisson_lock::Result<Client>>;
}

impl TlsDeployment for TlsRedis {
    fn connect(&self, config: Config) -> impl Future<Output = redisson_lock::Result<Client>> {
        let url = self.url();
        async move { Client::connect(&url, config).await }
    }
}

impl TlsDeployment for TlsCluster {
    fn connect(&self, config: Config) -> impl Future<Output = redisson_lock::Result<Client>> {
        let url = self.url();
        async move { Client::connect(&url, config).await }
    }
}

impl TlsDeployment for TlsSentinelSet {
    fn connect(&self, config: Config) -> impl Future<Output = redisson_lock::Result<Client>> {
        let urls = self.sentinel_urls();
        async move {
            let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
            Client::connect_sentinel(TLS_MASTER_NAME, &urls, config).await
        }
    }
}

impl Drop for Certs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A TLS-only redis-server. Killed (by PID) on drop.
pub struct TlsRedis {
    child: Option<Child>,
    pub port: u16,
    dir: PathBuf,
}

impl TlsRedis {
    /// Serves `cert` (a name in `certs`, e.g. `server`); `mutual` asks clients for a certificate
    /// signed by the CA.
    pub fn start(certs: &Certs, cert: &str, mutual: bool, extra: &[&str]) -> TlsRedis {
        for _ in 0..20 {
            let port = free_port();
            if port == 6379 {
                continue;
            }
            let dir = certs.dir.join(format!("data-{port}"));
            std::fs::create_dir_all(&dir).unwrap();
            let mut child = Command::new("redis-server")
                .args(["--port", "0", "--tls-port", &port.to_string()])
                .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
                .args(["--daemonize", "no", "--protected-mode", "no"])
                .arg("--tls-cert-file")
                .arg(certs.path(&format!("{cert}.crt")))
                .arg("--tls-key-file")
                .arg(certs.path(&format!("{cert}.key")))
                .arg("--tls-ca-cert-file")
                .arg(certs.path("ca.crt"))
                .args(["--tls-auth-clients", if mutual { "yes" } else { "no" }])
                .arg("--dir")
                .arg(&dir)
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("run redis-server");
            if crate::redis_server::came_up(&mut child, port, || {
                TcpStream::connect(("127.0.0.1", port)).is_ok()
            }) {
                return TlsRedis {
                    child: Some(child),
                    port,
                    dir,
                };
            }
        }
        panic!("could not start a TLS redis-server");
    }

    /// Whether the node listens on its cluster bus, the TLS port + 10000 (waits up to 2 s: the
    /// bus is bound after the client port). False when another process holds that port: the
    /// node then exits, or was never the one listening there.
    fn listens_on_bus(&self) -> bool {
        let Some(pid) = self.child.as_ref().map(Child::id) else {
            return false;
        };
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            if crate::redis_server::listens(pid, self.port + 10_000) {
                return true;
            }
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// `rediss://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.port)
    }
}

impl Drop for TlsRedis {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `redis-cli` over TLS (trusting the test CA) against `127.0.0.1:<port>`; raw stdout.
pub fn tls_cli(certs: &Certs, port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "--tls"])
        .arg("--cacert")
        .arg(certs.path("ca.crt"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run redis-cli");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wait_until(what: &str, within: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A free port below 55000 (never 6379).
fn low_free_port() -> u16 {
    loop {
        let p = free_port();
        if p < 55_000 && p != 6379 {
            return p;
        }
    }
}

/// A TLS-only Redis Cluster: three masters (no replicas) with `tls-cluster yes` (the bus is TLS
/// too), created with `redis-cli --tls --cluster create`. Every node serves `server.crt`.
pub struct TlsCluster {
    pub nodes: Vec<TlsRedis>,
}

impl TlsCluster {
    pub fn start(certs: &Certs) -> TlsCluster {
        // The cluster bus listens on the TLS port + 10000 (redis-cli's CLUSTER MEET assumes
        // so): keep ports where that exists.
        let nodes: Vec<TlsRedis> = (0..3)
            .map(|_| loop {
                let node = TlsRedis::start(
                    certs,
                    "node",
                    false,
                    &[
                        "--cluster-enabled",
                        "yes",
                        "--tls-cluster",
                        "yes",
                        "--cluster-node-timeout",
                        "5000",
                    ],
                );
                if node.port < 55_000 && node.listens_on_bus() {
                    break node;
                }
            })
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let mut args = vec!["--cluster", "create"];
        args.extend(addrs.iter().map(String::as_str));
        args.push("--cluster-yes");
        // Bounded: a create that cannot join the nodes would wait forever.
        let out = Command::new("timeout")
            .args(["60", "redis-cli", "-h", "127.0.0.1", "--tls", "--cacert"])
            .arg(certs.path("ca.crt"))
            .args(["-p", &nodes[0].port.to_string()])
            .args(&args)
            .stdin(Stdio::null())
            .output()
            .expect("run redis-cli --cluster create");
        let out = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.contains("[OK] All 16384 slots covered"),
            "cluster create: {out}"
        );
        wait_until(
            "cluster_state:ok on every node",
            Duration::from_secs(30),
            || {
                nodes.iter().all(|n| {
                    tls_cli(certs, n.port, &["CLUSTER", "INFO"]).contains("cluster_state:ok")
                })
            },
        );
        TlsCluster { nodes }
    }

    /// `rediss-cluster://127.0.0.1:<p1>?node=127.0.0.1:<p2>&node=…`
    pub fn url(&self) -> String {
        let rest: Vec<String> = self.nodes[1..]
            .iter()
            .map(|n| format!("node=127.0.0.1:{}", n.port))
            .collect();
        format!(
            "rediss-cluster://127.0.0.1:{}?{}",
            self.nodes[0].port,
            rest.join("&")
        )
    }
}

/// One sentinel process, killed (by PID) on drop.
struct TlsSentinelProcess {
    child: Option<Child>,
    pub port: u16,
}

impl Drop for TlsSentinelProcess {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// TLS-only Sentinel: a master and two replicas (`tls-replication yes`) and three sentinels
/// with only a `tls-port`, which talk to the data nodes over TLS too.
pub struct TlsSentinelSet {
    pub servers: Vec<TlsRedis>,
    sentinels: Vec<TlsSentinelProcess>,
}

pub const TLS_MASTER_NAME: &str = "tlsmaster";

impl TlsSentinelSet {
    pub fn start(certs: &Certs) -> TlsSentinelSet {
        let master = TlsRedis::start(certs, "node", false, &["--tls-replication", "yes"]);
        let mport = master.port.to_string();
        let mut servers = vec![master];
        for _ in 0..2 {
            servers.push(TlsRedis::start(
                certs,
                "node",
                false,
                &[
                    "--tls-replication",
                    "yes",
                    "--replicaof",
                    "127.0.0.1",
                    &mport,
                ],
            ));
        }
        let m = servers[0].port;
        wait_until("both replicas online", Duration::from_secs(20), || {
            tls_cli(certs, m, &["INFO", "replication"])
                .matches("state=online")
                .count()
                == 2
        });
        let mut sentinels = Vec::new();
        for i in 0..3 {
            sentinels.push(Self::spawn_sentinel(certs, m, i));
        }
        let first = sentinels[0].port;
        wait_until(
            "the sentinels know both replicas and each other",
            Duration::from_secs(20),
            || {
                let info = tls_cli(certs, first, &["INFO", "sentinel"]);
                info.contains("slaves=2") && info.contains("sentinels=3")
            },
        );
        TlsSentinelSet { servers, sentinels }
    }

    fn spawn_sentinel(certs: &Certs, master: u16, i: usize) -> TlsSentinelProcess {
        for _ in 0..20 {
            let port = low_free_port();
            let dir = certs.dir.join(format!("sentinel-{i}-{port}"));
            std::fs::create_dir_all(&dir).unwrap();
            let conf = dir.join("sentinel.conf");
            let p = |f: &str| certs.path(f).display().to_string();
            std::fs::write(
                &conf,
                format!(
                    "port 0\ntls-port {port}\nbind 127.0.0.1\ndir {dir}\n\
                     tls-cert-file {cert}\ntls-key-file {key}\ntls-ca-cert-file {ca}\n\
                     tls-replication yes\ntls-auth-clients no\n\
                     sentinel monitor {TLS_MASTER_NAME} 127.0.0.1 {master} 2\n\
                     sentinel down-after-milliseconds {TLS_MASTER_NAME} 1000\n\
                     sentinel failover-timeout {TLS_MASTER_NAME} 3000\n",
                    dir = dir.display(),
                    cert = p("node.crt"),
                    key = p("node.key"),
                    ca = p("ca.crt"),
                ),
            )
            .unwrap();
            let mut child = Command::new("redis-server")
                .arg(&conf)
                .arg("--sentinel")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("run redis-server --sentinel");
            if crate::redis_server::came_up(&mut child, port, || {
                tls_cli(certs, port, &["PING"]).contains("PONG")
            }) {
                return TlsSentinelProcess {
                    child: Some(child),
                    port,
                };
            }
        }
        panic!("could not start a TLS sentinel");
    }

    /// `rediss://127.0.0.1:<port>` of every sentinel.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels
            .iter()
            .map(|s| format!("rediss://127.0.0.1:{}", s.port))
            .collect()
    }
}
