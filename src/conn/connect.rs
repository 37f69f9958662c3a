//! How a client connects: the fred configuration for each deployment (one URL, cluster seeds,
//! Sentinel) with the [`Config`] settings applied (credentials, database, TLS), the two
//! connections it opens, and what it learns at connect (sharded pub/sub or not).

use std::time::Duration;

use fred::{
    clients::Client as FredClient,
    interfaces::{ClientLike, PubsubInterface},
    types::{
        config::{Config as FredConfig, ReconnectPolicy, ServerConfig},
        Builder, ClusterHash, CustomCommand, Value,
    },
};

use crate::{
    config::{
        credentials::{Provider, Secret, Source},
        url::{without_tls, Deployment, RedisUrl},
        Config, ShardedSubscriptionMode,
    },
    conn::cluster::Messaging,
    error::{Error, Result},
};

/// Where a client connects.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Target<'a> {
    /// One URL (server, `redis-sentinel://`, `redis-cluster://`), or several cluster seeds.
    Urls(&'a [&'a str]),
    /// Redis Sentinel (Redisson `useSentinelServers`): the master's name and the sentinels'
    /// `redis://` (or `rediss://`) URLs.
    Sentinel {
        master: &'a str,
        sentinels: &'a [&'a str],
    },
    /// A fred configuration the application already has (its server, TLS, credentials and
    /// database), with the crate's own connection policies applied.
    #[cfg(feature = "fred-10")]
    Fred(&'a FredConfig),
}

/// What the client is connected to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Topology {
    Standalone,
    Sentinel,
    Cluster,
}

/// fred's URL parse (of the plain-scheme form: TLS is set by [`apply`]). fred's URL errors may
/// echo the URL, which can hold a password: only the kind is reported (the URL passed
/// [`RedisUrl::parse`] already, so this does not happen in practice).
fn from_url(u: &str) -> Result<FredConfig> {
    FredConfig::from_url(&without_tls(u))
        .map_err(|e| Error::InvalidArgument(format!("invalid Redis URL ({:?})", e.kind())))
}

/// The fred configuration for a target, with the settings of `config` applied.
fn fred_config(target: Target<'_>, config: &Config) -> Result<(FredConfig, Topology)> {
    let (mut fred, topology, tls) = match target {
        Target::Urls(urls) => urls_config(urls)?,
        Target::Sentinel { master, sentinels } => sentinel_config(master, sentinels)?,
        #[cfg(feature = "fred-10")]
        Target::Fred(given) => return given_config(given, config),
    };
    apply(&mut fred, topology, tls, config)?;
    Ok((fred, topology))
}

/// An application's fred configuration: its deployment, TLS, credentials and database are
/// kept; the [`Config`]'s credentials and database override them where set; TLS is the fred
/// configuration's own (a [`Config::tls`] set beside it is refused: one place says it).
#[cfg(feature = "fred-10")]
fn given_config(given: &FredConfig, config: &Config) -> Result<(FredConfig, Topology)> {
    let mut fred = given.clone();
    let topology = match fred.server {
        ServerConfig::Clustered { .. } => Topology::Cluster,
        ServerConfig::Sentinel { .. } => Topology::Sentinel,
        _ => Topology::Standalone,
    };
    if config.tls.is_some() {
        return Err(Error::InvalidArgument(
            "TLS settings are given beside a fred configuration; set TLS in the fred \
             configuration"
                .into(),
        ));
    }
    #[cfg(feature = "tls")]
    let tls = fred.tls.is_some();
    #[cfg(not(feature = "tls"))]
    let tls = false;
    // `apply` builds TLS from the Config where the target names it: the given one is kept.
    #[cfg(feature = "tls")]
    let kept = fred.tls.take();
    apply(&mut fred, topology, false, config)?;
    #[cfg(feature = "tls")]
    {
        fred.tls = kept;
    }
    let _ = tls;
    Ok((fred, topology))
}

fn urls_config(urls: &[&str]) -> Result<(FredConfig, Topology, bool)> {
    let first = *urls
        .first()
        .ok_or_else(|| Error::InvalidArgument("no Redis URL given".into()))?;
    let parsed = urls
        .iter()
        .map(|u| RedisUrl::parse(u))
        .collect::<Result<Vec<_>>>()?;
    if urls.len() == 1 {
        let p = &parsed[0];
        p.check_supported()?;
        let topology = match p.deployment() {
            Deployment::Standalone => Topology::Standalone,
            Deployment::Sentinel => Topology::Sentinel,
            Deployment::Cluster => Topology::Cluster,
        };
        return Ok((from_url(first)?, topology, p.tls()));
    }
    // Several seeds: redis:// (or rediss://) URLs of cluster nodes (Redisson's addNodeAddress).
    for p in &parsed {
        if p.deployment() != Deployment::Standalone {
            return Err(Error::InvalidArgument(format!(
                "cluster seeds are listed as redis:// URLs, not {}://",
                p.scheme()
            )));
        }
        p.check_supported()?;
    }
    let tls = parsed[0].tls();
    if parsed.iter().any(|p| p.tls() != tls) {
        return Err(Error::InvalidArgument(
            "cluster seeds mix TLS and plain URLs; use rediss:// for all or none".into(),
        ));
    }
    let mut fred = from_url(first)?;
    let hosts = parsed
        .iter()
        .flat_map(|p| p.hosts().iter().map(|h| (h.host.clone(), h.port)))
        .collect();
    fred.server = ServerConfig::new_clustered(hosts);
    Ok((fred, Topology::Cluster, tls))
}

