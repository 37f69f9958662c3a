//! Back-off schedules of the spin lock (Redisson `LockOptions`).

use std::time::Duration;

/// How long a spin-lock waiter sleeps between attempts.
///
/// ```
/// use std::time::Duration;
/// use redisson_lock::BackOff;
///
/// let mut b = BackOff::exponential(Duration::from_millis(10), Duration::from_millis(100), 3);
/// assert_eq!(b.next_delay(), Duration::from_millis(10));
/// let second = b.next_delay().as_millis();
/// assert!((30..=31).contains(&second));
/// ```
#[derive(Debug, Clone)]
pub struct BackOff {
    kind: Kind,
    calls: u64,
}

#[derive(Debug, Clone)]
enum Kind {
    Exponential {
        next: u64,
        max: u64,
        multiplier: u64,
    },
    Constant(u64),
}

impl Default for BackOff {
    /// Redisson's default: exponential, initial 1 ms, max 128 ms, multiplier 2.
    fn default() -> Self {
        Self::exponential(Duration::from_millis(1), Duration::from_millis(128), 2)
    }
}

impl BackOff {
    /// Exponential back-off: on the n-th call return the current delay d and make the next one
    /// `min(max, d × multiplier + r)` with r random in `[0, n)`; once at max it stays there.
    pub fn exponential(initial: Duration, max: Duration, multiplier: u32) -> Self {
        let max = max.as_millis().max(1) as u64;
        BackOff {
            kind: Kind::Exponential {
                next: (initial.as_millis() as u64).clamp(1, max),
                max,
                multiplier: u64::from(multiplier.max(1)),
            },
            calls: 0,
        }
    }

    /// A constant delay (Redisson's `ConstantBackOff`, default 64 ms).
    pub fn constant(delay: Duration) -> Self {
        BackOff {
            kind: Kind::Constant(delay.as_millis().max(1) as u64),
            calls: 0,
        }
    }

    /// The next sleep.
    pub fn next_delay(&mut self) -> Duration {
        self.calls += 1;
        match &mut self.kind {
            Kind::Constant(d) => Duration::from_millis(*d),
            Kind::Exponential {
                next,
                max,
                multiplier,
            } => {
                let current = *next;
                if current < *max {
                    let jitter = random_below(self.calls);
                    *next = current
                        .saturating_mul(*multiplier)
                        .saturating_add(jitter)
                        .min(*max);
                }
                Duration::from_millis(current)
            }
        }
    }
}

impl crate::engine::Schedule for BackOff {
    fn next_delay(&mut self) -> Duration {
        BackOff::next_delay(self)
    }

    fn boxed(&self) -> crate::engine::AnySchedule {
        Box::new(self.clone())
    }
}

fn random_below(n: u64) -> u64 {
    if n <= 1 {
        return 0;
    }
    let r = u64::from_le_bytes(uuid::Uuid::new_v4().as_bytes()[..8].try_into().unwrap());
    r % n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_backoff_matches_redissons_schedule() {
        // LockOptionsTest.testExponentialBackoff: 10; 30-31; 90-92; 100-103 capped; 100.
        let mut b = BackOff::exponential(Duration::from_millis(10), Duration::from_millis(100), 3);
        let d: Vec<u128> = (0..5).map(|_| b.next_delay().as_millis()).collect();
        assert_eq!(d[0], 10);
        assert!((30..=31).contains(&d[1]), "{d:?}");
        assert!((90..=92).contains(&d[2]), "{d:?}");
        assert_eq!(d[3], 100);
        assert_eq!(d[4], 100);
    }

    #[test]
    fn constant_backoff_is_constant() {
        let mut b = BackOff::constant(Duration::from_millis(30));
        assert!((0..10).all(|_| b.next_delay() == Duration::from_millis(30)));
    }
}
