//! The check of the settings, run when the client connects: the first bad setting, by name.

use std::time::Duration;

use super::settings::Config;
use crate::{
    error::{Error, Result},
    types::millis::MAX_MILLIS,
};

impl Config {
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
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