/// Sentinel: each sentinel is a `redis://host:port` (or `rediss://`) URL; a user and password
/// in them are the sentinels' credentials (the data nodes' come from the [`Config`]).
fn sentinel_config(master: &str, sentinels: &[&str]) -> Result<(FredConfig, Topology, bool)> {
    if master.trim().is_empty() {
        return Err(Error::InvalidArgument(
            "the Sentinel master name is empty".into(),
        ));
    }
    if sentinels.is_empty() {
        return Err(Error::InvalidArgument("no sentinel address given".into()));
    }
    let parsed = sentinels
        .iter()
        .map(|u| RedisUrl::parse(u))
        .collect::<Result<Vec<_>>>()?;
    for p in &parsed {
        if p.deployment() != Deployment::Standalone {
            return Err(Error::InvalidArgument(format!(
                "sentinels are listed as redis:// (or rediss://) URLs, not {}://",
                p.scheme()
            )));
        }
        if p.database().is_some() {
            return Err(Error::InvalidArgument(
                "a sentinel URL names a database; set the data nodes' database with \
                 Config::database"
                    .into(),
            ));
        }
        p.check_supported()?;
    }
    let tls = parsed[0].tls();
    if parsed.iter().any(|p| p.tls() != tls) {
        return Err(Error::InvalidArgument(
            "sentinel URLs mix TLS and plain; use rediss:// for all or none".into(),
        ));
    }
    let mut fred = from_url(sentinels[0])?;
    let (username, password) = (fred.username.take(), fred.password.take());
    fred.server = ServerConfig::Sentinel {
        hosts: parsed
            .iter()
            .flat_map(|p| p.hosts().iter())
            .map(|h| fred::types::config::Server::new(h.host.as_str(), h.port))
            .collect(),
        service_name: master.to_owned(),
        username,
        password,
    };
    Ok((fred, Topology::Sentinel, tls))
}

/// The [`Config`] settings that override the URL: credentials, database, TLS.
fn apply(fred: &mut FredConfig, topology: Topology, tls: bool, config: &Config) -> Result<()> {
    if let Some(user) = &config.username {
        fred.username = Some(user.clone());
    }
    if let Some(password) = &config.password {
        fred.password = Some(password.expose().to_owned());
    }
    if let Some(db) = config.database {
        if topology == Topology::Cluster {
            return Err(Error::InvalidArgument(
                "Config::database is set, but a Redis Cluster has only database 0".into(),
            ));
        }
        fred.database = Some(db);
    }
    if config.sentinel_username.is_some() || config.sentinel_password.is_some() {
        match &mut fred.server {
            ServerConfig::Sentinel {
                username, password, ..
            } => {
                if let Some(u) = &config.sentinel_username {
                    *username = Some(u.clone());
                }
                if let Some(p) = &config.sentinel_password {
                    *password = Some(p.expose().to_owned());
                }
            }
            _ => {
                return Err(Error::InvalidArgument(
                    "sentinel credentials are set, but the target is not Sentinel".into(),
                ))
            }
        }
    }
    live_credentials(fred, config)?;
    if !tls {
        if config.tls.is_some() {
            return Err(Error::InvalidArgument(
                "TLS settings are given but the URL is not a TLS one; use rediss:// (a plain \
                 redis:// URL is never upgraded silently)"
                    .into(),
            ));
        }
        #[cfg(feature = "tls")]
        {
            fred.tls = None;
        }
        return Ok(());
    }
    #[cfg(feature = "tls")]
    {
        let settings = config.tls.clone().unwrap_or_default();
        fred.tls = Some(crate::config::tls::fred_tls(&settings)?);
        Ok(())
    }
    #[cfg(not(feature = "tls"))]
    {
        Err(Error::InvalidArgument(
            "a TLS URL needs the `tls` feature of redisson-lock".into(),
        ))
    }
}

