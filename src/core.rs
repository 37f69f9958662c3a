//! The core every other part of a client shares: the command connection, the script registry and
//! the settings. It runs [`ScriptCall`]s and the few plain queries the locks need, and maps every
//! Redis failure to the crate's [`Error`], naming the lock concerned.

use std::time::Duration;

use fred::{
    clients::{Client as FredClient, SubscriberClient},
    interfaces::{ClientLike, HashesInterface, KeysInterface, LuaInterface, PubsubInterface},
    types::{
        config::{Config as FredConfig, ReconnectPolicy, ServerConfig},
        Builder, Key, Value,
    },
};

use crate::{
    config::{Config, ShardedSubscriptionMode},
    error::{Error, Failure, Result},
    scripts::{ScriptCall, Scripts},
    ttl::Ttl,
    url::{Deployment, RedisUrl},
};

/// How unlock messages travel, resolved at connect: classic `PUBLISH`/`SUBSCRIBE`, sharded
/// `SPUBLISH`/`SSUBSCRIBE` (cluster only), or both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Messaging {
    pub(crate) classic: bool,
    pub(crate) sharded: bool,
}

impl Messaging {
    /// The publish command passed to the release scripts (`both` publishes twice).
    pub(crate) fn publish_command(self) -> &'static str {
        match (self.classic, self.sharded) {
            (true, true) => "both",
            (false, true) => "spublish",
            _ => "publish",
        }
    }
}

/// The command connection, the scripts and the settings of one client.
pub(crate) struct Core {
    id: String,
    redis: FredClient,
    scripts: Scripts,
    config: Config,
    clustered: bool,
    messaging: Messaging,
}

/// The hash slot of a key (CRC16 of its hash tag, as Redis Cluster computes it).
pub(crate) fn slot_of(key: &Key) -> u16 {
    fred::util::redis_keyslot(key.as_bytes())
}

/// `true` when every key hashes to the same cluster slot.
pub(crate) fn one_slot(keys: &[Key]) -> bool {
    let mut slots = keys.iter().map(slot_of);
    match slots.next() {
        Some(first) => slots.all(|s| s == first),
        None => true,
    }
}

/// The fred configuration for a URL, or for cluster seeds (`redis://` URLs of some nodes).
fn fred_config(urls: &[&str]) -> Result<(FredConfig, bool)> {
    let first = *urls
        .first()
        .ok_or_else(|| Error::InvalidArgument("no Redis URL given".into()))?;
    let parsed = urls
        .iter()
        .map(|u| RedisUrl::parse(u))
        .collect::<Result<Vec<_>>>()?;
    // fred's URL errors may echo the URL, which can hold a password: report the kind only.
    let from_url = |u: &str| {
        FredConfig::from_url(u)
            .map_err(|e| Error::InvalidArgument(format!("invalid Redis URL ({:?})", e.kind())))
    };
    if urls.len() == 1 {
        parsed[0].check_supported()?;
        let clustered = parsed[0].deployment() == Deployment::Cluster;
        return Ok((from_url(first)?, clustered));
    }
    // Several seeds: plain redis:// URLs of cluster nodes (Redisson's addNodeAddress list).
    for p in &parsed {
        if p.deployment() != Deployment::Standalone {
            return Err(Error::InvalidArgument(format!(
                "cluster seeds are listed as redis:// URLs, not {}://",
                p.scheme()
            )));
        }
        p.check_supported()?;
    }
    let mut config = from_url(first)?;
    let hosts = parsed
        .iter()
        .flat_map(|p| p.hosts().iter().map(|h| (h.host.clone(), h.port)))
        .collect();
    config.server = ServerConfig::new_clustered(hosts);
    Ok((config, true))
}

