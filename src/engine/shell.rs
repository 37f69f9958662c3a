//! The one acquire engine (protocol §4.7, sync protocol §2–4): the wait/retry/undo/cancel
//! shell every [`Waiter`] runs in — an owner's claim to a lock of any kind, a semaphore's
//! taking of permits, a permit-expirable semaphore's taking of a permit, a latch's look at its
//! count.
//!
//! A single try is one attempt. A wait is rounds of: attempt → on busy, subscribe (barrier) →
//! attempt again → sleep on the channel's wake-ups for min(what the attempt said, time left) →
//! repeat until done or out of time → leave the subscription. Waiters without a channel (the
//! spin lock) sleep back-off steps instead; a queueing lock kind's waiters wait in the local
//! wait line first (`sleep`). Around every attempt and every round:
//! * an attempt no replica acknowledged (undone by the attempt: [`Error::NotReplicated`]) is
//!   tried again after `retry_delay`, at most `retry_attempts` times in a row and within the
//!   deadline, as Redisson retries it ([`retry_unreplicated`]);
//! * a round that failed on a transient error (a command timeout, a lost connection, an
//!   ambiguous attempt, a subscription that could not be made) starts again after a growing
//!   pause, within the deadline — unless an attempt failed and the waiter's attempts cannot be
//!   repeated ([`Waiter::repeatable`]); only at the deadline is the last error returned. The
//!   failed round's subscription is kept until the next one has joined it: the channel is not
//!   left and subscribed anew (which could fail where the registry is retrying it);
//! * a wait that ends without success runs the waiter's give-up clean-up ([`GiveUp`]).
//!
//! Cancel safety: the stretch of an attempt that may take something is never cut short
//! ([`detach`](super::waiter::detach): a dropped caller hands it to a task of its own), so a dropped waiter leaves nothing behind: what the
//! attempt won reaches nobody and undoes itself. The subscription is a value whose `Drop`
//! leaves the channel; the wait line's ticket leaves the line on drop; the give-up clean-up
//! runs in the background if the wait is dropped. So a dropped waiter leaves no subscription,
//! no queue entry, no lock, no permit and no watchdog registration.
//!
//! # The size of a waiting acquisition
//! A parked waiter's future is as large as its largest state, nested through every function
//! below, and ten thousand waiters carry ten thousand of them. So the waiting functions are
//! plain functions returning an `async` block (an `async fn` keeps its arguments twice: as
//! received and as moved into its body, in every state); an attempt is inline only up to its
//! turn (the rest is boxed, allocated once it has a turn); no outcome, bound or pause is kept
//! across an await it does not need to cross (what a sleep is bounded by is computed in a block
//! that ends before it; the outage pause is kept as a count of doublings); and a future awaited
//! as the last step is wrapped with a combinator, not awaited in an `async` block (which keeps
//! it twice: captured and awaited); a round awaits one future whichever way it sleeps, none of
//! them inside the `match` that picks it (the scrutinee would be kept through the await); and a
//! wait that is larger than the parked state and rare (a place in line behind other local
//! waiters, a channel's first subscription barrier) is boxed when it happens. A lock's parked
//! acquisition went from 1 440 to 880 bytes, then to 728, then to 600 (`-Zprint-type-sizes`).

use std::{future::Future, sync::Arc, time::Duration};

use futures::future::Either;
use tokio::time::Instant;

use super::{
    sleep::{subscribed, wait_in_line, wait_on_wakeups, wait_with_backoff},
    waiter::{left, SleepOn, Step, Turn, Wait, Waiter, Won},
};
use crate::{
    error::{Error, Result},
    service::pubsub,
};

/// The first pause after a transient failure of a wait (it doubles up to the configured retry
/// delay).
pub(crate) const OUTAGE_PAUSE: Duration = Duration::from_millis(50);

/// What an acquisition's observation names besides the waiter's own name: the object kind
/// (a lock kind's name, `semaphore`...), the owner field (empty for a synchronizer), the wait
/// and the lease the caller asked for.
pub(crate) struct Observed<'a> {
    pub(crate) kind: &'static str,
    pub(crate) owner: &'a str,
    pub(crate) wait: Option<Duration>,
    pub(crate) lease: Option<Duration>,
}