/// The fred configuration the crate connects with for `url`: the URL checked (schemes, TLS
/// support), the credentials, database and TLS settings of `config` applied. For the
/// `redisson-lock` binary, so it reaches every deployment exactly as a client would.
#[cfg(feature = "cli")]
pub(crate) fn fred_config_for_url(url: &str, config: &Config) -> Result<FredConfig> {
    config.validate()?;
    fred_config(Target::Urls(&[url]), config).map(|(fred, _)| fred)
}

/// With a [`Credentials`](crate::Credentials) handle in the config, every connection reads its
/// user and password through a provider when it opens (password rotation); the fixed ones then
/// stay out of fred's config.
fn live_credentials(fred: &mut FredConfig, config: &Config) -> Result<()> {
    if config.credentials.is_none() && config.sentinel_credentials.is_none() {
        return Ok(());
    }
    let data = match &config.credentials {
        Some(c) => Source::Live(c.clone()),
        None => Source::Fixed(fred.username.take(), fred.password.take().map(Secret::new)),
    };
    fred.username = None;
    fred.password = None;
    let (sentinels, sentinel) = match &mut fred.server {
        ServerConfig::Sentinel {
            hosts,
            username,
            password,
            ..
        } => {
            let sentinels = hosts.iter().map(|h| (h.host.to_string(), h.port)).collect();
            let source = match &config.sentinel_credentials {
                Some(c) => Source::Live(c.clone()),
                None => Source::Fixed(username.clone(), password.clone().map(Secret::new)),
            };
            *username = None;
            *password = None;
            (sentinels, source)
        }
        _ if config.sentinel_credentials.is_some() => {
            return Err(Error::InvalidArgument(
                "sentinel credentials are set, but the target is not Sentinel".into(),
            ))
        }
        _ => (Vec::new(), Source::Fixed(None, None)),
    };
    fred.credential_provider = Some(std::sync::Arc::new(Provider {
        data,
        sentinels,
        sentinel,
    }));
    Ok(())
}

/// The two connections a client starts with, initialised.
pub(crate) struct Opened {
    /// The command connection.
    pub(crate) redis: FredClient,
    /// The subscriber connection.
    pub(crate) sub: FredClient,
    pub(crate) clustered: bool,
    /// Sentinel: how to reach each sentinel directly (for its failover events).
    pub(crate) sentinels: Option<Sentinels>,
}

/// A Sentinel deployment's watch targets: the monitored master's name and one fred
/// configuration per sentinel that reaches it directly (not through the sentinel protocol),
/// with the sentinels' credentials and the TLS settings of the client.
#[derive(Clone)]
pub(crate) struct Sentinels {
    pub(crate) master: String,
    pub(crate) nodes: Vec<FredConfig>,
}

impl std::fmt::Debug for Sentinels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sentinels")
            .field("master", &self.master)
            .field("nodes", &self.nodes.len())
            .finish()
    }
}

impl Sentinels {
    /// `SENTINEL <args…>` on every sentinel at once, each on a short-lived connection of its
    /// own, within `within` in all; the replies of those that answered (the others are left
    /// out). Nothing here waits on the command connection.
    pub(crate) async fn ask(&self, args: &[&str], within: Duration) -> Vec<Value> {
        let ask = |node: FredConfig| async move {
            let mut builder = Builder::from_config(node);
            builder.with_connection_config(|c| {
                c.connection_timeout = within;
                c.internal_command_timeout = within;
            });
            let client = builder.build().ok()?;
            let answer = tokio::time::timeout(within, async {
                client.init().await.ok()?;
                client
                    .custom::<Value, _>(
                        CustomCommand::new_static("SENTINEL", ClusterHash::Random, false),
                        args.to_vec(),
                    )
                    .await
                    .ok()
            })
            .await
            .ok()
            .flatten();
            let _ = tokio::time::timeout(Duration::from_millis(200), client.quit()).await;
            answer
        };
        futures::future::join_all(self.nodes.iter().cloned().map(ask))
            .await
            .into_iter()
            .flatten()
            .collect()
    }
}

/// The direct configurations of the sentinels of a Sentinel configuration (`None` for other
/// deployments). A live-credentials provider is kept: it tells the sentinels by address.
fn sentinels_of(fred: &FredConfig) -> Option<Sentinels> {
    let ServerConfig::Sentinel {
        hosts,
        service_name,
        username,
        password,
    } = &fred.server
    else {
        return None;
    };
    let nodes = hosts
        .iter()
        .map(|host| {
            let mut node = fred.clone();
            node.server = ServerConfig::Centralized {
                server: host.clone(),
            };
            node.username.clone_from(username);
            node.password.clone_from(password);
            // A sentinel has no databases.
            node.database = None;
            node
        })
        .collect();
    Some(Sentinels {
        master: service_name.clone(),
        nodes,
    })
}