impl Core {
    /// Connects the command connection and a subscriber connection to the server at `url`
    /// (or, with several URLs, to the cluster they are seeds of), loads every script, and
    /// returns the core with the (initialised) subscriber client.
    pub(crate) async fn connect(urls: &[&str], config: Config) -> Result<(Core, SubscriberClient)> {
        config.validate()?;
        let (redis_config, clustered) = fred_config(urls)?;
        let mut builder = Builder::from_config(redis_config);
        builder
            .with_performance_config(|p| {
                p.default_command_timeout = config.timeout;
                // The command connection listens to nothing: keep fred's event channels small
                // (each connect allocates several of this capacity).
                p.broadcast_channel_capacity = 64;
            })
            .with_connection_config(|c| {
                c.connection_timeout = config.connect_timeout;
                c.internal_command_timeout = config.timeout.max(Duration::from_secs(1));
                // Lock scripts are not idempotent: never let the transport re-send them.
                // Unlock has its own retry, made idempotent by the unlock latch. On a cluster
                // fred counts following a MOVED/ASK redirection as an attempt, so it needs
                // more than one to follow a failover or a slot migration (README: safety).
                c.max_command_attempts = if clustered { 3 } else { 1 };
            })
            .set_policy(ReconnectPolicy::new_exponential(
                0,
                50,
                config.reconnect_max_delay_ms(),
                2,
            ));
        let redis = builder.build().map_err(|e| Error::from_redis(e, ""))?;
        // The subscriber's message stream: a reader that falls behind wakes every waiter
        // (a lag is never a lost wake-up), so a moderate buffer suffices.
        builder.with_performance_config(|p| p.broadcast_channel_capacity = 4096);
        let sub = builder
            .build_subscriber_client()
            .map_err(|e| Error::from_redis(e, ""))?;
        init(&redis, config.connect_timeout).await?;
        if let Err(e) = init(&sub, config.connect_timeout).await {
            let _ = redis.quit().await;
            return Err(e);
        }
        let mut core = Core {
            id: uuid::Uuid::new_v4().to_string(),
            redis,
            scripts: Scripts::new(),
            config,
            clustered,
            messaging: Messaging {
                classic: true,
                sharded: false,
            },
        };
        let ready = async {
            core.load_scripts().await?;
            core.messaging = core.probe_messaging().await;
            Ok::<(), Error>(())
        };
        if let Err(e) = ready.await {
            core.quit().await;
            let _ = sub.quit().await;
            return Err(e);
        }
        Ok((core, sub))
    }

    /// Resolves the sharded-subscription setting: only a cluster uses sharded pub/sub; `Auto`
    /// asks the server whether it knows `PUBSUB SHARDNUMSUB` (Redis ≥ 7), as Redisson does.
    async fn probe_messaging(&self) -> Messaging {
        let (classic, sharded) = match self.config.sharded_subscription_mode {
            _ if !self.clustered => (true, false),
            ShardedSubscriptionMode::On => (false, true),
            ShardedSubscriptionMode::Off => (true, false),
            ShardedSubscriptionMode::Both => (true, true),
            ShardedSubscriptionMode::Auto => {
                let probe: std::result::Result<Value, _> = self
                    .redis
                    .pubsub_shardnumsub(vec!["redisson-lock:probe"])
                    .await;
                match probe {
                    Ok(_) => (false, true),
                    Err(e) => {
                        log::info!("no sharded pub/sub on this cluster ({e}); using PUBLISH");
                        (true, false)
                    }
                }
            }
        };
        Messaging { classic, sharded }
    }

    /// `true` on a Redis Cluster.
    pub(crate) fn is_clustered(&self) -> bool {
        self.clustered
    }

    /// How unlock messages travel.
    pub(crate) fn messaging(&self) -> Messaging {
        self.messaging
    }

    /// The command connection (the subscription registry follows its topology changes).
    pub(crate) fn redis(&self) -> &FredClient {
        &self.redis
    }

    /// This client's id: the `<client uuid>` part of every owner field.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// Loads every script (`SCRIPT LOAD`, on every primary of a cluster), so the first calls
    /// need no `NOSCRIPT` round trip. Nodes that join later (a promoted replica, a migration
    /// target) get a script the first time a call meets `NOSCRIPT` there.
    async fn load_scripts(&self) -> Result<()> {
        let loads = self.scripts.sources().map(|source| async move {
            if self.clustered {
                self.redis.script_load_cluster::<Value, _>(source).await
            } else {
                self.redis.script_load::<Value, _>(source).await
            }
        });
        futures::future::try_join_all(loads)
            .await
            .map_err(|e| Error::from_redis(e, ""))?;
        Ok(())
    }