/// The engine's entry: runs `waiter` for a caller that waits `wait` (see [`run`]), observed
/// from its start to its outcome (`observe::Acquisition`: the span, the waiter gauges, the
/// outcome's counters and timing; dropped before it ends, counted as cancelled). The
/// observation wraps the run in place, so a waiting acquisition's future is its own size,
/// once.
pub(crate) fn acquire<'a, W: Waiter>(
    waiter: &'a W,
    wait: Wait,
    seen: Observed<'a>,
) -> impl std::future::Future<Output = Result<Option<Won<W::Won>>>> + 'a {
    crate::observe::Acquisition::observe(
        seen.kind,
        waiter.name(),
        seen.owner,
        seen.wait,
        seen.lease,
        run(waiter, wait),
    )
}

/// Runs `waiter` for a caller that waits `wait`: one attempt ([`Wait::Once`]), or a wait until
/// done or the deadline, after which a waiter's give-up clean-up runs (see [`GiveUp`]).
/// `Ok(None)`: busy, or the deadline passed.
#[allow(clippy::manual_async_fn)] // Arguments kept once: see the module docs.
fn run<W: Waiter>(
    waiter: &W,
    wait: Wait,
) -> impl Future<Output = Result<Option<Won<W::Won>>>> + '_ {
    async move {
        match wait {
            Wait::Once => {
                let step = if W::RETRIES_UNREPLICATED_ONCE {
                    retry_unreplicated(waiter, wait).await?
                } else {
                    attempt(waiter, wait).await?
                };
                Ok(match step {
                    Step::Done(won) => Some(won),
                    Step::Busy { .. } => None,
                })
            }
            Wait::Until(deadline) => {
                let mut give_up = GiveUp::arm(waiter);
                // Only what is returned is kept across the give-up call, and only there (not the
                // outcome, not past its block: a waiting acquisition's future is as large as its
                // largest state, and a value kept across two awaits is in every state).
                {
                    let failed = match wait_until(waiter, deadline).await {
                        Ok(Some(won)) => {
                            give_up.disarm();
                            return Ok(Some(won));
                        }
                        Ok(None) => None,
                        Err(e) => Some(e),
                    };
                    give_up.settle().await;
                    if let Some(e) = failed {
                        return Err(e);
                    }
                }
                if !W::LOOKS_AGAIN_AT_DEADLINE {
                    return Ok(None);
                }
                // A single try: the wait is over, nothing may queue.
                Ok(match attempt(waiter, Wait::Once).await? {
                    Step::Done(won) => Some(won),
                    Step::Busy { .. } => None,
                })
            }
        }
    }
}

/// Why a round of a wait failed: its error, and whether an attempt failed (its outcome unknown
/// to the caller) or something around the attempts (a subscription: nothing was taken).
#[derive(Debug)]
struct RoundError {
    error: Error,
    in_attempt: bool,
}

impl RoundError {
    fn of_attempt(error: Error) -> Self {
        RoundError {
            error,
            in_attempt: true,
        }
    }
}

impl From<Error> for RoundError {
    fn from(error: Error) -> Self {
        RoundError {
            error,
            in_attempt: false,
        }
    }
}

/// A waiting call: [`round`]s, the next one started after a transient failure with a growing
/// pause (see the module docs), until done or the deadline.
#[allow(clippy::manual_async_fn)] // Arguments kept once: see the module docs.
fn wait_until<W: Waiter>(
    waiter: &W,
    deadline: Option<Instant>,
) -> impl Future<Output = Result<Option<Won<W::Won>>>> + '_ {
    async move {
        // The pause before the next round: `OUTAGE_PAUSE` doubled once per failed round, at
        // most the retry delay (or `OUTAGE_PAUSE`). Kept as the count of doublings (every
        // parked waiter carries this state).
        let mut doublings = 0u32;
        // The last round's subscription, kept through the pause and into the next round (which
        // joins it again before this is replaced): a failed round does not leave the channel. Left
        // and joined again, a channel is subscribed anew, and a new subscription can fail where the
        // existing one is being retried by the registry (a channel refused for a while).
        let mut kept = None;
        loop {
            let RoundError { error, in_attempt } = match round(waiter, deadline, &mut kept).await {
                Ok(won) => return Ok(won),
                Err(failure) => failure,
            };
            let again = error.is_transient()
                && !matches!(error, Error::NotReplicated { .. })
                && !waiter.is_closed()
                && (!in_attempt || waiter.repeatable());
            let remaining = left(deadline);
            if !again || remaining == Some(Duration::ZERO) {
                return Err(error);
            }
            log::debug!("waiting for {}: {error:#}; trying again", waiter.name());
            let max_pause = waiter.config().retry_delay.max(OUTAGE_PAUSE);
            let pause = OUTAGE_PAUSE
                .checked_mul(1 << doublings.min(20))
                .map_or(max_pause, |p| p.min(max_pause));
            doublings = doublings.saturating_add(1);
            tokio::time::sleep(remaining.map_or(pause, |r| r.min(pause))).await;
        }
    }
}

