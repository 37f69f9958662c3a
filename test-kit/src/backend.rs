//! One behavioural test, several deployments: a standalone server of its own, the binary's
//! shared 3+3 Redis Cluster in each sharded-pub/sub mode, and (for the tests that ask for them)
//! a TLS-only server and a Sentinel set of their own. `backend_tests!` turns an
//! `async fn name(b: Backend)` into one `#[tokio::test]` per deployment.

use std::sync::atomic::{AtomicUsize, Ordering};

use fred::{
    clients::Client as FredClient,
    interfaces::{ClientLike, PubsubInterface},
    types::{config::Config as FredConfig, Value},
};
use redisson_lock::{Client, Config, ShardedSubscriptionMode};

use crate::{
    cluster::RedisCluster,
    sentinel::{SentinelSet, MASTER_NAME},
    tls::{Certs, TlsDeployment, TlsRedis},
    Admin, Monitor, Recorder, RedisServer,
};

/// Where a test runs.
pub enum Backend {
    /// A standalone server started for this test.
    Standalone(RedisServer),
    /// The binary's shared cluster, with the clients' sharded-subscription mode.
    Cluster(&'static RedisCluster, ShardedSubscriptionMode),
    /// A server started for this test whose clients connect over TLS only (`rediss://`,
    /// trusting the test CA); it also listens in plain text on `plain`, for the raw
    /// connections ([`admin`](Self::admin), [`recorder`](Self::recorder), [`monitor`](Self::monitor)).
    Tls {
        server: TlsRedis,
        plain: u16,
        certs: Certs,
    },
    /// A Sentinel set started for this test (one master, one replica, three sentinels): clients
    /// find the master through the sentinels, and their acquisitions wait for the replica.
    Sentinel(SentinelSet),
}

static NEXT_NAME: AtomicUsize = AtomicUsize::new(0);

impl Backend {
    pub fn standalone() -> Backend {
        Backend::Standalone(RedisServer::start())
    }

    pub fn cluster(mode: ShardedSubscriptionMode) -> Backend {
        Backend::Cluster(RedisCluster::shared(), mode)
    }

    pub fn tls() -> Backend {
        let certs = Certs::make();
        let plain = crate::redis_server::free_port();
        let server = TlsRedis::start(&certs, "server", false, &["--port", &plain.to_string()]);
        Backend::Tls {
            server,
            plain,
            certs,
        }
    }

    pub fn sentinel() -> Backend {
        Backend::Sentinel(SentinelSet::start_with_replicas(1))
    }

    pub fn is_cluster(&self) -> bool {
        matches!(self, Backend::Cluster(..))
    }

    /// `true` when the crate's clients (and a Java peer of the same generation) publish with
    /// `SPUBLISH` (Redis 7 cluster in `Auto`, `On` or `Both`).
    pub fn sharded(&self) -> bool {
        matches!(
            self,
            Backend::Cluster(_, m) if *m != ShardedSubscriptionMode::Off
        )
    }

    /// The crate configuration for this deployment (the sharded mode on a cluster).
    pub fn config(&self) -> Config {
        match self {
            Backend::Standalone(_) | Backend::Sentinel(_) => Config::default(),
            Backend::Cluster(_, mode) => Config::default().sharded_subscription_mode(*mode),
            Backend::Tls { certs, .. } => certs.config(),
        }
    }

    /// A lock name for this test: as given on a server of its own, made unique on the shared
    /// cluster (parallel tests share it). Successive names land on different slots, so a
    /// test's locks spread over the masters.
    pub fn name(&self, base: &str) -> String {
        match self {
            Backend::Standalone(_) | Backend::Tls { .. } | Backend::Sentinel(_) => base.to_owned(),
            Backend::Cluster(..) => {
                format!("{base}-{}", NEXT_NAME.fetch_add(1, Ordering::Relaxed))
            }
        }
    }

    /// `per_master` names for this test that land on each master, in master order (on a
    /// standalone server, as many names for the one server). Unique like [`name`](Self::name).
    pub fn names_on_every_master(&self, base: &str, per_master: usize) -> Vec<String> {
        match self {
            Backend::Standalone(_) | Backend::Tls { .. } | Backend::Sentinel(_) => {
                (0..3 * per_master).map(|i| format!("{base}-{i}")).collect()
            }
            Backend::Cluster(c, _) => {
                let prefix = format!("{}-", self.name(base));
                c.masters()
                    .into_iter()
                    .flat_map(|m| c.names_on(m, &prefix, per_master))
                    .collect()
            }
        }
    }

    /// The hash slot that serves `key` (the same for every key on a standalone server).
    pub fn slot(&self, key: &str) -> Option<u16> {
        self.is_cluster().then(|| RedisCluster::slot(key))
    }

    /// The URL of a plain-text connection to the deployment's data (on a Sentinel set, the
    /// master at the start), for raw connections and for clients that bring their own config.
    pub fn url(&self) -> String {
        match self {
            Backend::Standalone(s) => s.url(),
            Backend::Cluster(c, _) => c.cluster_url(),
            Backend::Tls { plain, .. } => format!("redis://127.0.0.1:{plain}"),
            Backend::Sentinel(set) => format!("redis://127.0.0.1:{}", set.master_port()),
        }
    }

    /// The port of the server that holds every key (`None` on a cluster).
    fn data_port(&self) -> Option<u16> {
        match self {
            Backend::Standalone(s) => Some(s.port()),
            Backend::Cluster(..) => None,
            Backend::Tls { plain, .. } => Some(*plain),
            Backend::Sentinel(set) => Some(set.master_port()),
        }
    }

