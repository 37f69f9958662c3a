//! The client: one command connection, one subscriber connection, the script registry, the
//! subscription registry and the renewal service, shared by every lock it hands out.

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use fred::{
    clients::Client as FredClient,
    interfaces::ClientLike,
    types::{
        config::{Config as FredConfig, ReconnectPolicy},
        Builder,
    },
};

use crate::{
    config::Config,
    error::{Error, Result},
    lock::{BackOff, FairLock, FencedLock, RLock, ReadWriteLock, SpinLock},
    owner::Owner,
    pubsub::PubSub,
    scripts::Scripts,
    watchdog::Watchdog,
};

/// What the background tasks need: the command connection, the scripts and the settings.
pub(crate) struct Core {
    pub(crate) id: String,
    pub(crate) redis: FredClient,
    pub(crate) scripts: Scripts,
    pub(crate) config: Config,
}

pub(crate) struct ClientInner {
    pub(crate) core: Arc<Core>,
    pub(crate) pubsub: PubSub,
    pub(crate) watchdog: Watchdog,
    pub(crate) runtime: tokio::runtime::Handle,
    closed: AtomicBool,
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        let redis = self.core.redis.clone();
        drop(self.runtime.spawn(async move {
            let _ = redis.quit().await;
        }));
    }
}

/// A connection to Redis that hands out locks. Cheap to clone; create one per application.
///
/// The client id is a random lowercase v4 UUID, the first half of every owner field it writes.
///
/// ```no_run
/// # async fn demo() -> redisson_lock::Result<()> {
/// use redisson_lock::{Client, Config};
///
/// let client = Client::connect("redis://127.0.0.1:6379", Config::default()).await?;
/// let lock = client.get_lock("orders");
/// let guard = lock.lock().await?;          // waits; the watchdog keeps it alive
/// // ... critical section ...
/// guard.unlock().await?;                   // or just drop the guard
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<ClientInner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("id", &self.inner.core.id)
            .finish()
    }
}

impl Client {
    /// Connects to the Redis server at `url` (`redis://[user:password@]host:port[/db]`).
    ///
    /// Must be called inside a Tokio runtime; the client's background tasks run on it.
    pub async fn connect(url: &str, config: Config) -> Result<Client> {
        config.validate()?;
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
                config.reconnect_max_delay.as_millis() as u32,
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

        let scripts = Scripts::new();
        if let Err(e) = scripts.load_all(&redis).await {
            let _ = redis.quit().await;
            let _ = sub.quit().await;
            return Err(Error::from_redis(e, ""));
        }
        let core = Arc::new(Core {
            id: uuid::Uuid::new_v4().to_string(),
            redis,
            scripts,
            config,
        });
        let inner = ClientInner {
            pubsub: PubSub::start(sub),
            watchdog: Watchdog::start(core.clone()),
            core,
            runtime: tokio::runtime::Handle::current(),
            closed: AtomicBool::new(false),
        };
        Ok(Client {
            inner: Arc::new(inner),
        })
    }

    /// This client's id: the `<client uuid>` part of every owner field.
    pub fn id(&self) -> &str {
        &self.inner.core.id
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &Config {
        &self.inner.core.config
    }

    /// A reentrant lock handle for `name`, bound to a fresh [`Owner`].
    ///
    /// One handle is one logical owner (like one Java thread): acquisitions through the same
    /// handle re-enter, acquisitions through different handles exclude each other, even on the
    /// same OS thread. Give each task its own handle; the call is cheap.
    pub fn get_lock(&self, name: &str) -> RLock {
        RLock::new(self.clone(), name, Owner::new())
    }

    /// A reentrant lock handle for `name` acting as `owner` (Redisson's explicit `threadId`).
    pub fn get_lock_with_owner(&self, name: &str, owner: Owner) -> RLock {
        RLock::new(self.clone(), name, owner)
    }

    /// A fair lock handle for `name`, bound to a fresh [`Owner`].
    pub fn get_fair_lock(&self, name: &str) -> FairLock {
        FairLock::new(self.clone(), name, Owner::new())
    }

    /// A fair lock handle acting as `owner`.
    pub fn get_fair_lock_with_owner(&self, name: &str, owner: Owner) -> FairLock {
        FairLock::new(self.clone(), name, owner)
    }

    /// A read-write lock for `name`; both halves act as one fresh [`Owner`].
    pub fn get_read_write_lock(&self, name: &str) -> ReadWriteLock {
        ReadWriteLock::new(self.clone(), name, Owner::new())
    }

    /// A read-write lock whose halves act as `owner`.
    pub fn get_read_write_lock_with_owner(&self, name: &str, owner: Owner) -> ReadWriteLock {
        ReadWriteLock::new(self.clone(), name, owner)
    }

    /// A fenced lock handle for `name`, bound to a fresh [`Owner`].
    pub fn get_fenced_lock(&self, name: &str) -> FencedLock {
        FencedLock::new(self.clone(), name, Owner::new())
    }

    /// A fenced lock handle acting as `owner`.
    pub fn get_fenced_lock_with_owner(&self, name: &str, owner: Owner) -> FencedLock {
        FencedLock::new(self.clone(), name, owner)
    }

    /// A spin lock handle for `name` with Redisson's default back-off.
    pub fn get_spin_lock(&self, name: &str) -> SpinLock {
        SpinLock::new(self.clone(), name, Owner::new(), BackOff::default())
    }

    /// A spin lock handle acting as `owner`, with the given back-off.
    pub fn get_spin_lock_with(&self, name: &str, owner: Owner, backoff: BackOff) -> SpinLock {
        SpinLock::new(self.clone(), name, owner, backoff)
    }

    /// Number of (lock, owner) holds the watchdog is renewing.
    pub fn watchdog_len(&self) -> usize {
        self.inner.watchdog.len()
    }

    /// Number of renewal script calls made so far.
    pub fn watchdog_renew_calls(&self) -> u64 {
        self.inner.watchdog.renew_calls()
    }

    /// Number of lock channels this client is subscribed to (one per channel with waiters).
    pub fn subscribed_channels(&self) -> usize {
        self.inner.pubsub.active_channels()
    }

    /// Number of local waiters on the unlock channel of the reentrant (or fenced) lock `name`.
    pub fn waiters(&self, name: &str) -> usize {
        let raw = self.map_name(name);
        self.channel_waiters(&crate::names::lock_channel(&raw))
    }

    /// Number of local waiters asleep on a channel (e.g. `redisson_rwlock:{name}` or a fair
    /// lock's per-waiter channel).
    pub fn channel_waiters(&self, channel: &str) -> usize {
        self.inner.pubsub.waiters(channel)
    }

    /// Stops the watchdog and closes the connections without releasing anything: held locks
    /// expire after their lease or one watchdog timeout (Redisson's `shutdown()`).
    pub async fn shutdown(&self) {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.inner.watchdog.stop();
        self.inner.pubsub.shutdown().await;
        let _ = self.inner.core.redis.quit().await;
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    pub(crate) fn map_name(&self, name: &str) -> String {
        match &self.inner.core.config.name_mapper {
            Some(m) => m.map(name),
            None => name.to_owned(),
        }
    }
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
            Err(Error::Connection(format!(
                "could not connect to Redis within {timeout:?}"
            )))
        }
    }
}
