//! The engine's sleeping between attempts, one loop per place a waiter sleeps: a channel's
//! wake-ups ([`wait_on_wakeups`]), the local wait line of a queueing lock kind
//! ([`wait_in_line`]), the back-off steps ([`wait_with_backoff`]); and the subscription
//! barrier they start with ([`subscribed`]). Written over an attempt function and a wake-up
//! source, so their arithmetic is unit-tested on paused time without Redis.
//!
//! The rules every loop keeps: a sleep lasts at most what the last attempt said (the lock's
//! TTL, the earliest permit's expiry) or, when it said nothing, the fallback (the watchdog
//! timeout), and never past the deadline, so a lost message costs at most one such bound; a
//! waiter woken by a message always tries once more, even at its deadline, so the wake-up it
//! consumed is never wasted; an attempt's error ends the loop with that error (the engine
//! decides whether the wait goes on).

use std::{future::Future, time::Duration};

use tokio::time::Instant;

use super::waiter::{left, AnySchedule, Step, Waiter, Won};
use crate::{
    acquisitions::line::{Plan, Ticket},
    error::Error,
    service::pubsub,
};

/// Something a waiter sleeps on until a message wakes it.
pub(crate) trait Wake {
    /// Sleeps until woken or `max` passes; `true` when woken.
    fn wake_or_timeout(&self, max: Duration) -> impl Future<Output = bool> + Send;
}

impl Wake for pubsub::Subscription {
    fn wake_or_timeout(&self, max: Duration) -> impl Future<Output = bool> + Send {
        self.wait(Some(max))
    }
}

impl Wake for pubsub::Wakeups {
    fn wake_or_timeout(&self, max: Duration) -> impl Future<Output = bool> + Send {
        self.wait(Some(max))
    }
}

/// Waits for a subscription's barrier (subscribed, and the subscription confirmed by a round
/// trip on the subscriber connection) for at most the configured subscription timeout, never
/// past the deadline: `Ok(false)` when the deadline passed meanwhile (the caller gives up
/// quietly), an error when the subscription failed or timed out before the deadline.
///
/// A plain function returning the wait (its bound computed at the call): a parked waiter's
/// future holds this one while the subscription settles, and an `async fn` kept its arguments
/// beside the wait.
pub(crate) fn subscribed<'a, W: Waiter>(
    waiter: &W,
    subscription: &'a pubsub::Subscription,
    deadline: Option<Instant>,
) -> impl Future<Output = Result<bool, Error>> + 'a {
    let limit = waiter.config().subscription_timeout;
    let ready = subscription.ready(left(deadline).map_or(limit, |l| l.min(limit)));
    // A combinator, not an `async` block: a block awaiting a future it captured keeps it twice.
    futures::FutureExt::map(ready, move |ready| match ready {
        Ok(()) => Ok(true),
        Err(e)
            if e.kind() == crate::error::ErrorKind::Timeout
                && left(deadline) == Some(Duration::ZERO) =>
        {
            Ok(false)
        }
        Err(e) => Err(e),
    })
}

/// The channel wait: attempt; when busy, sleep on the wake-ups for min(what the attempt said,
/// time left), `fallback` when it said nothing, and attempt again when woken or when the sleep
/// ends.
#[allow(clippy::manual_async_fn)] // Arguments kept once: see `engine::shell`'s docs.
pub(crate) fn wait_on_wakeups<'a, T, E, F, Fut>(
    mut attempt: F,
    wakeups: &'a impl Wake,
    deadline: Option<Instant>,
    fallback: Duration,
) -> impl Future<Output = Result<Option<T>, E>> + 'a
where
    F: FnMut() -> Fut + 'a,
    Fut: Future<Output = Result<Step<T>, E>> + 'a,
    T: 'a,
    E: 'a,
{
    async move {
        loop {
            let frees_in = match attempt().await? {
                Step::Done(t) => return Ok(Some(t)),
                Step::Busy { frees_in } => frees_in,
            };
            // How long to sleep, computed in a block of its own: nothing of it is kept across
            // the sleep (every parked waiter carries this state).
            let sleep = {
                let remaining = left(deadline);
                if remaining == Some(Duration::ZERO) {
                    return Ok(None);
                }
                let bound = frees_in.unwrap_or(fallback);
                remaining.map_or(bound, |r| r.min(bound))
            };
            let woken = wakeups.wake_or_timeout(sleep).await;
            if !woken && left(deadline) == Some(Duration::ZERO) {
                return Ok(None);
            }
        }
    }
}