/// A fred builder for `node` with the client's timeouts and reconnection policy: the command
/// timeout per command, the connect timeout, and reconnection with exponential back-off up to
/// `reconnect_max_delay` (fred's event channels kept small: the caller raises the capacity of
/// a connection that listens to messages).
pub(crate) fn builder_for(node: FredConfig, config: &Config) -> Builder {
    let mut builder = Builder::from_config(node);
    builder
        .with_performance_config(|p| {
            p.default_command_timeout = config.timeout;
            p.broadcast_channel_capacity = 64;
        })
        .with_connection_config(|c| {
            c.connection_timeout = config.connect_timeout;
            c.internal_command_timeout = config.timeout.max(Duration::from_secs(1));
        })
        .set_policy(ReconnectPolicy::new_exponential(
            0,
            50,
            config.reconnect_max_delay_ms(),
            2,
        ));
    builder
}

/// Builds the command and subscriber connections for `target` with the settings of `config`
/// and initialises both within the connect timeout (on failure nothing is left open).
pub(crate) async fn open(target: Target<'_>, config: &Config) -> Result<Opened> {
    let (redis_config, topology) = fred_config(target, config)?;
    let clustered = topology == Topology::Cluster;
    let sentinels = sentinels_of(&redis_config);
    let mut builder = builder_for(redis_config, config);
    builder.with_connection_config(|c| {
        // Lock scripts are not idempotent: never let the transport re-send them.
        // Unlock has its own retry, made idempotent by the unlock receipt. On a cluster
        // fred counts following a MOVED/ASK redirection as an attempt, so it needs
        // more than one to follow a failover or a slot migration (docs/safety.md).
        c.max_command_attempts = if clustered { 3 } else { 1 };
        // The crate follows MOVED and ASK itself (see `asking`): fred refreshes its
        // slot table on a MOVED and fails the command, and never follows an ASK.
        c.max_redirections = 0;
    });
    let redis = builder.build().map_err(|e| Error::from_redis(e, ""))?;
    // The subscriber's message stream: a reader that falls behind wakes every waiter
    // (a lag is never a lost wake-up), so a moderate buffer suffices.
    builder.with_performance_config(|p| p.broadcast_channel_capacity = 4096);
    // The subscriber's SSUBSCRIBE follows redirections through fred.
    builder.with_connection_config(|c| c.max_redirections = 5);
    // A plain client, not fred's `SubscriberClient`: the registry keeps its channels and
    // subscribes them again itself; fred's own record of every subscribed channel (about
    // 110 bytes and three allocations a channel) would be a second copy nobody reads.
    let sub = builder.build().map_err(|e| Error::from_redis(e, ""))?;
    init(&redis, config.connect_timeout).await?;
    if let Err(e) = init(&sub, config.connect_timeout).await {
        let _ = redis.quit().await;
        return Err(e);
    }
    Ok(Opened {
        redis,
        sub,
        clustered,
        sentinels,
    })
}

/// Resolves the sharded-subscription setting: only a cluster uses sharded pub/sub; `Auto`
/// asks the server whether it knows `PUBSUB SHARDNUMSUB` (Redis ≥ 7), as Redisson does.
pub(crate) async fn probe_messaging(
    redis: &FredClient,
    config: &Config,
    clustered: bool,
) -> Messaging {
    let (classic, sharded) = match config.sharded_subscription_mode {
        _ if !clustered => (true, false),
        ShardedSubscriptionMode::On => (false, true),
        ShardedSubscriptionMode::Off => (true, false),
        ShardedSubscriptionMode::Both => (true, true),
        ShardedSubscriptionMode::Auto => {
            let probe: std::result::Result<Value, _> =
                redis.pubsub_shardnumsub(vec!["redisson-lock:probe"]).await;
            match probe {
                Ok(_) => (false, true),
                Err(e) => {
                    log::info!("no sharded pub/sub on this cluster ({e:#}); using PUBLISH");
                    (true, false)
                }
            }
        }
    };
    Messaging { classic, sharded }
}

async fn init<C: ClientLike>(client: &C, timeout: Duration) -> Result<()> {
    match tokio::time::timeout(timeout, client.init()).await {
        Ok(Ok(_task)) => Ok(()),
        Ok(Err(e)) => {
            let _ = client.quit().await;
            Err(Error::from_redis(e, ""))
        }
        Err(_) => {
            // A handshake that never completes (e.g. TLS against a plain server, which waits
            // for a line end) must not hold the caller past the connect timeout.
            let _ = tokio::time::timeout(Duration::from_millis(500), client.quit()).await;
            Err(Error::Connection(
                format!("could not connect to Redis within {timeout:?}").into(),
            ))
        }
    }
}
