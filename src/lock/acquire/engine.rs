//! The one acquire engine shared by every lock kind (protocol §4.7).
//!
//! attempt → on failure subscribe (barrier) → attempt again → sleep on the channel's wake-ups
//! for min(TTL, time left) → repeat until acquired or out of time → leave the subscription.
//! Kinds without a channel (the spin lock) sleep a back-off step instead.
//!
//! The waiting loops ([`wait_on_wakeups`], [`wait_with_backoff`]) are written over an attempt
//! function and a wake-up source, so their arithmetic is unit-tested on paused time without
//! Redis.
//!
//! Cancel safety: no task is spawned for an attempt; an attempt dropped with its script in
//! flight hands its outcome to a reconciliation task (see [`Claim::attempt`]). The subscription
//! is a value whose `Drop` leaves the channel; a queued waiter's give-up clean-up (the fair
//! lock's queue exit) and its local-queue ticket run on drop too. So a dropped waiter leaves no
//! subscription, no queue entry, no lock and no watchdog registration.

use std::{future::Future, time::Duration};

use tokio::time::Instant;

use super::claim::{Acquired, Claim, GiveUp};
use crate::acquisitions::line::{Plan, Ticket};
use crate::lock::kinds::backoff::BackOff;
use crate::lock::protocol::{Mode, Step, Waiting};
use crate::{
    error::{Error, Result},
    service::pubsub,
};

/// How long an acquisition may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// One attempt only.
    No,
    /// Until the deadline (`None`: without limit).
    Until(Option<Instant>),
}

impl Wait {
    /// A wait of `d`; zero means one attempt, an overflowing one means "without limit".
    pub(crate) fn for_duration(d: Duration) -> Wait {
        if d.is_zero() {
            Wait::No
        } else {
            Wait::Until(Instant::now().checked_add(d))
        }
    }
}

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

/// Time left before `deadline` (`None`: no deadline).
fn left(deadline: Option<Instant>) -> Option<Duration> {
    deadline.map(|d| d.saturating_duration_since(Instant::now()))
}

/// Runs the acquire protocol for any lock kind: one attempt ([`Wait::No`]), or a wait until
/// acquired or the deadline, after which a queued waiter's give-up clean-up runs (see
/// [`GiveUp`]).
pub(crate) async fn acquire(claim: &Claim, wait: Wait) -> Result<Option<Acquired>> {
    let deadline = match wait {
        Wait::No => {
            // A single try waits at most one command timeout for an earlier ambiguous attempt's
            // reconciliation.
            let bound = crate::config::later(Instant::now(), claim.client.config().timeout);
            return Ok(match claim.attempt(Mode::Once, Some(bound)).await? {
                Step::Done(acquired) => Some(acquired),
                Step::Busy { .. } => None,
            });
        }
        Wait::Until(deadline) => deadline,
    };
    let give_up = GiveUp::arm(claim);
    let outcome = wait_for(claim, deadline).await;
    give_up.settle(matches!(outcome, Ok(Some(_)))).await;
    outcome
}

/// A waiting acquisition: [`wait_once`], started again after a transient failure (a command
/// timeout, a lost connection, an ambiguous attempt, a subscription that could not be made)
/// with a growing pause, until acquired or the caller's deadline; only then is the last error
/// returned. An acquisition no replica acknowledged ([`Error::NotReplicated`], already undone)
/// is tried again after `retry_delay`, at most `retry_attempts` times and within the deadline,
/// as Redisson retries it. Other errors end the wait at once.
async fn wait_for(claim: &Claim, deadline: Option<Instant>) -> Result<Option<Acquired>> {
    let config = claim.client.config();
    let max_pause = config.retry_delay.max(OUTAGE_PAUSE);
    let mut pause = OUTAGE_PAUSE;
    let mut unreplicated = 0;
    loop {
        match wait_once(claim, deadline).await {
            Err(e @ Error::NotReplicated { .. }) => {
                let delay = config.retry_delay;
                if unreplicated >= config.retry_attempts
                    || claim.client.is_closed()
                    || left(deadline).is_some_and(|r| r <= delay)
                {
                    return Err(e);
                }
                unreplicated += 1;
                log::debug!("waiting for {}: {e}; trying again", claim.name());
                tokio::time::sleep(delay).await;
            }
            Err(e) if e.is_transient() && !claim.client.is_closed() => {
                let remaining = left(deadline);
                if remaining == Some(Duration::ZERO) {
                    return Err(e);
                }
                log::debug!("waiting for {}: {e}; trying again", claim.name());
                tokio::time::sleep(remaining.map_or(pause, |r| r.min(pause))).await;
                pause = (pause * 2).min(max_pause);
            }
            other => return other,
        }
    }
}