/// One round of a wait, top to bottom: the waiter's own first attempt (unless it queues
/// without one), then its sleeping: back-off steps, the local wait line, or the channel's
/// wake-ups, each attempt retried while unreplicated.
/// The channel subscription it sleeps on is put in `kept` (see [`wait_until`]).
#[allow(clippy::manual_async_fn)] // Arguments kept once: see the module docs.
fn round<'a, W: Waiter>(
    waiter: &'a W,
    deadline: Option<Instant>,
    kept: &'a mut Option<Arc<pubsub::Subscription>>,
) -> impl Future<Output = std::result::Result<Option<Won<W::Won>>, RoundError>> + 'a {
    async move {
        let wait = Wait::Until(deadline);
        let attempt = || async move {
            retry_unreplicated(waiter, wait)
                .await
                .map_err(RoundError::of_attempt)
        };
        if waiter.attempts_first() {
            if let Step::Done(won) = attempt().await? {
                return Ok(Some(won));
            }
            if left(deadline) == Some(Duration::ZERO) {
                return Ok(None);
            }
        }
        // One future awaited, whichever way the waiter sleeps: what each way keeps (the
        // backoff, the line's ticket, the channel's subscription) is inside its own future, not
        // a local of this block beside the others' (a local kept across one await is laid out
        // beside every await's future), and none is awaited inside the match (its scrutinee, a
        // temporary, would be kept through the await).
        let sleeping = match waiter.sleep_on() {
            SleepOn::BackOff(backoff) => {
                Either::Left(wait_with_backoff(attempt, backoff, deadline))
            }
            SleepOn::Channel { channel, reading } => {
                let client = waiter.client();
                Either::Right(match waiter.wait_line() {
                    Some(line) => {
                        let ticket = client
                            .wait_lines()
                            .join(line, waiter.shared_name(), channel);
                        Either::Left(wait_in_line(waiter, ticket, deadline, kept, attempt))
                    }
                    None => {
                        let subscription =
                            Arc::new(client.pubsub().subscribe_as(&channel, reading));
                        *kept = Some(subscription.clone());
                        Either::Right(wait_on_channel(waiter, subscription, deadline, attempt))
                    }
                })
            }
        };
        sleeping.await
    }
}

/// The channel wait of a waiter without a wait line: the subscription's barrier, then the
/// wake-ups ([`wait_on_wakeups`]).
#[allow(clippy::manual_async_fn)] // Arguments kept once: see the module docs.
fn wait_on_channel<'a, W, F, Fut>(
    waiter: &'a W,
    subscription: Arc<pubsub::Subscription>,
    deadline: Option<Instant>,
    attempt: F,
) -> impl Future<Output = std::result::Result<Option<Won<W::Won>>, RoundError>> + 'a
where
    W: Waiter,
    F: FnMut() -> Fut + 'a,
    Fut: Future<Output = std::result::Result<Step<Won<W::Won>>, RoundError>> + 'a,
{
    async move {
        // Boxed, and only when there is a wait (see `wait_in_line`).
        if !subscription.is_ready()
            && !Box::pin(subscribed(waiter, &subscription, deadline)).await?
        {
            return Ok(None);
        }
        // A lock without a TTL (only left behind by a foreign client), a semaphore without
        // permits: the watchdog timeout bounds the sleep instead of an endless wait.
        let fallback = waiter.config().lock_watchdog_timeout;
        wait_on_wakeups(attempt, &*subscription, deadline, fallback).await
    }
}

