//! The core every other part of a client shares: the command connection, the script registry and
//! the settings. It runs [`ScriptCall`]s and the few plain queries the locks need, and maps every
//! Redis failure to the crate's [`Error`], naming the lock concerned.

use std::time::Duration;

use fred::{
    clients::{Client as FredClient, SubscriberClient},
    interfaces::{ClientLike, HashesInterface, KeysInterface, LuaInterface},
    types::{
        config::{Config as FredConfig, ReconnectPolicy},
        Builder, Key, Value,
    },
};

use crate::{
    config::Config,
    error::{Error, Failure, Result},
    scripts::{ScriptCall, Scripts},
    ttl::Ttl,
};

/// The command connection, the scripts and the settings of one client.
pub(crate) struct Core {
    id: String,
    redis: FredClient,
    scripts: Scripts,
    config: Config,
}

impl Core {
    /// Connects the command connection and a subscriber connection to the server at `url`,
    /// loads every script, and returns the core with the (initialised) subscriber client.
    pub(crate) async fn connect(url: &str, config: Config) -> Result<(Core, SubscriberClient)> {
        config.validate()?;
        crate::url::RedisUrl::parse(url)?.check_supported()?;
        // fred's URL errors may echo the URL, which can hold a password: report the kind only.
        let redis_config = FredConfig::from_url(url)
            .map_err(|e| Error::InvalidArgument(format!("invalid Redis URL ({:?})", e.kind())))?;
        let mut builder = Builder::from_config(redis_config);
        builder
            .with_performance_config(|p| {
                p.default_command_timeout = config.timeout;
                // Waiters must never lose a wake-up because the reader fell behind.
                p.broadcast_channel_capacity = 1 << 16;
            })
            .with_connection_config(|c| {
                c.connection_timeout = config.connect_timeout;
                c.internal_command_timeout = config.timeout.max(Duration::from_secs(1));
                // Lock scripts are not idempotent: never let the transport re-send them.
                // Unlock has its own retry, made idempotent by the unlock latch.
                c.max_command_attempts = 1;
            })
            .set_policy(ReconnectPolicy::new_exponential(
                0,
                50,
                config.reconnect_max_delay_ms(),
                2,
            ));
        let redis = builder.build().map_err(|e| Error::from_redis(e, ""))?;
        let sub = builder
            .build_subscriber_client()
            .map_err(|e| Error::from_redis(e, ""))?;
        init(&redis, config.connect_timeout).await?;
        if let Err(e) = init(&sub, config.connect_timeout).await {
            let _ = redis.quit().await;
            return Err(e);
        }
        let core = Core {
            id: uuid::Uuid::new_v4().to_string(),
            redis,
            scripts: Scripts::new(),
            config,
        };
        if let Err(e) = core.load_scripts().await {
            core.quit().await;
            let _ = sub.quit().await;
            return Err(e);
        }
        Ok((core, sub))
    }

    /// This client's id: the `<client uuid>` part of every owner field.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// Loads every script (`SCRIPT LOAD`), so the first calls need no `NOSCRIPT` round trip.
    async fn load_scripts(&self) -> Result<()> {
        let loads = self
            .scripts
            .sources()
            .map(|source| self.redis.script_load::<String, _>(source));
        futures::future::try_join_all(loads)
            .await
            .map_err(|e| Error::from_redis(e, ""))?;
        Ok(())
    }

    /// Runs a script call for the lock `lock` with `EVALSHA`; on `NOSCRIPT` sends it once with
    /// `EVAL`, which also caches it on the server for the next `EVALSHA`.
    pub(crate) async fn run(&self, call: ScriptCall, lock: &str) -> Result<Value> {
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

    /// Deletes keys, ignoring the outcome (clean-up of unlock latches).
    pub(crate) async fn delete(&self, keys: Vec<Key>) {
        let _ = self.redis.del::<i64, _>(keys).await;
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
