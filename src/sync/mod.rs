//! The synchronizers Java services share through Redisson besides locks (sync protocol §1–4):
//! [`Semaphore`] (`RSemaphore`), [`PermitExpirableSemaphore`] (`RPermitExpirableSemaphore`)
//! and [`CountDownLatch`] (`RCountDownLatch`).
//!
//! They reuse the lock family's machinery: every call is a [`ScriptCall`] run by the core, a
//! waiter joins the client's one subscription of the object's channel (read as the object's
//! messages mean, [`Reading`]) and waits in the lock engine's waiting loop
//! ([`wait_on_wakeups`]), and acquisitions Redisson syncs to a replica run through the same
//! replica-sync path (`WAIT`) as lock acquisitions.
//!
//! Java's semaphore and latch waiters have no time-based fallback: a missed message leaves them
//! asleep until their deadline. This crate's waiters also re-check after
//! [`Config::lock_watchdog_timeout`](crate::Config::lock_watchdog_timeout) without a message
//! (never sooner, so no busy loop), so a lost message costs at most that long.
//!
//! A wait that meets a transient failure (a command timeout, a lost connection) starts again
//! within its deadline, as a lock wait does, where that is safe: a latch's attempt is a read,
//! and a permit-expirable semaphore's attempt releases the permit it may have taken by its id.
//! A semaphore's attempt is not repeated: its permits are anonymous, so an attempt whose reply
//! was lost cannot be told apart from one that never ran, and trying again could take the
//! permits twice; the error ends the wait and the caller decides.

pub(crate) mod expirable;
pub(crate) mod latch;
pub(crate) mod permit_watch;
pub(crate) mod semaphore;

use std::{
    future::Future,
    time::{Duration, SystemTime, UNIX_EPOCH},
};

use fred::types::Value;
use tokio::time::Instant;

use crate::{
    client::Client,
    conn::{replicas::Synced, scripts::ScriptCall},
    error::{Error, Result},
    lock::{acquire::engine::wait_on_wakeups, kind::Step},
    service::pubsub::Reading,
};

/// The caller's wall clock in epoch milliseconds (Redisson sends `System.currentTimeMillis()`).
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, crate::config::clamp_millis)
}

/// Time left before `deadline` (`None`: no deadline).
fn left(deadline: Option<Instant>) -> Option<Duration> {
    deadline.map(|d| d.saturating_duration_since(Instant::now()))
}

/// Runs a call Redisson syncs to a replica without undoing it (classes S-ONCE and S-RETRY of
/// sync protocol §1.3): the script, then, where the master has replicas and replica sync is on,
/// `WAIT` on the same connection. No replica acknowledging gives
/// [`Error::NotReplicated`]; the call ran on the master and is not run again (a second run of
/// an add would add twice).
async fn run_synced(client: &Client, call: ScriptCall, name: &str) -> Result<Value> {
    let barrier = crate::conn::replicas::Barrier::default();
    let outcome = client
        .core()
        .run_acquire(call, name, None, |_| true, &barrier)
        .await;
    match outcome {
        Ok((_, Synced::Missing { wanted, acked })) => {
            log::warn!("no replica acknowledged the change of {name} in time (the master has it)");
            Err(Error::NotReplicated {
                lock: name.to_owned(),
                wanted,
                acked,
            })
        }
        Ok((value, _)) => Ok(value),
        Err(failure) => Err(failure.error),
    }
}

/// Runs an acquisition attempt as a task of its own, so that a caller dropped while the script
/// is in flight does not leave what it took behind: the task sees that nobody takes its
/// result and hands it to `orphaned` (which gives it back).
async fn detached<T, F, O, OF>(client: &Client, attempt: F, orphaned: O) -> Result<T>
where
    T: Send + 'static,
    F: Future<Output = Result<T>> + Send + 'static,
    O: FnOnce(T) -> OF + Send + 'static,
    OF: Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::oneshot::channel();
    drop(client.spawn(async move {
        let result = attempt.await;
        if let Err(Ok(taken)) = tx.send(result) {
            orphaned(taken).await;
        }
    }));
    rx.await.map_err(|_| Error::Shutdown)?
}