/// The back-off wait (no pub/sub): sleep the next step (never past the deadline), attempt, and
/// repeat until done or out of time.
#[allow(clippy::manual_async_fn)] // Arguments kept once: see `engine::shell`'s docs.
pub(crate) fn wait_with_backoff<T, E, F, Fut>(
    mut attempt: F,
    mut backoff: AnySchedule,
    deadline: Option<Instant>,
) -> impl Future<Output = Result<Option<T>, E>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Step<T>, E>>,
{
    async move {
        loop {
            let sleep = {
                let step = backoff.next_delay();
                left(deadline).map_or(step, |r| r.min(step))
            };
            tokio::time::sleep(sleep).await;
            match attempt().await? {
                Step::Done(t) => return Ok(Some(t)),
                Step::Busy { .. } if left(deadline) == Some(Duration::ZERO) => return Ok(None),
                Step::Busy { .. } => {}
            }
        }
    }
}

/// A waiter in a local wait line (see `acquisitions::line`): waits for its turn, then, as the
/// head, does what the line says ([`Ticket::next`]: attempt, wait for a local holder's
/// hand-over, or defer in a contest) and sleeps until a local hand-over, a message on the
/// line's one subscription, or the bound the line gave (what a busy attempt said). The
/// deadline rule is [`wait_on_wakeups`]'s; a failed subscription is an `E` made from its
/// error. The line's subscription is put in `kept` (the engine keeps it for its next round).
#[allow(clippy::manual_async_fn)] // Arguments kept once: see `engine::shell`'s docs.
pub(crate) fn wait_in_line<'a, W, E, F, Fut>(
    waiter: &'a W,
    ticket: Ticket,
    deadline: Option<Instant>,
    kept: &'a mut Option<std::sync::Arc<pubsub::Subscription>>,
    mut attempt: F,
) -> impl Future<Output = Result<Option<Won<W::Won>>, E>> + 'a
where
    W: Waiter,
    E: From<Error> + 'a,
    F: FnMut() -> Fut + 'a,
    Fut: Future<Output = Result<Step<Won<W::Won>>, E>> + 'a,
{
    async move {
        // Waiting for the headship and for the subscription's barrier are boxed, and only when
        // there is a wait (a line's only waiter is its head; a channel is subscribed once): a
        // parked waiter's future is as large as its largest state, and these two were larger
        // than the parked one.
        if !ticket.head_now() && !Box::pin(ticket.wait_head(deadline)).await {
            return Ok(None);
        }
        let subscription = ticket.subscription(waiter.client().pubsub());
        *kept = Some(subscription.clone());
        if !subscription.is_ready()
            && !Box::pin(subscribed(waiter, &subscription, deadline)).await?
        {
            return Ok(None);
        }
        let mut by_message = false;
        loop {
            // How long to sleep, computed in a block of its own: nothing of it is kept across
            // the sleep (every parked waiter carries this state).
            let sleep = {
                let bound = match ticket.next(by_message) {
                    Plan::Wait(bound) | Plan::Defer(bound) => bound,
                    Plan::Attempt => {
                        let frees_in = match attempt().await? {
                            Step::Done(won) => {
                                ticket.acquired(waiter.lasts_until(won.get()));
                                return Ok(Some(won));
                            }
                            Step::Busy { frees_in } => frees_in,
                        };
                        // In a contest among several other clients the line counts who has had the
                        // lock: one query, while the messages wait as permits. (Outside the match
                        // above: the step's slot is not kept across this await.)
                        let holder = if ticket.asks_holder() {
                            let core = waiter.client().core();
                            core.holder_of(waiter.name()).await.ok().flatten()
                        } else {
                            None
                        };
                        ticket.busy(holder.as_deref(), waiter.client().id());
                        // A lock without a TTL: the watchdog timeout bounds the sleep.
                        frees_in.unwrap_or(waiter.config().lock_watchdog_timeout)
                    }
                };
                match left(deadline) {
                    Some(Duration::ZERO) => return Ok(None),
                    remaining => remaining.map_or(bound, |r| r.min(bound)),
                }
            };
            let (woken, message) = tokio::select! {
                () = ticket.notified() => (true, false),
                woken = subscription.wait(Some(sleep)) => (woken, woken),
            };
            by_message = message;
            if !woken && left(deadline) == Some(Duration::ZERO) {
                return Ok(None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::{engine::waiter::Every, error::Result, service::pubsub::Wakeups};

    const MS: Duration = Duration::from_millis(1);

    /// A scripted lock: busy with the given TTLs, then acquired. Records when each attempt ran.
    #[derive(Clone)]
    struct Script {
        replies: Arc<Mutex<Vec<Option<Duration>>>>,
        times: Arc<Mutex<Vec<Duration>>>,
        start: Instant,
    }

    impl Script {
        fn new(busy: &[Option<Duration>]) -> Self {
            Self {
                replies: Arc::new(Mutex::new(busy.iter().rev().copied().collect())),
                times: Arc::default(),
                start: Instant::now(),
            }
        }

        fn attempt(&self) -> impl Future<Output = Result<Step<Duration>>> {
            let at = self.start.elapsed();
            self.times.lock().unwrap().push(at);
            let next = self.replies.lock().unwrap().pop();
            async move {
                Ok(match next {
                    Some(frees_in) => Step::Busy { frees_in },
                    None => Step::Done(at),
                })
            }
        }

        fn times(&self) -> Vec<Duration> {
            self.times.lock().unwrap().clone()
        }
    }

    const FOREVER: Option<Duration> = Some(Duration::from_secs(3600));

    #[tokio::test(start_paused = true)]
    async fn without_messages_each_sleep_is_bounded_by_the_ttl() {
        let s = Script::new(&[Some(300 * MS), Some(200 * MS)]);
        let wakeups = Wakeups::new(1);
        let got = wait_on_wakeups(|| s.attempt(), &wakeups, None, 30_000 * MS).await;
        assert_eq!(got.unwrap(), Some(500 * MS));
        assert_eq!(s.times(), vec![Duration::ZERO, 300 * MS, 500 * MS]);
    }

    #[tokio::test(start_paused = true)]
    async fn an_unknown_ttl_sleeps_the_fallback() {
        let s = Script::new(&[None]);
        let wakeups = Wakeups::new(1);
        let got = wait_on_wakeups(|| s.attempt(), &wakeups, None, 1_000 * MS).await;
        assert_eq!(got.unwrap(), Some(1_000 * MS));
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_ends_the_wait_exactly() {
        let s = Script::new(&[FOREVER, FOREVER, FOREVER]);
        let wakeups = Wakeups::new(1);
        let start = Instant::now();
        let deadline = Some(start + 700 * MS);
        let got = wait_on_wakeups(|| s.attempt(), &wakeups, deadline, 30_000 * MS).await;
        assert!(got.unwrap().is_none());
        assert_eq!(start.elapsed(), 700 * MS);
        assert_eq!(
            s.times(),
            vec![Duration::ZERO],
            "no attempt after an unwoken timeout"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_message_wakes_the_waiter_for_an_immediate_retry() {
        let s = Script::new(&[FOREVER]);
        let wakeups = Arc::new(Wakeups::new(1));
        let waker = {
            let wakeups = wakeups.clone();
            tokio::spawn(async move {
                tokio::time::sleep(120 * MS).await;
                wakeups.wake_one();
            })
        };
        let got = wait_on_wakeups(|| s.attempt(), &*wakeups, None, 30_000 * MS).await;
        assert_eq!(
            got.unwrap(),
            Some(120 * MS),
            "retried the moment the message came"
        );
        waker.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn a_wake_up_while_still_busy_costs_one_attempt_then_the_deadline_holds() {
        let s = Script::new(&[FOREVER, FOREVER, FOREVER]);
        let wakeups = Arc::new(Wakeups::new(1));
        let start = Instant::now();
        let waker = {
            let wakeups = wakeups.clone();
            tokio::spawn(async move {
                tokio::time::sleep(100 * MS).await;
                wakeups.wake_one();
            })
        };
        let got = wait_on_wakeups(
            || s.attempt(),
            &*wakeups,
            Some(start + 300 * MS),
            30_000 * MS,
        );
        assert!(got.await.unwrap().is_none());
        assert_eq!(start.elapsed(), 300 * MS);
        assert_eq!(s.times(), vec![Duration::ZERO, 100 * MS]);
        waker.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn backoff_sleeps_follow_the_schedule_and_stop_at_the_deadline() {
        let s = Script::new(&[None, None, None, None, None]);
        let backoff = Box::new(Every(40 * MS));
        let start = Instant::now();
        let got = wait_with_backoff(|| s.attempt(), backoff, Some(start + 100 * MS)).await;
        assert!(got.unwrap().is_none());
        assert_eq!(s.times(), vec![40 * MS, 80 * MS, 100 * MS]);

        let s = Script::new(&[None]);
        let got = wait_with_backoff(|| s.attempt(), Box::new(Every(25 * MS)), None).await;
        assert_eq!(got.unwrap(), Some(50 * MS));
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_error_ends_the_wait_with_that_error() {
        let wakeups = Wakeups::new(1);
        let got: Result<Option<()>> = wait_on_wakeups(
            || async { Err(crate::error::Error::Timeout("no reply".into())) },
            &wakeups,
            None,
            MS,
        )
        .await;
        assert_eq!(got.unwrap_err().kind(), crate::error::ErrorKind::Timeout);
    }
}