/// One attempt, in one of the client's turns ([`Waiter::turns`]: taken before anything of
/// the attempt exists, given back when it ends). Boxed: an attempt's future is most of a
/// waiting acquisition's size and only needed while it runs; inline, every sleeping waiter
/// would carry its slot (one allocation per attempt instead, freed before the waiter sleeps).
#[allow(clippy::manual_async_fn)] // Arguments kept once: see the module docs.
fn attempt<W: Waiter>(
    waiter: &W,
    wait: Wait,
) -> impl Future<Output = Result<Step<Won<W::Won>>>> + '_ {
    async move {
        let mut turn = Turn::take(waiter.turns()).await?;
        Box::pin(waiter.attempt(wait, &mut turn)).await
    }
}

/// One attempt, tried again while no replica acknowledges it (each was undone): after
/// `retry_delay`, at most `retry_attempts` times in a row, only when the delay ends before the
/// deadline, and not on a closed client. Other outcomes are returned as they are.
///
/// Inline and small (the pause between tries is boxed: it is rare), so nothing is allocated
/// for an attempt before it has its turn: ten thousand waiters starting at once would
/// otherwise each leave an allocation waiting for a turn, freed between the long-lived ones.
#[allow(clippy::manual_async_fn)] // Arguments kept once: see the module docs.
fn retry_unreplicated<W: Waiter>(
    waiter: &W,
    wait: Wait,
) -> impl Future<Output = Result<Step<Won<W::Won>>>> + '_ {
    async move {
        let config = waiter.config();
        let (attempts, delay) = (config.retry_attempts, config.retry_delay);
        let mut tries = 0;
        loop {
            // The failure is not kept across the pause (nor is the outcome it came in).
            {
                let e = match attempt(waiter, wait).await {
                    Err(e @ Error::NotReplicated { .. }) => e,
                    other => return other,
                };
                if tries >= attempts
                    || waiter.is_closed()
                    || left(wait.deadline()).is_some_and(|r| r <= delay)
                {
                    return Err(e);
                }
                log::debug!("acquiring {}: {e:#}; trying again", waiter.name());
            }
            tries += 1;
            Box::pin(tokio::time::sleep(delay)).await;
        }
    }
}

/// A waiter's give-up clean-up (the fair lock's queue exit): run when the wait ends without
/// success ([`settle`](Self::settle)), or in the background if the waiting future is dropped
/// first, including while that call runs.
pub(crate) struct GiveUp<'a, W: Waiter> {
    waiter: &'a W,
    armed: bool,
}

impl<'a, W: Waiter> GiveUp<'a, W> {
    pub(crate) fn arm(waiter: &'a W) -> Self {
        GiveUp {
            waiter,
            armed: true,
        }
    }

    /// The wait succeeded: nothing to clean up.
    pub(crate) fn disarm(&mut self) {
        self.armed = false;
    }

    /// The wait ended without success: the give-up call runs now (a transient failure hands
    /// it to the background, so the caller returns at its own deadline and the entry still
    /// leaves the queue).
    pub(crate) async fn settle(&mut self) {
        match self.waiter.give_up().await {
            Ok(()) => {}
            Err(e) if e.is_transient() => self.waiter.give_up_in_background(),
            Err(e) => log::warn!("give-up clean-up of {} failed: {e:#}", self.waiter.name()),
        }
        self.armed = false;
    }
}

