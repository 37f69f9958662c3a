//! The builder: one setter per setting, each taking and returning the `Config` (the getters,
//! named like Redisson's, are in `getters`).

use std::{sync::Arc, time::Duration};

use super::{
    credentials::{Credentials, Secret},
    modes::{LocalHandOff, ShardedSubscriptionMode},
    name_mapper::{NameMapper, PrefixNameMapper},
    settings::Config,
    tls::TlsSettings,
};

impl Config {
    /// Same as `Config::default()`.
    pub fn new() -> Self {
        Self::default()
    }

    /// TTL of a lock taken without a lease; the watchdog renews it every timeout/3.
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn lock_watchdog_timeout(mut self, timeout: Duration) -> Self {
        self.lock_watchdog_timeout = timeout;
        self
    }

    /// How the owners of this client hand a contended lock to one another (crate only; see
    /// [`LocalHandOff`]). Default: [`LocalHandOff::Bounded`] with 10 ms.
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn local_hand_off(mut self, policy: LocalHandOff) -> Self {
        self.local_hand_off = policy;
        self
    }

    /// How many locks one renewal script call renews.
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn lock_watchdog_batch_size(mut self, size: usize) -> Self {
        self.lock_watchdog_batch_size = size;
        self
    }

    /// Stop renewing a lock after this many renewals (it then expires one watchdog timeout later
    /// and its guard reports it lost). `None`, the default, renews without limit like Redisson.
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn max_renewals(mut self, max: Option<u64>) -> Self {
        self.max_renewals = max;
        self
    }

    /// How long a queued fair-lock waiter keeps its place without polling (Redisson
    /// `fairLockWaitTimeout`); a `try_lock_for(wait)` uses its own wait instead.
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn fair_lock_wait_timeout(mut self, timeout: Duration) -> Self {
        self.fair_lock_wait_timeout = timeout;
        self
    }

    /// Maps every user-facing lock name to its raw Redis name.
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn name_mapper(mut self, mapper: impl NameMapper) -> Self {
        self.name_mapper = Some(Arc::new(mapper));
        self
    }

    /// Shorthand for a [`PrefixNameMapper`].
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn key_prefix(self, prefix: impl Into<String>) -> Self {
        self.name_mapper(PrefixNameMapper::new(prefix))
    }

    /// Response timeout of every Redis command (Redisson `timeout`).
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Timeout of establishing a connection.
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// How long [`Client::shutdown`](crate::Client::shutdown) waits for the releases of the
    /// guards already dropped (the background releases) before it closes the connections.
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// How long a waiter may take to subscribe to a lock's channel before `lock()` fails.
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn subscription_timeout(mut self, timeout: Duration) -> Self {
        self.subscription_timeout = timeout;
        self
    }

    /// How often an unlock whose reply was lost is retried (made idempotent by its unlock
    /// receipt, Redisson's unlock latch).
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn retry_attempts(mut self, attempts: u32) -> Self {
        self.retry_attempts = attempts;
        self
    }