/// How long the subscription barrier may take: the configured subscription timeout, never past
/// the deadline.
fn subscription_wait(client: &Client, deadline: Option<Instant>) -> Duration {
    let limit = client.config().subscription_timeout;
    left(deadline).map_or(limit, |l| l.min(limit))
}

/// The first pause after a transient failure of a wait (it doubles up to the configured retry
/// delay), as for lock waits.
const OUTAGE_PAUSE: Duration = Duration::from_millis(50);

/// The waiting part of an acquisition or an await, after a first attempt found it busy:
/// joins the channel's subscription (read as `reading`), waits for the barrier, then runs the
/// engine's waiting loop ([`wait_on_wakeups`]: attempt, sleep on the wake-ups for min(what the
/// attempt said, time left), again). `Ok(None)` at the deadline.
///
/// A transient failure of the subscription (nothing was taken) starts the wait again after a
/// growing pause, within the deadline; so does one of an attempt when `retry_attempts` says an
/// attempt may be repeated safely (a read, or an attempt whose outcome is undone by itself).
async fn wait_on_channel<T, F, Fut>(
    client: &Client,
    channel: &str,
    reading: Reading,
    deadline: Option<Instant>,
    retry_attempts: bool,
    mut attempt: F,
) -> Result<Option<T>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Step<T>>>,
{
    let config = client.config();
    let max_pause = config.retry_delay.max(OUTAGE_PAUSE);
    let mut pause = OUTAGE_PAUSE;
    loop {
        if left(deadline) == Some(Duration::ZERO) {
            return Ok(None);
        }
        let subscription = client.pubsub().subscribe_as(channel, reading);
        let (error, retryable) = match subscription
            .ready(subscription_wait(client, deadline))
            .await
        {
            Err(e)
                if e.kind() == crate::ErrorKind::Timeout
                    && left(deadline) == Some(Duration::ZERO) =>
            {
                return Ok(None)
            }
            Err(e) => (e, true),
            Ok(()) => match wait_on_wakeups(
                || {
                    let next = attempt();
                    async move {
                        next.await
                            .map(|step| bounded(step, config.lock_watchdog_timeout))
                    }
                },
                &subscription,
                deadline,
                config.lock_watchdog_timeout,
            )
            .await
            {
                Err(e) => (e, retry_attempts),
                done => return done,
            },
        };
        drop(subscription);
        let again = retryable
            && error.is_transient()
            && !matches!(error, Error::NotReplicated { .. })
            && !client.is_closed();
        let remaining = left(deadline);
        if !again || remaining == Some(Duration::ZERO) {
            return Err(error);
        }
        log::debug!("waiting on {channel}: {error}; trying again");
        tokio::time::sleep(remaining.map_or(pause, |r| r.min(pause))).await;
        pause = (pause * 2).min(max_pause);
    }
}

/// A busy attempt's sleep, bounded by `bound` (the watchdog timeout): what the attempt said
/// (the earliest permit's expiry, possibly hours away) or, when it said nothing, `bound`
/// itself, whichever is sooner, so a lost message costs at most `bound` (module docs).
fn bounded<T>(step: Step<T>, bound: Duration) -> Step<T> {
    match step {
        Step::Busy { frees_in } => Step::Busy {
            frees_in: Some(frees_in.map_or(bound, |f| f.min(bound))),
        },
        done => done,
    }
}

/// Retries an acquisition no replica acknowledged (already undone by `once`) after
/// `retry_delay`, at most `retry_attempts` times and within the deadline, as Redisson does
/// (class S-ACQ of sync protocol §1.3). Other outcomes are returned as they are.
async fn retry_unreplicated<T, F, Fut>(
    client: &Client,
    deadline: Option<Instant>,
    once: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let config = client.config();
    retry_within(
        config.retry_attempts,
        config.retry_delay,
        deadline,
        || client.is_closed(),
        once,
    )
    .await
}

