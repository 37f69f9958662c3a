//! The getters, named like Redisson's (`getLockWatchdogTimeout` → `get_lock_watchdog_timeout`:
//! the setters own the plain names, they are the builder), and the settings in the units the
//! wire and the connection layer take (`receipt_px_ms`, `fair_wait_ms`, ...).

use std::time::Duration;

use super::{
    credentials::Credentials,
    modes::{LocalHandOff, ShardedSubscriptionMode},
    name_mapper::NameMapper,
    settings::Config,
    tls::TlsSettings,
};
use crate::types::millis::clamp_millis;

impl Config {
    /// See [`lock_watchdog_timeout`](Self::lock_watchdog_timeout).
    pub fn get_lock_watchdog_timeout(&self) -> Duration {
        self.lock_watchdog_timeout
    }

    /// The configured watchdog timeout (same as
    /// [`get_lock_watchdog_timeout`](Self::get_lock_watchdog_timeout), the getter named like
    /// every other one).
    #[deprecated(note = "use `get_lock_watchdog_timeout`, named like every other getter")]
    pub fn watchdog_timeout(&self) -> Duration {
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

    /// See [`shutdown_timeout`](Self::shutdown_timeout).
    pub fn get_shutdown_timeout(&self) -> Duration {
        self.shutdown_timeout
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

    /// The configured sharded-subscription mode.
    pub fn get_sharded_subscription_mode(&self) -> ShardedSubscriptionMode {
        self.sharded_subscription_mode
    }

    /// See [`reconnect_max_delay`](Self::reconnect_max_delay).
    pub fn get_reconnect_max_delay(&self) -> Duration {
        self.reconnect_max_delay
    }

    /// See [`username`](Self::username).
    pub fn get_username(&self) -> Option<&str> {
        self.username.as_deref()
    }

    /// See [`sentinel_username`](Self::sentinel_username).
    pub fn get_sentinel_username(&self) -> Option<&str> {
        self.sentinel_username.as_deref()
    }

    /// See [`credentials`](Self::credentials).
    pub fn get_credentials(&self) -> Option<&Credentials> {
        self.credentials.as_ref()
    }

    /// See [`sentinel_credentials`](Self::sentinel_credentials).
    pub fn get_sentinel_credentials(&self) -> Option<&Credentials> {
        self.sentinel_credentials.as_ref()
    }

    /// See [`database`](Self::database).
    pub fn get_database(&self) -> Option<u8> {
        self.database
    }

    /// See [`tls`](Self::tls).
    pub fn get_tls(&self) -> Option<&TlsSettings> {
        self.tls.as_ref()
    }

    /// See [`check_lock_synced_replicas`](Self::check_lock_synced_replicas).
    pub fn get_check_lock_synced_replicas(&self) -> bool {
        self.check_lock_synced_replicas
    }

    /// See [`replicas_sync_timeout`](Self::replicas_sync_timeout).
    pub fn get_replicas_sync_timeout(&self) -> Duration {
        self.replicas_sync_timeout
    }

    /// See [`stalled_connection_timeout`](Self::stalled_connection_timeout): the bound in
    /// effect (`None`: off).
    pub fn get_stalled_connection_timeout(&self) -> Option<Duration> {
        match self.stalled_connection_timeout {
            None => Some(self.timeout),
            Some(set) => set.map(|d| d.min(self.timeout)),
        }
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
    use crate::types::millis::MAX_MILLIS;

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
}
