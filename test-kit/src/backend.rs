//! One behavioural test, several deployments: a standalone server of its own, or the binary's
//! shared 3+3 Redis Cluster in each sharded-pub/sub mode. `backend_tests!` turns an
//! `async fn name(b: Backend)` into one `#[tokio::test]` per deployment.

use std::sync::atomic::{AtomicUsize, Ordering};

use fred::{
    clients::Client as FredClient,
    interfaces::{ClientLike, PubsubInterface},
    types::{config::Config as FredConfig, Value},
};
use redisson_lock::{Client, Config, ShardedSubscriptionMode};

use crate::{cluster::RedisCluster, Admin, Monitor, Recorder, RedisServer};

/// Where a test runs.
pub enum Backend {
    /// A standalone server started for this test.
    Standalone(RedisServer),
    /// The binary's shared cluster, with the clients' sharded-subscription mode.
    Cluster(&'static RedisCluster, ShardedSubscriptionMode),
}

static NEXT_NAME: AtomicUsize = AtomicUsize::new(0);

impl Backend {
    pub fn standalone() -> Backend {
        Backend::Standalone(RedisServer::start())
    }

    pub fn cluster(mode: ShardedSubscriptionMode) -> Backend {
        Backend::Cluster(RedisCluster::shared(), mode)
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
            Backend::Standalone(_) => Config::default(),
            Backend::Cluster(_, mode) => Config::default().sharded_subscription_mode(*mode),
        }
    }

    /// A lock name for this test: as given on a server of its own, made unique on the shared
    /// cluster (parallel tests share it). Successive names land on different slots, so a
    /// test's locks spread over the masters.
    pub fn name(&self, base: &str) -> String {
        match self {
            Backend::Standalone(_) => base.to_owned(),
            Backend::Cluster(..) => {
                format!("{base}-{}", NEXT_NAME.fetch_add(1, Ordering::Relaxed))
            }
        }
    }

    /// `per_master` names for this test that land on each master, in master order (on a
    /// standalone server, as many names for the one server). Unique like [`name`](Self::name).
    pub fn names_on_every_master(&self, base: &str, per_master: usize) -> Vec<String> {
        match self {
            Backend::Standalone(_) => (0..3 * per_master).map(|i| format!("{base}-{i}")).collect(),
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

    /// The URL a client connects with.
    pub fn url(&self) -> String {
        match self {
            Backend::Standalone(s) => s.url(),
            Backend::Cluster(c, _) => c.cluster_url(),
        }
    }

    pub async fn client(&self) -> Client {
        self.client_with(self.config()).await
    }

    /// A client with `config` (keep the sharded mode: start from [`config`](Self::config)).
    pub async fn client_with(&self, config: Config) -> Client {
        match self {
            Backend::Standalone(s) => Client::connect(&s.url(), config).await.unwrap(),
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
        match self {
            Backend::Standalone(s) => Monitor::start(&[s.port()]),
            Backend::Cluster(c, _) => Monitor::start(&[c.master_of_slot(RedisCluster::slot(key))]),
        }
    }

    /// `MONITOR` on every server that owns slots (the standalone server, or every master).
    pub fn monitor_all(&self) -> Monitor {
        match self {
            Backend::Standalone(s) => Monitor::start(&[s.port()]),
            Backend::Cluster(c, _) => Monitor::start(&c.masters()),
        }
    }

    /// Subscribers of `channel` in this deployment's namespace (on a cluster: `PUBSUB
    /// SHARDNUMSUB` on the owner, or `NUMSUB` summed over the nodes).
    pub async fn subscribers(&self, channel: &str) -> i64 {
        match self {
            Backend::Standalone(_) => self.admin().await.numsub(channel).await,
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
/// `name::cluster_both` (`SPUBLISH` and `PUBLISH`, listening on both).
#[macro_export]
macro_rules! backend_tests {
    (both: $($name:ident),* $(,)?) => {
        $(
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

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn cluster_both() {
                    super::$name(Backend::cluster(Mode::Both)).await
                }
            }
        )*
    };
    ($($name:ident),* $(,)?) => {
        $(
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
            }
        )*
    };
}