impl<W: Waiter> Drop for GiveUp<'_, W> {
    fn drop(&mut self) {
        if self.armed {
            self.waiter.give_up_in_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex,
    };

    use super::*;
    use crate::{
        client::Client,
        config::Config,
        engine::{waiter::Every, Orphan},
    };

    const MS: Duration = Duration::from_millis(1);

    /// What a scripted attempt does.
    #[derive(Clone, Copy, Debug)]
    enum Reply {
        Busy,
        Done,
        Lost,
        Unreplicated,
        Refused,
    }

    /// Counts its undoing.
    struct Undo(Arc<AtomicUsize>);

    impl Orphan for Undo {
        fn orphaned(self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A waiter that sleeps back-off steps of 10 ms, with scripted attempt replies (then busy),
    /// recording when each attempt ran and counting its give-ups (`ONCE`: whether a single try
    /// is retried while unreplicated, a synchronizer's rule).
    struct Scripted<const ONCE: bool = false, const LOOK: bool = false> {
        config: Config,
        replies: Mutex<Vec<Reply>>,
        attempts: Mutex<Vec<(Duration, Wait)>>,
        repeatable: bool,
        give_ups: AtomicUsize,
        in_background: AtomicUsize,
        undone: Arc<AtomicUsize>,
        start: Instant,
    }

    impl<const ONCE: bool, const LOOK: bool> Scripted<ONCE, LOOK> {
        fn new(replies: &[Reply], repeatable: bool) -> Self {
            let config = Config::default().retry_attempts(3).retry_delay(100 * MS);
            Self {
                config,
                replies: Mutex::new(replies.iter().rev().copied().collect()),
                attempts: Mutex::default(),
                repeatable,
                give_ups: AtomicUsize::new(0),
                in_background: AtomicUsize::new(0),
                undone: Arc::default(),
                start: Instant::now(),
            }
        }

        fn times(&self) -> Vec<Duration> {
            self.attempts.lock().unwrap().iter().map(|a| a.0).collect()
        }
    }

    impl<const ONCE: bool, const LOOK: bool> Waiter for Scripted<ONCE, LOOK> {
        type Won = Undo;
        const RETRIES_UNREPLICATED_ONCE: bool = ONCE;
        const LOOKS_AGAIN_AT_DEADLINE: bool = LOOK;

        fn client(&self) -> &Client {
            unreachable!("a back-off waiter needs no client")
        }
        fn turns(&self) -> Option<&tokio::sync::Semaphore> {
            None
        }
        fn config(&self) -> &Config {
            &self.config
        }
        fn is_closed(&self) -> bool {
            false
        }
        fn name(&self) -> &str {
            "scripted"
        }
        async fn attempt(&self, wait: Wait, _turn: &mut Turn<'_>) -> Result<Step<Won<Undo>>> {
            self.attempts
                .lock()
                .unwrap()
                .push((self.start.elapsed(), wait));
            let reply = self.replies.lock().unwrap().pop().unwrap_or(Reply::Busy);
            match reply {
                Reply::Busy => Ok(Step::Busy { frees_in: None }),
                Reply::Done => Ok(Step::Done(Won::new(Undo(self.undone.clone())))),
                Reply::Lost => Err(Error::Timeout("no reply".into())),
                Reply::Unreplicated => Err(Error::NotReplicated {
                    lock: "scripted".into(),
                    wanted: 1,
                    acked: 0,
                }),
                Reply::Refused => Err(Error::InvalidArgument("refused".into())),
            }
        }
        fn repeatable(&self) -> bool {
            self.repeatable
        }
        fn sleep_on(&self) -> SleepOn {
            SleepOn::BackOff(Box::new(Every(10 * MS)))
        }
        async fn give_up(&self) -> Result<()> {
            self.give_ups.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        fn give_up_in_background(&self) {
            self.in_background.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A lock's waiter (a single try is not retried while unreplicated).
    fn scripted(replies: &[Reply], repeatable: bool) -> Scripted {
        Scripted::new(replies, repeatable)
    }

    fn until(ms: u32) -> Wait {
        Wait::Until(Some(Instant::now() + ms * MS))
    }

    #[tokio::test(start_paused = true)]
    async fn a_single_try_is_one_attempt_and_no_give_up() {
        let w = scripted(&[Reply::Busy], true);
        assert!(run(&w, Wait::Once).await.unwrap().is_none());
        assert_eq!(
            *w.attempts.lock().unwrap(),
            vec![(Duration::ZERO, Wait::Once)]
        );
        assert_eq!(w.give_ups.load(Ordering::SeqCst), 0);
        // A lock's single try is not retried when unreplicated: its caller decides.
        let w = scripted(&[Reply::Unreplicated, Reply::Done], true);
        let got = run(&w, Wait::Once).await;
        assert_eq!(
            got.unwrap_err().kind(),
            crate::error::ErrorKind::NotReplicated
        );
        assert_eq!(w.times().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_attempts_sleeps_and_gives_up_only_when_it_ends_without_success() {
        let w = scripted(&[Reply::Busy, Reply::Busy, Reply::Done], true);
        assert!(run(&w, until(1_000)).await.unwrap().is_some());
        assert_eq!(w.times(), vec![Duration::ZERO, 10 * MS, 20 * MS]);
        assert_eq!(w.give_ups.load(Ordering::SeqCst), 0);
        let w = scripted(&[], true);
        assert!(run(&w, until(25)).await.unwrap().is_none());
        assert_eq!(w.times(), vec![Duration::ZERO, 10 * MS, 20 * MS, 25 * MS]);
        assert_eq!(w.give_ups.load(Ordering::SeqCst), 1, "gave up once");
    }

    #[tokio::test(start_paused = true)]
    async fn a_repeatable_attempt_lost_starts_the_wait_again_after_a_growing_pause() {
        let w = scripted(&[Reply::Lost, Reply::Lost, Reply::Done], true);
        assert!(run(&w, until(1_000)).await.unwrap().is_some());
        assert_eq!(
            w.times(),
            vec![Duration::ZERO, OUTAGE_PAUSE, 3 * OUTAGE_PAUSE],
            "paused 50 ms, then 100 ms"
        );
        // Still failing at the deadline: the last error.
        let w = scripted(&[Reply::Lost; 20], true);
        let got = run(&w, until(120)).await;
        assert_eq!(got.unwrap_err().kind(), crate::error::ErrorKind::Timeout);
        assert_eq!(w.times(), vec![Duration::ZERO, 50 * MS, 120 * MS]);
        assert_eq!(w.give_ups.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_that_cannot_be_repeated_ends_the_wait_with_its_error() {
        let w = scripted(&[Reply::Busy, Reply::Lost, Reply::Done], false);
        let got = run(&w, until(1_000)).await;
        assert_eq!(got.unwrap_err().kind(), crate::error::ErrorKind::Timeout);
        assert_eq!(w.times(), vec![Duration::ZERO, 10 * MS], "not tried again");
        // Other errors end any wait at once.
        let w = scripted(&[Reply::Refused, Reply::Done], true);
        let got = run(&w, until(1_000)).await;
        assert_eq!(
            got.unwrap_err().kind(),
            crate::error::ErrorKind::InvalidArgument
        );
        assert_eq!(w.times().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_unreplicated_attempt_is_tried_again_after_the_delay_within_the_limits() {
        // Two unreplicated tries, then taken: retried 100 ms apart, in place.
        let w = scripted(
            &[Reply::Unreplicated, Reply::Unreplicated, Reply::Done],
            false,
        );
        assert!(run(&w, until(10_000)).await.unwrap().is_some());
        assert_eq!(w.times(), vec![Duration::ZERO, 100 * MS, 200 * MS]);
        // The retries run out (3 in a row): the error ends the wait, even for a repeatable
        // waiter.
        let w = scripted(&[Reply::Unreplicated; 10], true);
        let got = run(&w, until(10_000)).await;
        assert_eq!(
            got.unwrap_err().kind(),
            crate::error::ErrorKind::NotReplicated
        );
        assert_eq!(w.times().len(), 4);
        // No retry whose delay would end past the deadline.
        let w = scripted(&[Reply::Unreplicated; 10], true);
        let start = Instant::now();
        let got = run(&w, until(150)).await;
        assert!(got.is_err());
        assert_eq!(
            start.elapsed(),
            100 * MS,
            "one retry fits, the second would not"
        );
        // A busy attempt between them starts the count again.
        let w = scripted(
            &[
                Reply::Unreplicated,
                Reply::Unreplicated,
                Reply::Busy,
                Reply::Unreplicated,
                Reply::Unreplicated,
                Reply::Unreplicated,
                Reply::Done,
            ],
            false,
        );
        assert!(run(&w, until(10_000)).await.unwrap().is_some());
        assert_eq!(w.times().len(), 7);
    }

    #[tokio::test(start_paused = true)]
    async fn a_single_try_of_a_synchronizer_is_retried_while_unreplicated() {
        let w = Scripted::<true>::new(
            &[Reply::Unreplicated, Reply::Unreplicated, Reply::Done],
            false,
        );
        assert!(run(&w, Wait::Once).await.unwrap().is_some());
        assert_eq!(w.times(), vec![Duration::ZERO, 100 * MS, 200 * MS]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_wait_gives_up_in_the_background_and_leaves_no_success() {
        let w = scripted(&[], true);
        let wait = run(&w, Wait::Until(None));
        let _ = tokio::time::timeout(35 * MS, wait).await;
        assert_eq!(
            w.in_background.load(Ordering::SeqCst),
            1,
            "given up in the background"
        );
        assert_eq!(w.give_ups.load(Ordering::SeqCst), 0);
        // A success the caller never took (dropped with the engine's answer) is undone; a
        // taken one is not.
        let w = scripted(&[Reply::Done, Reply::Done], true);
        drop(run(&w, Wait::Once).await.unwrap());
        assert_eq!(w.undone.load(Ordering::SeqCst), 1);
        let _taken = run(&w, Wait::Once).await.unwrap().unwrap().take();
        assert_eq!(w.undone.load(Ordering::SeqCst), 1);
    }

    /// A waiter whose every attempt takes 10 ms and succeeds, counting the attempts in flight
    /// among the waiters that share its turns.
    struct Crowd<'a> {
        config: Config,
        turns: &'a tokio::sync::Semaphore,
        in_flight: &'a AtomicUsize,
        most: &'a AtomicUsize,
    }

    impl Waiter for Crowd<'_> {
        type Won = ();
        const RETRIES_UNREPLICATED_ONCE: bool = false;

        fn client(&self) -> &Client {
            unreachable!("a crowd needs no client")
        }
        fn turns(&self) -> Option<&tokio::sync::Semaphore> {
            Some(self.turns)
        }
        fn config(&self) -> &Config {
            &self.config
        }
        fn is_closed(&self) -> bool {
            false
        }
        fn name(&self) -> &str {
            "crowd"
        }
        async fn attempt(&self, _wait: Wait, _turn: &mut Turn<'_>) -> Result<Step<Won<()>>> {
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.most.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(10 * MS).await;
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            Ok(Step::Done(Won::new(())))
        }
        fn repeatable(&self) -> bool {
            true
        }
        fn sleep_on(&self) -> SleepOn {
            SleepOn::BackOff(Box::new(Every(10 * MS)))
        }
    }

    /// Ten waiters sharing three turns: never more than three attempts in flight, the others
    /// wait their turn (not fail), in rounds of three; a single try takes a turn too.
    #[tokio::test(start_paused = true)]
    async fn attempts_beyond_the_turns_wait_for_one() {
        let turns = tokio::sync::Semaphore::new(3);
        let (in_flight, most) = (AtomicUsize::new(0), AtomicUsize::new(0));
        let crowd: Vec<Crowd<'_>> = (0..10)
            .map(|_| Crowd {
                config: Config::default(),
                turns: &turns,
                in_flight: &in_flight,
                most: &most,
            })
            .collect();
        let start = Instant::now();
        let outcomes = futures::future::join_all(crowd.iter().enumerate().map(|(i, w)| {
            let wait = if i % 2 == 0 { Wait::Once } else { until(1_000) };
            run(w, wait)
        }))
        .await;
        assert!(outcomes.iter().all(|o| matches!(o, Ok(Some(_)))));
        assert_eq!(
            most.load(Ordering::SeqCst),
            3,
            "three turns, three in flight"
        );
        assert_eq!(start.elapsed(), 40 * MS, "four rounds of 10 ms");
        assert_eq!(turns.available_permits(), 3, "every turn given back");
    }

    /// A waiter that looks again at its deadline (the latch) makes one more attempt when the
    /// wait ends busy, and wins with it; one that does not says busy.
    #[tokio::test(start_paused = true)]
    async fn a_waiter_that_looks_again_at_the_deadline_makes_one_more_attempt() {
        use Reply::*;
        // Busy until the wait is over (its attempts at 0, 10 and 20 ms, and at the deadline),
        // then free.
        let replies = [Busy, Busy, Busy, Busy, Done];
        let plain = Scripted::<false, false>::new(&replies, true);
        assert!(run(&plain, until(25)).await.unwrap().is_none());
        let waited = plain.times();
        assert_eq!(*waited.last().unwrap(), 25 * MS, "{waited:?}");
        let looks = Scripted::<false, true>::new(&replies, true);
        assert!(run(&looks, until(25)).await.unwrap().is_some());
        let times = looks.times();
        assert_eq!(times.len(), waited.len() + 1, "{times:?}");
        assert_eq!(
            *times.last().unwrap(),
            25 * MS,
            "the last look is at the deadline"
        );
        let last = looks.attempts.lock().unwrap().last().unwrap().1;
        assert_eq!(last, Wait::Once, "the last look is a single try");
    }
}