/// The first pause after a transient failure of a waiting acquisition (it doubles up to the
/// configured retry delay).
const OUTAGE_PAUSE: Duration = Duration::from_millis(50);

/// One waiting acquisition, top to bottom: the waiter's own first attempt (unless the local
/// queue says to queue without one), then the kind's way of waiting: back-off steps, the local
/// queue ([`wait_in_queue`]), or the channel's wake-ups ([`wait_on_wakeups`]).
async fn wait_once(claim: &Claim, deadline: Option<Instant>) -> Result<Option<Acquired>> {
    let mode = Mode::Queued {
        queue_ms: claim.queue_ms,
    };
    let tag = claim.proto.wait_line();
    let queues = claim.client.wait_lines();
    let attempts_first = tag.is_none_or(|tag| {
        queues.attempts_first(
            tag,
            claim.name(),
            claim.client.ledgers().may_hold(&claim.key()),
        )
    });
    if attempts_first {
        if let Step::Done(acquired) = claim.attempt(mode, deadline).await? {
            return Ok(Some(acquired));
        }
        if left(deadline) == Some(Duration::ZERO) {
            return Ok(None);
        }
    }
    let attempt = || claim.attempt(mode, deadline);
    let channel = match claim.proto.waiting() {
        Waiting::BackOff(backoff) => return wait_with_backoff(attempt, backoff, deadline).await,
        Waiting::Channel(channel) => channel,
        Waiting::PerWaiter { prefix } => Waiting::waiter_channel(&prefix, &claim.field),
    };
    if let Some(tag) = tag {
        let ticket = queues.join(tag, claim.name(), &channel);
        return wait_in_queue(claim, ticket, mode, deadline).await;
    }
    let subscription = claim.client.pubsub().subscribe(&channel);
    if !subscribed(claim, &subscription, deadline).await? {
        return Ok(None);
    }
    // A key without a TTL (only left behind by a foreign client) gets the watchdog timeout as a
    // bound instead of an endless wait.
    let fallback = claim.client.config().lock_watchdog_timeout;
    wait_on_wakeups(attempt, &subscription, deadline, fallback).await
}