    /// Delay between such retries.
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.retry_delay = delay;
        self
    }

    /// How unlock messages travel on a Redis Cluster; see [`ShardedSubscriptionMode`].
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn sharded_subscription_mode(mut self, mode: ShardedSubscriptionMode) -> Self {
        self.sharded_subscription_mode = mode;
        self
    }

    /// Upper bound of the exponential back-off between reconnection attempts (the first retry
    /// is immediate, then 50 ms doubling up to this). Default 2 s; must not be zero.
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn reconnect_max_delay(mut self, delay: Duration) -> Self {
        self.reconnect_max_delay = delay;
        self
    }

    /// The ACL user for the data nodes (Redisson `username`); overrides the URL's.
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn username(mut self, user: impl Into<String>) -> Self {
        self.username = Some(user.into());
        self
    }

    /// The password for the data nodes (Redisson `password`); overrides the URL's. Never shown
    /// by `Debug`.
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn password(mut self, password: impl Into<Secret>) -> Self {
        self.password = Some(password.into());
        self
    }

    /// The ACL user for the sentinels (Redisson `sentinelUsername`).
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn sentinel_username(mut self, user: impl Into<String>) -> Self {
        self.sentinel_username = Some(user.into());
        self
    }

    /// The password for the sentinels (Redisson `sentinelPassword`).
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn sentinel_password(mut self, password: impl Into<Secret>) -> Self {
        self.sentinel_password = Some(password.into());
        self
    }

    /// Credentials for the data nodes that the application can change while the client runs
    /// (password rotation): every connection opened later (a reconnect, another cluster node, a
    /// new master) authenticates with the handle's current user and password. Overrides the
    /// URL's user and password; not to be combined with [`password`](Self::password).
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn credentials(mut self, credentials: Credentials) -> Self {
        self.credentials = Some(credentials);
        self
    }

    /// As [`credentials`](Self::credentials), for the sentinels (matched by the host and port
    /// they are configured with). Not to be combined with
    /// [`sentinel_password`](Self::sentinel_password).
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn sentinel_credentials(mut self, credentials: Credentials) -> Self {
        self.sentinel_credentials = Some(credentials);
        self
    }

    /// The database (Redisson `database`); overrides the URL's. Not on a cluster.
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn database(mut self, db: u8) -> Self {
        self.database = Some(db);
        self
    }

    /// TLS settings for `rediss://` URLs (crate feature `tls`). Setting them does not turn TLS on
    /// for a `redis://` URL: the scheme decides, so a URL never means less than it says.
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn tls(mut self, tls: TlsSettings) -> Self {
        self.tls = Some(tls);
        self
    }

    /// Replica-synced acquisition (Redisson `checkLockSyncedSlaves`, on by default): after a
    /// script that acquired a lock, `WAIT <replicas> <replicas_sync_timeout>` runs on the same
    /// connection as the script; if no replica acknowledged the write in time, the acquisition
    /// is undone (the owner-checked release, so a re-entrant owner's count is back where it was)
    /// and fails with [`Error::NotReplicated`]. No `WAIT` is sent to a master without replicas
    /// (a lone server), nor where the server does not know `WAIT`. The replica count is read
    /// from `INFO replication` and cached; it counts the replicas with `state=online` only (one
    /// still in its full sync cannot acknowledge).
    ///
    /// Standalone masters and Sentinel deployments only: on a Redis Cluster no `WAIT` is sent
    /// (docs/safety.md, "Replication"). Unlike Redisson, `false` sends no `WAIT` at all (Redisson still waits,
    /// but never fails).
    ///
    /// [`Error::NotReplicated`]: crate::Error::NotReplicated
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn check_lock_synced_replicas(mut self, on: bool) -> Self {
        self.check_lock_synced_replicas = on;
        self
    }

    /// How long an acquisition waits for a replica's acknowledgement (Redisson
    /// `slavesSyncTimeout`, 1 s). Must be > 0 (Redis reads `WAIT .. 0` as "forever");
    /// `Duration::MAX` waits without limit.
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn replicas_sync_timeout(mut self, timeout: Duration) -> Self {
        self.replicas_sync_timeout = timeout;
        self
    }

    /// How long a command on the command connection may go without a reply before the
    /// connection is treated as stalled (every command behind it waits with it): it is closed
    /// and replaced, and its commands still in flight fail as they do on a lost connection
    /// (an acquisition `Ambiguous`, undone in the background on the new connection). `None`
    /// turns the check off. Default: the command [`timeout`](Self::timeout) (a longer value
    /// acts as the command timeout, at which every command fails anyway).
    #[must_use = "a Config builder method returns the changed Config"]
    pub fn stalled_connection_timeout(mut self, timeout: Option<Duration>) -> Self {
        self.stalled_connection_timeout = Some(timeout);
        self
    }
}
