//! Settings: the client configuration ([`Config`]), named after Redisson's `Config` (snake
//! case, same defaults), and what it is built from: the connection URL check ([`url`]), TLS
//! ([`tls`]), credentials with their secrets ([`credentials`]), the name mapper
//! ([`name_mapper`]) and the choices about other clients ([`modes`]). Nothing here connects.

pub(crate) mod credentials;
pub(crate) mod modes;
pub(crate) mod name_mapper;
pub(crate) mod tls;
pub(crate) mod url;

use std::{fmt, sync::Arc, time::Duration};

pub use modes::{LocalHandOff, ShardedSubscriptionMode};
pub use name_mapper::{NameMapper, PrefixNameMapper};
pub use tls::TlsSettings;

use crate::{
    config::credentials::{Credentials, Secret},
    error::{Error, Result},
    types::millis::{clamp_millis, MAX_MILLIS},
};

/// Configuration of a [`Client`](crate::Client).
///
/// | Redisson `Config` | here | default |
/// |---|---|---|
/// | `lockWatchdogTimeout` | [`lock_watchdog_timeout`](Self::lock_watchdog_timeout) | 30 s |
/// | `lockWatchdogBatchSize` | [`lock_watchdog_batch_size`](Self::lock_watchdog_batch_size) | 100 |
/// | (none: Redisson renews forever) | [`max_renewals`](Self::max_renewals) | unlimited |
/// | `fairLockWaitTimeout` | [`fair_lock_wait_timeout`](Self::fair_lock_wait_timeout) | 300 s |
/// | `nameMapper` | [`name_mapper`](Self::name_mapper) / [`key_prefix`](Self::key_prefix) | identity |
/// | `timeout` | [`timeout`](Self::timeout) | 3 s |
/// | `connectTimeout` | [`connect_timeout`](Self::connect_timeout) | 10 s |
/// | `subscriptionTimeout` | [`subscription_timeout`](Self::subscription_timeout) | 7.5 s |
/// | `retryAttempts` | [`retry_attempts`](Self::retry_attempts) | 4 |
/// | `retryDelay` | [`retry_delay`](Self::retry_delay) | 1 s |
/// | `shardedSubscriptionMode` (cluster) | [`sharded_subscription_mode`](Self::sharded_subscription_mode) | `Auto` |
/// | `reconnectionDelay` (bound) | [`reconnect_max_delay`](Self::reconnect_max_delay) | 2 s |
/// | `username` / `password` | [`username`](Self::username) / [`password`](Self::password) | from the URL |
/// | `sentinelUsername` / `sentinelPassword` | [`sentinel_username`](Self::sentinel_username) / [`sentinel_password`](Self::sentinel_password) | none |
/// | (rotation: `CredentialsResolver`) | [`credentials`](Self::credentials) / [`sentinel_credentials`](Self::sentinel_credentials) | none |
/// | `database` | [`database`](Self::database) | from the URL, else 0 |
/// | `sslTruststore`, `sslKeystore`, `sslEnableEndpointIdentification` | [`tls`](Self::tls) | platform roots, name checked |
/// | `checkLockSyncedSlaves` | [`check_lock_synced_replicas`](Self::check_lock_synced_replicas) | `true` (no `WAIT` without replicas) |
/// | `slavesSyncTimeout` | [`replicas_sync_timeout`](Self::replicas_sync_timeout) | 1 s |
/// | (crate only) | [`local_hand_off`](Self::local_hand_off) | [`LocalHandOff::Bounded`] (10 ms) |
/// | (none) | [`stalled_connection_timeout`](Self::stalled_connection_timeout) | the command timeout |
///
/// Every setter has a getter named like Redisson's (`get_lock_watchdog_timeout`, ...).
/// Settings are checked by [`validate`](Self::validate) when the client connects.
///
/// ```
/// use std::time::Duration;
/// use redisson_lock::Config;
///
/// let config = Config::default()
///     .lock_watchdog_timeout(Duration::from_secs(10))
///     .key_prefix("app1:");
/// assert_eq!(config.get_lock_watchdog_timeout(), Duration::from_secs(10));
/// assert!(config.validate().is_ok());
/// assert!(Config::default().connect_timeout(Duration::ZERO).validate().is_err());
/// ```
#[derive(Clone)]
pub struct Config {
    pub(crate) lock_watchdog_timeout: Duration,
    pub(crate) lock_watchdog_batch_size: usize,
    pub(crate) max_renewals: Option<u64>,
    pub(crate) fair_lock_wait_timeout: Duration,
    pub(crate) name_mapper: Option<Arc<dyn NameMapper>>,
    pub(crate) timeout: Duration,
    pub(crate) connect_timeout: Duration,
    pub(crate) subscription_timeout: Duration,
    pub(crate) retry_attempts: u32,
    pub(crate) retry_delay: Duration,
    pub(crate) reconnect_max_delay: Duration,
    pub(crate) sharded_subscription_mode: ShardedSubscriptionMode,
    pub(crate) username: Option<String>,
    pub(crate) password: Option<Secret>,
    pub(crate) sentinel_username: Option<String>,
    pub(crate) sentinel_password: Option<Secret>,
    pub(crate) credentials: Option<Credentials>,
    pub(crate) sentinel_credentials: Option<Credentials>,
    pub(crate) database: Option<u8>,
    pub(crate) tls: Option<TlsSettings>,
    pub(crate) check_lock_synced_replicas: bool,
    pub(crate) replicas_sync_timeout: Duration,
    pub(crate) local_hand_off: LocalHandOff,
    /// `None`: derived from the command timeout; `Some(None)`: off.
    pub(crate) stalled_connection_timeout: Option<Option<Duration>>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            lock_watchdog_timeout: Duration::from_secs(30),
            lock_watchdog_batch_size: 100,
            max_renewals: None,
            fair_lock_wait_timeout: Duration::from_secs(300),
            name_mapper: None,
            timeout: Duration::from_secs(3),
            connect_timeout: Duration::from_secs(10),
            subscription_timeout: Duration::from_millis(7500),
            retry_attempts: 4,
            retry_delay: Duration::from_secs(1),
            reconnect_max_delay: Duration::from_secs(2),
            sharded_subscription_mode: ShardedSubscriptionMode::Auto,
            username: None,
            password: None,
            sentinel_username: None,
            sentinel_password: None,
            credentials: None,
            sentinel_credentials: None,
            database: None,
            tls: None,
            check_lock_synced_replicas: true,
            replicas_sync_timeout: Duration::from_secs(1),
            local_hand_off: LocalHandOff::default(),
            stalled_connection_timeout: None,
        }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("lock_watchdog_timeout", &self.lock_watchdog_timeout)
            .field("lock_watchdog_batch_size", &self.lock_watchdog_batch_size)
            .field("max_renewals", &self.max_renewals)
            .field("fair_lock_wait_timeout", &self.fair_lock_wait_timeout)
            .field("name_mapper", &self.name_mapper.is_some())
            .field("timeout", &self.timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("subscription_timeout", &self.subscription_timeout)
            .field("retry_attempts", &self.retry_attempts)
            .field("retry_delay", &self.retry_delay)
            .field("sharded_subscription_mode", &self.sharded_subscription_mode)
            .field("reconnect_max_delay", &self.reconnect_max_delay)
            .field("username", &self.username)
            .field("password", &self.password)
            .field("sentinel_username", &self.sentinel_username)
            .field("sentinel_password", &self.sentinel_password)
            .field("credentials", &self.credentials)
            .field("sentinel_credentials", &self.sentinel_credentials)
            .field("database", &self.database)
            .field("tls", &self.tls)
            .field(
                "check_lock_synced_replicas",
                &self.check_lock_synced_replicas,
            )
            .field("replicas_sync_timeout", &self.replicas_sync_timeout)
            .field("local_hand_off", &self.local_hand_off)
            .field(
                "stalled_connection_timeout",
                &self.get_stalled_connection_timeout(),
            )
            .finish()
    }
}

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

    /// The configured sharded-subscription mode.
    pub fn get_sharded_subscription_mode(&self) -> ShardedSubscriptionMode {
        self.sharded_subscription_mode
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

    /// See [`credentials`](Self::credentials).
    pub fn get_credentials(&self) -> Option<&Credentials> {
        self.credentials.as_ref()
    }

    /// See [`sentinel_credentials`](Self::sentinel_credentials).
    pub fn get_sentinel_credentials(&self) -> Option<&Credentials> {
        self.sentinel_credentials.as_ref()
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
    /// (README: safety). Unlike Redisson, `false` sends no `WAIT` at all (Redisson still waits,
    /// but never fails).
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

    /// See [`check_lock_synced_replicas`](Self::check_lock_synced_replicas).
    pub fn get_check_lock_synced_replicas(&self) -> bool {
        self.check_lock_synced_replicas
    }

    /// See [`replicas_sync_timeout`](Self::replicas_sync_timeout).
    pub fn get_replicas_sync_timeout(&self) -> Duration {
        self.replicas_sync_timeout
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

    /// See [`stalled_connection_timeout`](Self::stalled_connection_timeout): the bound in
    /// effect (`None`: off).
    pub fn get_stalled_connection_timeout(&self) -> Option<Duration> {
        match self.stalled_connection_timeout {
            None => Some(self.timeout),
            Some(set) => set.map(|d| d.min(self.timeout)),
        }
    }

    /// See [`username`](Self::username).
    pub fn get_username(&self) -> Option<&str> {
        self.username.as_deref()
    }

    /// See [`sentinel_username`](Self::sentinel_username).
    pub fn get_sentinel_username(&self) -> Option<&str> {
        self.sentinel_username.as_deref()
    }

    /// See [`database`](Self::database).
    pub fn get_database(&self) -> Option<u8> {
        self.database
    }

    /// See [`tls`](Self::tls).
    pub fn get_tls(&self) -> Option<&TlsSettings> {
        self.tls.as_ref()
    }

    /// The configured watchdog timeout (same as
    /// [`get_lock_watchdog_timeout`](Self::get_lock_watchdog_timeout), the getter named like
    /// every other one).
    #[deprecated(note = "use `get_lock_watchdog_timeout`, named like every other getter")]
    pub fn watchdog_timeout(&self) -> Duration {
        self.lock_watchdog_timeout
    }

    // The getters. The setters own the plain names (they are the builder), so the getters are
    // named like Redisson's (`getLockWatchdogTimeout` → `get_lock_watchdog_timeout`).

    /// See [`lock_watchdog_timeout`](Self::lock_watchdog_timeout).
    pub fn get_lock_watchdog_timeout(&self) -> Duration {
        self.lock_watchdog_timeout
    }

    /// See [`local_hand_off`](Self::local_hand_off).
    pub fn get_local_hand_off(&self) -> LocalHandOff {
        self.local_hand_off
    }

    /// See [`lock_watchdog_batch_size`](Self::lock_watchdog_batch_size).
    pub fn get_lock_watchdog_batch_size(&self) -> usize {
        self.lock_watchdog_batch_size
    }

    /// See [`max_renewals`](Self::max_renewals).
    pub fn get_max_renewals(&self) -> Option<u64> {
        self.max_renewals
    }

    /// See [`fair_lock_wait_timeout`](Self::fair_lock_wait_timeout).
    pub fn get_fair_lock_wait_timeout(&self) -> Duration {
        self.fair_lock_wait_timeout
    }

    /// See [`name_mapper`](Self::name_mapper) and [`key_prefix`](Self::key_prefix); `None`
    /// for the identity.
    pub fn get_name_mapper(&self) -> Option<&dyn NameMapper> {
        self.name_mapper.as_deref()
    }

    /// See [`timeout`](Self::timeout).
    pub fn get_timeout(&self) -> Duration {
        self.timeout
    }

    /// See [`connect_timeout`](Self::connect_timeout).
    pub fn get_connect_timeout(&self) -> Duration {
        self.connect_timeout
    }

    /// See [`subscription_timeout`](Self::subscription_timeout).
    pub fn get_subscription_timeout(&self) -> Duration {
        self.subscription_timeout
    }

    /// See [`retry_attempts`](Self::retry_attempts).
    pub fn get_retry_attempts(&self) -> u32 {
        self.retry_attempts
    }

    /// See [`retry_delay`](Self::retry_delay).
    pub fn get_retry_delay(&self) -> Duration {
        self.retry_delay
    }

    /// See [`reconnect_max_delay`](Self::reconnect_max_delay).
    pub fn get_reconnect_max_delay(&self) -> Duration {
        self.reconnect_max_delay
    }

    /// Checks the settings; [`Client::connect`](crate::Client::connect) calls it first.
    ///
    /// Zero is refused where it has no useful meaning: the watchdog timeout (at least 3 ms, at
    /// most [`MAX_MILLIS`]), the batch size, the command, connect and subscription timeouts, the
    /// fair-lock wait timeout, the reconnect delay and the replicas sync timeout. A zero `retry_delay` (retry at once) and
    /// zero `retry_attempts` (no retry) are allowed. `Duration::MAX` is accepted for every
    /// timeout and delay and means "no limit".
    ///
    /// # Errors
    /// [`InvalidArgument`](Error::InvalidArgument) naming the first bad setting.
    pub fn validate(&self) -> Result<()> {
        let non_zero = [
            ("connect_timeout", self.connect_timeout),
            ("subscription_timeout", self.subscription_timeout),
            ("fair_lock_wait_timeout", self.fair_lock_wait_timeout),
            ("reconnect_max_delay", self.reconnect_max_delay),
            ("replicas_sync_timeout", self.replicas_sync_timeout),
            (
                "stalled_connection_timeout",
                self.get_stalled_connection_timeout()
                    .unwrap_or(Duration::MAX),
            ),
        ];
        for (name, value) in non_zero {
            if value.is_zero() {
                return Err(Error::InvalidArgument(format!("{name} must be > 0")));
            }
        }
        let wd = self.lock_watchdog_timeout.as_millis();
        if !(3..=MAX_MILLIS as u128).contains(&wd) {
            return Err(Error::InvalidArgument(format!(
                "lock_watchdog_timeout must be between 3 ms and {MAX_MILLIS} ms, got {wd} ms"
            )));
        }
        if self.lock_watchdog_batch_size == 0 {
            return Err(Error::InvalidArgument(
                "lock_watchdog_batch_size must be at least 1".into(),
            ));
        }
        if self.timeout.is_zero() {
            return Err(Error::InvalidArgument("timeout must be > 0".into()));
        }
        if self.credentials.is_some() && (self.password.is_some() || self.username.is_some()) {
            return Err(Error::InvalidArgument(
                "both credentials and username/password are set; use one".into(),
            ));
        }
        if self.sentinel_credentials.is_some()
            && (self.sentinel_password.is_some() || self.sentinel_username.is_some())
        {
            return Err(Error::InvalidArgument(
                "both sentinel_credentials and sentinel_username/sentinel_password are set; \
                 use one"
                    .into(),
            ));
        }
        Ok(())
    }

    /// The PX of an unlock request's receipt: long enough to cover every retry of one unlock
    /// (at most [`MAX_MILLIS`], so unlimited timeouts stay valid).
    pub(crate) fn receipt_px_ms(&self) -> u64 {
        let per_try = self.timeout.saturating_add(self.retry_delay);
        let total = per_try.saturating_mul(self.retry_attempts.max(1));
        clamp_millis(total).max(1)
    }

    /// The fair-lock wait timeout in milliseconds, at most [`MAX_MILLIS`].
    pub(crate) fn fair_wait_ms(&self) -> u64 {
        clamp_millis(self.fair_lock_wait_timeout)
    }

    /// The replica sync timeout in whole milliseconds (at least 1: `WAIT .. 0` waits forever),
    /// at most [`MAX_MILLIS`].
    pub(crate) fn replicas_sync_ms(&self) -> u64 {
        clamp_millis(self.replicas_sync_timeout).max(1)
    }

    /// The reconnect back-off bound in milliseconds, as the connection layer takes it.
    pub(crate) fn reconnect_max_delay_ms(&self) -> u32 {
        u32::try_from(self.reconnect_max_delay.as_millis()).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stall_bound_follows_the_command_timeout_unless_set() {
        let c = Config::default().timeout(Duration::from_millis(500));
        assert_eq!(
            c.get_stalled_connection_timeout(),
            Some(Duration::from_millis(500))
        );
        let off = c.clone().stalled_connection_timeout(None);
        assert_eq!(off.get_stalled_connection_timeout(), None);
        assert!(off.validate().is_ok());
        let set = c
            .clone()
            .stalled_connection_timeout(Some(Duration::from_millis(200)));
        assert_eq!(
            set.get_stalled_connection_timeout(),
            Some(Duration::from_millis(200))
        );
        let longer = c
            .clone()
            .stalled_connection_timeout(Some(Duration::from_secs(9)));
        assert_eq!(
            longer.get_stalled_connection_timeout(),
            Some(Duration::from_millis(500)),
            "a command fails at its timeout anyway"
        );
        assert!(c
            .stalled_connection_timeout(Some(Duration::ZERO))
            .validate()
            .is_err());
    }

    #[test]
    fn defaults_match_redisson() {
        let c = Config::default();
        assert_eq!(c.lock_watchdog_timeout, Duration::from_secs(30));
        assert_eq!(c.lock_watchdog_batch_size, 100);
        assert_eq!(c.max_renewals, None);
        assert_eq!(c.timeout, Duration::from_secs(3));
        assert_eq!(c.subscription_timeout, Duration::from_millis(7500));
        c.validate().unwrap();
    }

    #[test]
    fn a_zero_watchdog_timeout_is_refused() {
        assert!(Config::default()
            .lock_watchdog_timeout(Duration::ZERO)
            .validate()
            .is_err());
    }

    #[test]
    fn zero_durations_without_a_meaning_are_rejected_by_name() {
        type Set = fn(Config) -> Config;
        let cases: [(&str, Set); 7] = [
            ("lock_watchdog_timeout", |c| {
                c.lock_watchdog_timeout(Duration::ZERO)
            }),
            ("timeout", |c| c.timeout(Duration::ZERO)),
            ("connect_timeout", |c| c.connect_timeout(Duration::ZERO)),
            ("subscription_timeout", |c| {
                c.subscription_timeout(Duration::ZERO)
            }),
            ("fair_lock_wait_timeout", |c| {
                c.fair_lock_wait_timeout(Duration::ZERO)
            }),
            ("reconnect_max_delay", |c| {
                c.reconnect_max_delay(Duration::ZERO)
            }),
            ("replicas_sync_timeout", |c| {
                c.replicas_sync_timeout(Duration::ZERO)
            }),
        ];
        for (name, set) in cases {
            let err = set(Config::default()).validate().unwrap_err();
            assert_eq!(err.kind(), crate::ErrorKind::InvalidArgument, "{name}");
            assert!(err.to_string().contains(name), "{name}: {err}");
        }
        // Retrying at once, or not at all, is meaningful.
        Config::default()
            .retry_delay(Duration::ZERO)
            .retry_attempts(0)
            .max_renewals(Some(0))
            .validate()
            .unwrap();
    }

    #[test]
    fn duration_max_means_no_limit_and_never_overflows() {
        let c = Config::default()
            .timeout(Duration::MAX)
            .connect_timeout(Duration::MAX)
            .subscription_timeout(Duration::MAX)
            .fair_lock_wait_timeout(Duration::MAX)
            .retry_delay(Duration::MAX)
            .retry_attempts(u32::MAX)
            .reconnect_max_delay(Duration::MAX)
            .replicas_sync_timeout(Duration::MAX);
        c.validate().unwrap();
        assert_eq!(c.replicas_sync_ms(), MAX_MILLIS);
        assert_eq!(c.receipt_px_ms(), MAX_MILLIS);
        assert_eq!(c.fair_wait_ms(), MAX_MILLIS);
        assert_eq!(c.reconnect_max_delay_ms(), u32::MAX);
        assert_eq!(Config::default().reconnect_max_delay_ms(), 2000);
    }

    #[test]
    fn every_setter_has_a_matching_getter() {
        let c = Config::default()
            .lock_watchdog_timeout(Duration::from_secs(7))
            .lock_watchdog_batch_size(9)
            .max_renewals(Some(3))
            .fair_lock_wait_timeout(Duration::from_secs(11))
            .key_prefix("p:")
            .timeout(Duration::from_secs(2))
            .connect_timeout(Duration::from_secs(4))
            .subscription_timeout(Duration::from_secs(5))
            .retry_attempts(6)
            .retry_delay(Duration::from_millis(8))
            .reconnect_max_delay(Duration::from_millis(900))
            .check_lock_synced_replicas(false)
            .replicas_sync_timeout(Duration::from_millis(250));
        assert!(!c.get_check_lock_synced_replicas());
        assert_eq!(c.get_replicas_sync_timeout(), Duration::from_millis(250));
        assert!(Config::default().get_check_lock_synced_replicas());
        assert_eq!(
            Config::default().get_replicas_sync_timeout(),
            Duration::from_secs(1)
        );
        assert_eq!(c.get_lock_watchdog_timeout(), Duration::from_secs(7));
        #[allow(deprecated)]
        let deprecated = c.watchdog_timeout();
        assert_eq!(deprecated, Duration::from_secs(7));
        assert_eq!(c.get_lock_watchdog_batch_size(), 9);
        assert_eq!(c.get_max_renewals(), Some(3));
        assert_eq!(c.get_fair_lock_wait_timeout(), Duration::from_secs(11));
        assert_eq!(c.get_name_mapper().map(|m| m.map("x")), Some("p:x".into()));
        assert!(Config::default().get_name_mapper().is_none());
        assert_eq!(c.get_timeout(), Duration::from_secs(2));
        assert_eq!(c.get_connect_timeout(), Duration::from_secs(4));
        assert_eq!(c.get_subscription_timeout(), Duration::from_secs(5));
        assert_eq!(c.get_retry_attempts(), 6);
        assert_eq!(c.get_retry_delay(), Duration::from_millis(8));
        assert_eq!(c.get_reconnect_max_delay(), Duration::from_millis(900));
    }

    #[test]
    fn secrets_never_show_in_debug() {
        let c = Config::default()
            .username("alice")
            .password("pw-S3cret-1")
            .sentinel_username("sam")
            .sentinel_password("pw-S3cret-2")
            .tls(
                TlsSettings::new()
                    .ca_pem(b"-----BEGIN CERTIFICATE-----".to_vec())
                    .client_identity_pem(b"cert".to_vec(), b"pw-S3cret-3".to_vec()),
            );
        let shown = format!("{c:?} {c:#?} {}", Secret::new("pw-S3cret-4"));
        for s in ["pw-S3cret-1", "pw-S3cret-2", "pw-S3cret-3", "pw-S3cret-4"] {
            assert!(!shown.contains(s), "{s} in {shown}");
        }
        assert!(shown.contains("alice") && shown.contains("<redacted>"));
        assert_eq!(c.password.as_ref().map(Secret::expose), Some("pw-S3cret-1"));
    }
}