/// [`retry_unreplicated`]'s rule, over plain values (unit-tested on paused time): a retry only
/// when its delay ends before the deadline.
async fn retry_within<T, F, Fut>(
    attempts: u32,
    delay: Duration,
    deadline: Option<Instant>,
    closed: impl Fn() -> bool,
    mut once: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut tries = 0;
    loop {
        match once().await {
            Err(e @ Error::NotReplicated { .. }) => {
                if tries >= attempts || closed() || left(deadline).is_some_and(|r| r <= delay) {
                    return Err(e);
                }
                tries += 1;
                tokio::time::sleep(delay).await;
            }
            other => return other,
        }
    }
}

/// A wait given as a duration: `None` (one attempt) for zero, else the deadline (`None` inside
/// when it overflows: without limit).
fn deadline_of(wait: Duration) -> Option<Option<Instant>> {
    if wait.is_zero() {
        None
    } else {
        Some(Instant::now().checked_add(wait))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_busy_attempts_sleep_is_never_longer_than_the_bound() {
        let bound = Duration::from_secs(30);
        let busy = |frees_in| match bounded::<()>(Step::Busy { frees_in }, bound) {
            Step::Busy { frees_in } => frees_in,
            Step::Done(()) => unreachable!(),
        };
        assert_eq!(
            busy(Some(Duration::from_secs(3600))),
            Some(bound),
            "a permit an hour away"
        );
        assert_eq!(
            busy(Some(Duration::from_secs(2))),
            Some(Duration::from_secs(2))
        );
        assert_eq!(busy(None), Some(bound), "nothing said");
        assert!(matches!(bounded(Step::Done(7), bound), Step::Done(7)));
    }

    #[test]
    fn a_zero_wait_is_one_attempt_and_an_overflowing_one_has_no_limit() {
        assert_eq!(deadline_of(Duration::ZERO), None);
        assert_eq!(deadline_of(Duration::MAX), Some(None));
        assert!(matches!(deadline_of(Duration::from_secs(1)), Some(Some(_))));
    }

    fn unreplicated() -> Error {
        Error::NotReplicated {
            lock: "s".into(),
            wanted: 1,
            acked: 0,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn unreplicated_acquisitions_are_retried_after_the_delay_within_the_limits() {
        let ms = Duration::from_millis;
        let start = Instant::now();
        let times = std::sync::Mutex::new(Vec::new());
        // Two unreplicated tries, then taken: retried 100 ms apart.
        let mut replies = vec![Ok(7), Err(unreplicated()), Err(unreplicated())];
        let got = retry_within(
            4,
            ms(100),
            None,
            || false,
            || {
                times.lock().unwrap().push(start.elapsed());
                let reply = replies.pop().unwrap();
                async move { reply }
            },
        )
        .await;
        assert_eq!(got.unwrap(), 7);
        assert_eq!(*times.lock().unwrap(), [ms(0), ms(100), ms(200)]);

        // The attempts run out: the last error is returned.
        let calls = std::sync::atomic::AtomicU32::new(0);
        let got: Result<()> = retry_within(
            2,
            ms(100),
            None,
            || false,
            || {
                calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                async { Err(unreplicated()) }
            },
        )
        .await;
        assert_eq!(got.unwrap_err().kind(), crate::ErrorKind::NotReplicated);
        assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 3);

        // No retry whose delay would end past the deadline; none on a closed client; other
        // errors at once.
        let start = Instant::now();
        let got: Result<()> = retry_within(
            4,
            ms(100),
            Some(start + ms(150)),
            || false,
            || async { Err(unreplicated()) },
        )
        .await;
        assert!(got.is_err());
        assert_eq!(
            start.elapsed(),
            ms(100),
            "one retry fits, the second would not"
        );
        let got: Result<()> =
            retry_within(4, ms(100), None, || true, || async { Err(unreplicated()) }).await;
        assert!(got.is_err());
        let got: Result<()> = retry_within(
            4,
            ms(100),
            None,
            || false,
            || async { Err(Error::Timeout("no reply".into())) },
        )
        .await;
        assert_eq!(got.unwrap_err().kind(), crate::ErrorKind::Timeout);
    }

    #[test]
    fn the_clock_is_epoch_milliseconds() {
        let now = now_ms();
        assert!(now > 1_600_000_000_000 && now < 4_000_000_000_000, "{now}");
    }
}
