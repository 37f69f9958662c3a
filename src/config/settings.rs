//! The `Config` itself: its fields (pub(crate): the crate reads them where it needs them),
//! the table of Redisson's names and defaults, the defaults and the `Debug` that never shows a
//! secret. The builder, the getters and the validation are the rooms beside it.

use std::{fmt, sync::Arc, time::Duration};

use super::{
    credentials::{Credentials, Secret},
    modes::{LocalHandOff, ShardedSubscriptionMode},
    name_mapper::NameMapper,
    tls::TlsSettings,
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
/// | (`shutdown(quietPeriod, timeout, unit)`) | [`shutdown_timeout`](Self::shutdown_timeout) | 5 s |
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
    pub(crate) shutdown_timeout: Duration,
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
            shutdown_timeout: Duration::from_secs(5),
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
            .field("shutdown_timeout", &self.shutdown_timeout)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