    pub async fn client(&self) -> Client {
        self.client_with(self.config()).await
    }

    /// A client with `config` (keep the sharded mode: start from [`config`](Self::config)).
    pub async fn client_with(&self, config: Config) -> Client {
        match self {
            Backend::Standalone(s) => Client::connect(&s.url(), config).await.unwrap(),
            Backend::Tls { server, .. } => server.connect(config).await.expect("TLS connect"),
            Backend::Sentinel(set) => {
                let urls = set.sentinel_urls();
                let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
                Client::connect_sentinel(MASTER_NAME, &urls, config)
                    .await
                    .expect("connect through the sentinels")
            }
            Backend::Cluster(c, _) => {
                let seeds = c.seed_urls();
                let seeds: Vec<&str> = seeds.iter().map(String::as_str).collect();
                Client::connect_cluster(&seeds, config).await.unwrap()
            }
        }
    }

    /// A raw connection that writes and reads as a Java client of this deployment would.
    pub async fn admin(&self) -> Admin {
        let mut admin = Admin::connect(&self.url()).await;
        admin.sharded = self.sharded();
        if let Backend::Cluster(c, _) = self {
            admin.cluster_ports = c.live_ports();
        }
        admin
    }

    /// A raw subscriber of `channels` that hears what a Java peer of this deployment hears
    /// (`SSUBSCRIBE` when [`sharded`](Self::sharded), `SUBSCRIBE` otherwise).
    pub async fn recorder(&self, channels: &[&str]) -> Recorder {
        Recorder::subscribe_in(&self.url(), channels, self.sharded()).await
    }

    /// `MONITOR` on the server that executes commands on `key` (the standalone server, or
    /// the master that owns the key's slot).
    pub fn monitor(&self, key: &str) -> Monitor {
        match (self, self.data_port()) {
            (_, Some(port)) => Monitor::start(&[port]),
            (Backend::Cluster(c, _), None) => {
                Monitor::start(&[c.master_of_slot(RedisCluster::slot(key))])
            }
            _ => unreachable!("only a cluster has no one data port"),
        }
    }

    /// `MONITOR` on every server that owns slots (the standalone server, or every master).
    pub fn monitor_all(&self) -> Monitor {
        match (self, self.data_port()) {
            (_, Some(port)) => Monitor::start(&[port]),
            (Backend::Cluster(c, _), None) => Monitor::start(&c.masters()),
            _ => unreachable!("only a cluster has no one data port"),
        }
    }

    /// Subscribers of `channel` in this deployment's namespace (on a cluster: `PUBSUB
    /// SHARDNUMSUB` on the owner, or `NUMSUB` summed over the nodes).
    pub async fn subscribers(&self, channel: &str) -> i64 {
        match self {
            Backend::Standalone(_) | Backend::Tls { .. } | Backend::Sentinel(_) => {
                self.admin().await.numsub(channel).await
            }
            Backend::Cluster(c, mode) => {
                let classic: i64 = c
                    .live_ports()
                    .into_iter()
                    .filter_map(|p| {
                        let r = RedisCluster::query(p, &["PUBSUB", "NUMSUB", channel]).ok()?;
                        r.items().get(1).and_then(|n| n.int())
                    })
                    .sum();
                if *mode == ShardedSubscriptionMode::Off {
                    return classic;
                }
                let redis = FredClient::new(
                    FredConfig::from_url(&c.cluster_url()).unwrap(),
                    None,
                    None,
                    None,
                );
                redis.init().await.unwrap();
                let v: Vec<Value> = redis.pubsub_shardnumsub(channel).await.unwrap();
                let _ = redis.quit().await;
                v.get(1).and_then(|v| v.as_i64()).unwrap_or(0) + classic
            }
        }
    }
}

/// One test per deployment for each `async fn name(b: Backend)`: `name::standalone`,
/// `name::cluster_auto`, `name::cluster_on`, `name::cluster_off`; with `both:` first, also
/// `name::cluster_both` (`SPUBLISH` and `PUBLISH`, listening on both); with `any:` first, also
/// `name::tls` and `name::sentinel` (for a test about any deployment: each starts servers of
/// its own, so keep these to a few short tests).
#[macro_export]
macro_rules! backend_tests {
    (both: $($name:ident),* $(,)?) => {
        $( $crate::backend_tests!(@one $name, cluster_both: Backend::cluster(Mode::Both)); )*
    };
    (any: $($name:ident),* $(,)?) => {
        $(
            $crate::backend_tests!(
                @one $name, tls: Backend::tls(), sentinel: Backend::sentinel()
            );
        )*
    };
    (@one $name:ident $(, $extra:ident: $backend:expr)*) => {
        mod $name {
            use redisson_lock::ShardedSubscriptionMode as Mode;
            use $crate::Backend;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn standalone() {
                super::$name(Backend::standalone()).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn cluster_auto() {
                super::$name(Backend::cluster(Mode::Auto)).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn cluster_on() {
                super::$name(Backend::cluster(Mode::On)).await
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn cluster_off() {
                super::$name(Backend::cluster(Mode::Off)).await
            }

            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $extra() {
                    super::$name($backend).await
                }
            )*
        }
    };
    ($($name:ident),* $(,)?) => {
        $( $crate::backend_tests!(@one $name); )*
    };
}