    /// Runs a script call for the lock `lock` with `EVALSHA`; on `NOSCRIPT` sends it once with
    /// `EVAL`, which also caches it on the server for the next `EVALSHA`.
    ///
    /// On a cluster a call whose keys span slots is refused before it is sent. The `EVAL` after
    /// a `NOSCRIPT` is routed by the same first key, so it reaches the node that answered (the
    /// new owner after a failover or a migration), which then caches the script.
    pub(crate) async fn run(&self, call: ScriptCall, lock: &str) -> Result<Value> {
        if self.clustered && !one_slot(&call.keys) {
            return Err(Error::CrossSlot {
                lock: lock.to_owned(),
            });
        }
        let sha1 = self.scripts.sha1(call.script);
        let first = self
            .redis
            .evalsha::<Value, _, _, _>(sha1, call.keys.clone(), call.args.clone())
            .await;
        let reply = match first {
            Err(e) if e.details().starts_with("NOSCRIPT") => {
                log::debug!(
                    "script {:?} missing on the server, sending it again",
                    call.script
                );
                let source = self.scripts.source(call.script);
                self.redis.eval(source, call.keys, call.args).await
            }
            other => other,
        };
        reply.map_err(|e| Error::from_redis(e, lock))
    }

    /// Runs a script that answers an array of integers (the renewal flags).
    pub(crate) async fn run_flags(&self, call: ScriptCall, lock: &str) -> Result<Vec<i64>> {
        let reply = self.run(call, lock).await?;
        reply
            .convert::<Vec<i64>>()
            .map_err(|e| unexpected(lock, format!("flags expected: {e}")))
    }

    /// The hold count of `field` in the lock hash `name` (0 when absent).
    pub(crate) async fn hold_count(&self, name: &str, field: &str) -> Result<u64> {
        let n: Option<i64> = self
            .redis
            .hget(name, field)
            .await
            .map_err(|e| Error::from_redis(e, name))?;
        Ok(n.unwrap_or(0).max(0) as u64)
    }

    /// `true` if the lock hash `name` has the field `field`.
    pub(crate) async fn has_field(&self, name: &str, field: &str) -> Result<bool> {
        self.redis
            .hexists(name, field)
            .await
            .map_err(|e| Error::from_redis(e, name))
    }

    /// `true` if the key exists.
    pub(crate) async fn exists(&self, key: &str, lock: &str) -> Result<bool> {
        let n: i64 = self
            .redis
            .exists(key)
            .await
            .map_err(|e| Error::from_redis(e, lock))?;
        Ok(n > 0)
    }

    /// The remaining time to live of a key.
    pub(crate) async fn ttl(&self, key: &str) -> Result<Ttl> {
        let ms: i64 = self
            .redis
            .pttl(key)
            .await
            .map_err(|e| Error::from_redis(e, key))?;
        Ok(Ttl::from_pttl(ms))
    }

    /// An integer value (0 when absent), e.g. the fenced lock's token counter.
    pub(crate) async fn counter(&self, key: &str, lock: &str) -> Result<u64> {
        let v: Option<i64> = self
            .redis
            .get(key)
            .await
            .map_err(|e| Error::from_redis(e, lock))?;
        Ok(v.unwrap_or(0).max(0) as u64)
    }

    /// Unlinks keys, ignoring the outcome (clean-up of unlock latches).
    pub(crate) async fn unlink(&self, keys: Vec<Key>) {
        let _ = self.redis.unlink::<i64, _>(keys).await;
    }

    /// Closes the command connection.
    pub(crate) async fn quit(&self) {
        let _ = self.redis.quit().await;
    }
}

/// An error for a reply the scripts never give.
pub(crate) fn unexpected(lock: &str, what: impl std::fmt::Display) -> Error {
    Error::Redis(Failure::new(format!(
        "unexpected script reply for lock {lock}: {what}"
    )))
}

async fn init<C: ClientLike>(client: &C, timeout: Duration) -> Result<()> {
    match tokio::time::timeout(timeout, client.init()).await {
        Ok(Ok(_task)) => Ok(()),
        Ok(Err(e)) => {
            let _ = client.quit().await;
            Err(Error::from_redis(e, ""))
        }
        Err(_) => {
            let _ = client.quit().await;
            Err(Error::Connection(
                format!("could not connect to Redis within {timeout:?}").into(),
            ))
        }
    }
}