/// Waits for a subscription's barrier (subscribed, and the subscription confirmed by a round
/// trip on the subscriber connection) for at most the configured subscription timeout, never
/// past the deadline: `Ok(false)` when the deadline passed meanwhile (the caller gives up
/// quietly), an error when the subscription failed or timed out before the deadline.
async fn subscribed(
    claim: &Claim,
    subscription: &pubsub::Subscription,
    deadline: Option<Instant>,
) -> Result<bool> {
    let limit = claim.client.config().subscription_timeout;
    let wait = left(deadline).map_or(limit, |l| l.min(limit));
    match subscription.ready(wait).await {
        Ok(()) => Ok(true),
        Err(e)
            if e.kind() == crate::ErrorKind::Timeout && left(deadline) == Some(Duration::ZERO) =>
        {
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// A waiter of a queueing kind (see `queue`): waits for its turn in the local queue, then, as
/// the head, does what the queue says ([`Ticket::next`]: attempt, wait for a local holder's
/// hand-over, or defer in a contest) and sleeps until a local hand-over, an unlock message or
/// the bound the queue gave (the lock's TTL after a busy attempt). The deadline rule is
/// [`wait_on_wakeups`]'s: a waiter woken at its deadline still tries once.
async fn wait_in_queue(
    claim: &Claim,
    ticket: Ticket,
    mode: Mode,
    deadline: Option<Instant>,
) -> Result<Option<Acquired>> {
    if !ticket.wait_head(deadline).await {
        return Ok(None);
    }
    let subscription = ticket.subscription(claim.client.pubsub());
    if !subscribed(claim, &subscription, deadline).await? {
        return Ok(None);
    }
    let fallback = claim.client.config().lock_watchdog_timeout;
    let mut by_message = false;
    loop {
        let bound = match ticket.next(by_message) {
            Plan::Wait(bound) | Plan::Defer(bound) => bound,
            Plan::Attempt => match claim.attempt(mode, deadline).await? {
                Step::Done(acquired) => {
                    let lasts = Duration::from_millis(claim.lease_ms);
                    ticket.acquired(crate::config::later(acquired.sent_at, lasts));
                    return Ok(Some(acquired));
                }
                Step::Busy { frees_in } => {
                    ticket.busy();
                    frees_in.unwrap_or(fallback)
                }
            },
        };
        let remaining = left(deadline);
        if remaining == Some(Duration::ZERO) {
            return Ok(None);
        }
        let sleep = remaining.map_or(bound, |r| r.min(bound));
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

/// The channel wait: attempt; when busy, sleep on the wake-ups for min(the lock's TTL, time left)
/// — so a missed message costs at most one TTL — and attempt again when woken or when the
/// sleep ends. `fallback` bounds the sleep when the TTL is unknown. A waiter woken by a message
/// always tries once more, even at its deadline, so the wake-up it consumed is never wasted.
pub(crate) async fn wait_on_wakeups<T, F, Fut>(
    mut attempt: F,
    wakeups: &impl Wake,
    deadline: Option<Instant>,
    fallback: Duration,
) -> Result<Option<T>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Step<T>>>,
{
    loop {
        let frees_in = match attempt().await? {
            Step::Done(t) => return Ok(Some(t)),
            Step::Busy { frees_in } => frees_in,
        };
        let remaining = left(deadline);
        if remaining == Some(Duration::ZERO) {
            return Ok(None);
        }
        let bound = frees_in.unwrap_or(fallback);
        let sleep = remaining.map_or(bound, |r| r.min(bound));
        let woken = wakeups.wake_or_timeout(sleep).await;
        if !woken && left(deadline) == Some(Duration::ZERO) {
            return Ok(None);
        }
    }
}

/// The back-off wait (no pub/sub): sleep the next step (never past the deadline), attempt, and
/// repeat until acquired or out of time.
pub(crate) async fn wait_with_backoff<T, F, Fut>(
    mut attempt: F,
    mut backoff: BackOff,
    deadline: Option<Instant>,
) -> Result<Option<T>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Step<T>>>,
{
    loop {
        let step = backoff.next_delay();
        let sleep = left(deadline).map_or(step, |r| r.min(step));
        tokio::time::sleep(sleep).await;
        match attempt().await? {
            Step::Done(t) => return Ok(Some(t)),
            Step::Busy { .. } if left(deadline) == Some(Duration::ZERO) => return Ok(None),
            Step::Busy { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::service::pubsub::Wakeups;

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
        let backoff = BackOff::constant(40 * MS);
        let start = Instant::now();
        let got = wait_with_backoff(|| s.attempt(), backoff, Some(start + 100 * MS)).await;
        assert!(got.unwrap().is_none());
        assert_eq!(s.times(), vec![40 * MS, 80 * MS, 100 * MS]);

        let s = Script::new(&[None]);
        let got = wait_with_backoff(|| s.attempt(), BackOff::constant(25 * MS), None).await;
        assert_eq!(got.unwrap(), Some(50 * MS));
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_error_ends_the_wait_with_that_error() {
        let wakeups = Wakeups::new(1);
        let got: Result<Option<()>> = wait_on_wakeups(
            || async { Err(crate::Error::Timeout("no reply".into())) },
            &wakeups,
            None,
            MS,
        )
        .await;
        assert_eq!(got.unwrap_err().kind(), crate::ErrorKind::Timeout);
    }

    #[test]
    fn a_zero_wait_is_one_attempt_and_an_overflowing_one_has_no_limit() {
        assert_eq!(Wait::for_duration(Duration::ZERO), Wait::No);
        assert_eq!(Wait::for_duration(Duration::MAX), Wait::Until(None));
    }
}
