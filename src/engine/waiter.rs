//! What the engine runs: a [`Waiter`]. An owner's claim to a lock, a taking of a semaphore's
//! permits, a taking of a permit with an id, a look at a latch's count: each is described by
//! what one attempt is and what its outcome means, and the engine (`engine`) runs the waiting,
//! the retries, the undoing and the cancel safety around it, the same for all.
//!
//! The vocabulary: a caller *waits* ([`Wait`]: once, or until a deadline) by making
//! *attempts* (each gives a [`Step`]: done, or busy for a while) and *sleeping* between them
//! ([`SleepOn`]: a channel's wake-ups, or back-off steps), until a *wake-up* or the sleep's
//! bound ends the sleep. What an attempt wins is a [`Won`] until its caller takes it.
//!
//! # Cancel safety, one way
//! An attempt whose script may have taken something runs that stretch (the send, the reply's
//! meaning, the undo of an acquisition no replica acknowledged) through [`detach`]: polled by
//! its caller as usual, and finished on a task of its own if the caller goes away midway, so a
//! dropped caller never cuts it short. What it won then reaches nobody and is dropped on that
//! task, and a dropped [`Won`] undoes itself ([`Orphan`]: a lock is released, permits are
//! given back). Everything before that stretch (waiting for a turn)
//! and after it (sleeping, subscriptions, local wait lines) leaves nothing behind when
//! dropped, and a waiter's give-up clean-up runs in the background if its wait is dropped
//! (`engine::GiveUp`).

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    task::{ready, Context, Poll},
    time::Duration,
};

use parking_lot::Mutex;
use tokio::{runtime::Handle, time::Instant};

use crate::{
    client::Client,
    config::Config,
    error::{Error, Result},
    service::pubsub::Reading,
    types::line::WaitLine,
};

/// How long a caller waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// One attempt only (a single try).
    Once,
    /// Attempts until the deadline (`None`: without limit).
    Until(Option<Instant>),
}

impl Wait {
    /// A wait of `d`; zero means one attempt, an overflowing one means "without limit".
    pub(crate) fn for_duration(d: Duration) -> Wait {
        if d.is_zero() {
            Wait::Once
        } else {
            Wait::Until(Instant::now().checked_add(d))
        }
    }

    /// The wait of a caller that gave at most `limit` (`None`: no limit; zero: one attempt).
    pub(crate) fn at_most(limit: Option<Duration>) -> Wait {
        limit.map_or(Wait::Until(None), Wait::for_duration)
    }

    /// The deadline of a wait (`None`: a single try, or no limit).
    pub(crate) fn deadline(self) -> Option<Instant> {
        match self {
            Wait::Once => None,
            Wait::Until(deadline) => deadline,
        }
    }

    /// The time left, as observability reports a wait: `None` for a single try,
    /// `Duration::MAX` without limit.
    pub(crate) fn remaining(self) -> Option<Duration> {
        match self {
            Wait::Once => None,
            Wait::Until(deadline) => Some(deadline.map_or(Duration::MAX, |d| {
                d.saturating_duration_since(Instant::now())
            })),
        }
    }
}

/// Time left before `deadline` (`None`: no deadline).
pub(crate) fn left(deadline: Option<Instant>) -> Option<Duration> {
    deadline.map(|d| d.saturating_duration_since(Instant::now()))
}

/// What one attempt gave.
#[derive(Debug)]
pub(crate) enum Step<T> {
    /// Done: acquired, taken, open.
    Done(T),
    /// Busy; it frees itself after `frees_in` if nobody frees it sooner (when known): the
    /// lock's TTL, the earliest permit's expiry.
    Busy { frees_in: Option<Duration> },
}

/// Where a waiter sleeps between its attempts.
#[derive(Debug, Clone)]
pub(crate) enum SleepOn {
    /// On a channel's wake-ups, its messages read as `reading` says (lock `0`/`1`, semaphore
    /// `v`, latch `0`).
    Channel { channel: String, reading: Reading },
    /// The steps of a back-off schedule (no pub/sub at all).
    BackOff(AnySchedule),
}

/// One of the client's attempt turns (see [`Waiter::turns`]), held while an attempt runs. An
/// attempt that must wait for something other than its own command (a release of its lock
/// still under way, its owner's gate) gives the turn back meanwhile ([`Turn::away`]), so a
/// parked attempt never holds up the client's other acquisitions.
pub(crate) struct Turn<'a> {
    turns: Option<&'a tokio::sync::Semaphore>,
    permit: Option<tokio::sync::SemaphorePermit<'a>>,
}

impl<'a> Turn<'a> {
    /// Waits for a turn of `turns` (`None`: no limit).
    pub(crate) async fn take(turns: Option<&'a tokio::sync::Semaphore>) -> Result<Turn<'a>> {
        let permit = match turns {
            Some(t) => Some(t.acquire().await.map_err(|_| Error::Shutdown)?),
            None => None,
        };
        Ok(Turn { turns, permit })
    }

    /// Awaits `wait`; if it is not ready at once, without the turn, taken again after.
    pub(crate) async fn away<F: Future>(&mut self, wait: F) -> Result<F::Output> {
        let mut wait = std::pin::pin!(wait);
        if let Poll::Ready(out) = futures::poll!(wait.as_mut()) {
            return Ok(out);
        }
        let had = self.permit.take().is_some();
        let out = wait.await;
        if let (true, Some(turns)) = (had, self.turns) {
            self.permit = Some(turns.acquire().await.map_err(|_| Error::Shutdown)?);
        }
        Ok(out)
    }
}

/// What an orphaned success leaves behind, and how it is undone: a success whose caller went
/// away (see [`Won`]).
pub(crate) trait Orphan: Send + 'static {
    /// Undoes the success, in the background (never blocks, never panics).
    fn orphaned(self);
}

/// A look that found a latch open takes nothing.
impl Orphan for () {
    fn orphaned(self) {}
}

/// A success on its way to its caller. Dropped before the caller [`take`](Self::take)s it (the
/// caller went away while the attempt ran on its own task, or before the engine returned), it
/// undoes itself ([`Orphan::orphaned`]).
#[must_use = "a dropped Won undoes its success"]
pub(crate) struct Won<T: Orphan>(Option<T>);

impl<T: Orphan> Won<T> {
    pub(crate) fn new(value: T) -> Self {
        Won(Some(value))
    }

    /// What was won, for a look before the caller takes it.
    pub(crate) fn get(&self) -> &T {
        self.0.as_ref().expect("present until taken")
    }

    /// The caller takes responsibility for what was won.
    pub(crate) fn take(mut self) -> T {
        self.0.take().expect("present until taken")
    }
}

impl<T: Orphan> Drop for Won<T> {
    fn drop(&mut self) {
        if let Some(value) = self.0.take() {
            value.orphaned();
        }
    }
}

impl<T: Orphan> std::fmt::Debug for Won<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Won")
    }
}

/// What the engine runs: everything it needs to know of one caller's waiting acquisition (or
/// look) besides the waiting itself.
pub(crate) trait Waiter: Sync {
    /// What a successful attempt wins; undone if nobody takes it (see [`Won`]).
    type Won: Orphan;
    /// Whether a single try that no replica acknowledged (undone: [`Error::NotReplicated`]) is
    /// tried again, as a waiter's attempts are: a synchronizer's is (Redisson retries the
    /// command), a lock's single try is not (its caller decides).
    const RETRIES_UNREPLICATED_ONCE: bool;
    /// Whether a wait that reached its deadline busy makes one more attempt before it says so
    /// (the latch's last look at its count, as Redisson's `await(timeout)` does).
    const LOOKS_AGAIN_AT_DEADLINE: bool = false;

    /// The client the waiter acts through.
    fn client(&self) -> &Client;

    /// The client's settings (a test's own for waiters without a client).
    fn config(&self) -> &Config {
        self.client().config()
    }

    /// `true` once the client is shut down: nothing is tried again.
    fn is_closed(&self) -> bool {
        self.client().is_closed()
    }

    /// The raw name, for logs.
    fn name(&self) -> &str;

    /// The raw name as a local wait line keeps it (a waiter that has it shared hands out its
    /// own: no copy per line).
    fn shared_name(&self) -> std::sync::Arc<str> {
        self.name().into()
    }

    /// The turns an attempt takes one of while it runs (the client's: at most
    /// `ATTEMPTS_IN_FLIGHT` attempts in flight at once); `None`: no limit (a test's waiter
    /// without a client).
    fn turns(&self) -> Option<&tokio::sync::Semaphore> {
        Some(self.client().attempt_turns())
    }

    /// One attempt for a caller that waits `wait`: a single try, or one of a waiter's attempts
    /// with its deadline. An acquisition no replica acknowledged is undone by the attempt
    /// itself and reported as [`Error::NotReplicated`]; a script sent without a reply is
    /// [`Error::Ambiguous`] (or another transient error), with whatever it may have taken
    /// undone or reconciled by the attempt.
    ///
    /// Cancel safety: the stretch that may take something is finished even if the attempt is
    /// dropped midway ([`detach`]), so a dropped attempt leaves nothing behind.
    /// `turn`: the client's turn this attempt holds (see [`Turn::away`]).
    fn attempt(
        &self,
        wait: Wait,
        turn: &mut Turn<'_>,
    ) -> impl Future<Output = Result<Step<Won<Self::Won>>>> + Send;

    /// Whether a wait goes on after one of its attempts failed on a transient error (its
    /// outcome unknown to the caller): `false` where a lost attempt can neither be undone nor
    /// told apart from one that never ran (the semaphore's anonymous permits: trying again
    /// could take them twice), and the error ends the wait.
    fn repeatable(&self) -> bool;

    /// Where the waiter sleeps between attempts.
    fn sleep_on(&self) -> SleepOn;

    /// The local wait line the waiter joins before it contends (a queueing lock kind), with
    /// its channel from [`sleep_on`](Self::sleep_on). `None` (the default): it contends itself.
    fn wait_line(&self) -> Option<WaitLine> {
        None
    }

    /// Whether a waiting acquisition makes an attempt of its own before it sleeps (the
    /// default); a queueing kind's waiter behind other local waiters does not (see
    /// `WaitLines::attempts_first`).
    fn attempts_first(&self) -> bool {
        true
    }

    /// Until when what `won` holds lasts at least: the line's holder (see `Ticket::acquired`).
    fn lasts_until(&self, _won: &Self::Won) -> Instant {
        Instant::now()
    }

    /// A waiter's clean-up after a wait that ended without success (the fair lock leaves its
    /// queue in Redis). None by default.
    fn give_up(&self) -> impl Future<Output = Result<()>> + Send {
        async { Ok(()) }
    }

    /// [`give_up`](Self::give_up) on the client's runtime, tried again while transient (a
    /// dropped wait, or a give-up that failed). Never blocks.
    fn give_up_in_background(&self) {}
}

/// What a caller left behind when it went away during a [`detach`]ed stretch: made when its
/// future was dropped, kept until the stretch ends on the task that finishes it, unless work
/// that outlives that task takes it first (a claim's mark is a release in flight, which its
/// reconciliation carries).
pub(crate) struct Abandoned<M>(Arc<Mutex<Option<M>>>);

impl<M> Abandoned<M> {
    /// The caller's mark, if it went away (once).
    pub(crate) fn take(&self) -> Option<M> {
        self.0.lock().take()
    }
}

impl<M> Clone for Abandoned<M> {
    fn clone(&self) -> Self {
        Abandoned(self.0.clone())
    }
}

/// A stretch being polled by its caller; dropped before it ended, it leaves the caller's mark
/// and hands the rest of the stretch to a task of its own.
struct Stretch<'a, T: Send + 'static, M: Send + 'static, F: FnOnce() -> M> {
    work: Option<Pin<Box<dyn Future<Output = Result<T>> + Send>>>,
    runtime: &'a Handle,
    abandoned: Abandoned<M>,
    mark: Option<F>,
}

impl<T: Send + 'static, M: Send + 'static, F: FnOnce() -> M> Stretch<'_, T, M, F> {
    fn poll_work(&mut self, cx: &mut Context<'_>) -> Poll<Result<T>> {
        let Some(work) = self.work.as_mut() else {
            return Poll::Ready(Err(Error::Shutdown));
        };
        let outcome = ready!(work.as_mut().poll(cx));
        self.work = None;
        Poll::Ready(outcome)
    }
}

impl<T: Send + 'static, M: Send + 'static, F: FnOnce() -> M> Drop for Stretch<'_, T, M, F> {
    fn drop(&mut self) {
        let Some(work) = self.work.take() else {
            return;
        };
        if let Some(mark) = self.mark.take() {
            *self.abandoned.0.lock() = Some(mark());
        }
        let held = self.abandoned.clone();
        drop(self.runtime.spawn(async move {
            // Nobody to take it: dropped here, a success undoes itself.
            drop(work.await);
            drop(held.take());
        }));
    }
}

/// Runs the stretch of an attempt that must not be cut short (its send, the reply's meaning,
/// the undo of an acquisition no replica acknowledged). The caller polls it as any future (no
/// task, no hand-over on the usual path); if the caller's future is dropped before it ended,
/// `mark` is made at once (a claim counts itself as a release in flight, so later
/// acquisitions of the lock through this client wait for it) and the rest of the stretch runs
/// on a task of its own on `runtime`, which keeps the mark until it ends. Its outcome then
/// reaches nobody and is dropped there, where a [`Won`] undoes itself.
///
/// # Errors
/// The work's own.
pub(crate) async fn detach<T, M, F, Fut>(
    runtime: &Handle,
    mark: impl FnOnce() -> M,
    work: F,
) -> Result<T>
where
    T: Send + 'static,
    M: Send + 'static,
    F: FnOnce(Abandoned<M>) -> Fut,
    Fut: Future<Output = Result<T>> + Send + 'static,
{
    let abandoned = Abandoned(Arc::new(Mutex::new(None)));
    let work = crate::observe::in_current_span(work(abandoned.clone()));
    let mut stretch = Stretch {
        work: Some(Box::pin(work)),
        runtime,
        abandoned,
        mark: Some(mark),
    };
    std::future::poll_fn(|cx| stretch.poll_work(cx)).await
}

/// A back-off schedule as the engine sleeps it: the next step, again and again. The spin
/// lock's [`BackOff`](crate::BackOff) (beside it in `kinds/`) is the schedule a kind gives;
/// the engine knows only this.
pub(crate) trait Schedule: std::fmt::Debug + Send + Sync + 'static {
    /// The next sleep.
    fn next_delay(&mut self) -> Duration;
    /// A copy of the schedule as it stands.
    fn boxed(&self) -> AnySchedule;
}

/// A back-off schedule of any kind.
pub(crate) type AnySchedule = Box<dyn Schedule>;

impl Clone for AnySchedule {
    fn clone(&self) -> Self {
        self.boxed()
    }
}

/// The same delay every step: the engine's unit tests' schedule (a kind's schedules live with
/// the kind: the spin lock's `BackOff`).
#[cfg(test)]
#[derive(Debug, Clone)]
pub(crate) struct Every(pub(crate) Duration);

#[cfg(test)]
impl Schedule for Every {
    fn next_delay(&mut self) -> Duration {
        self.0
    }

    fn boxed(&self) -> AnySchedule {
        Box::new(self.clone())
    }
}

#[cfg(test)]
mod tests {

    /// An attempt's turn is given back while the attempt waits for something else, and taken
    /// again after; a wait ready at once keeps it.
    #[tokio::test(start_paused = true)]
    async fn a_turn_is_given_back_while_its_attempt_waits_elsewhere() {
        let turns = tokio::sync::Semaphore::new(1);
        let mut turn = Turn::take(Some(&turns)).await.unwrap();
        assert_eq!(turns.available_permits(), 0);
        assert_eq!(turn.away(async { 7 }).await.unwrap(), 7);
        assert_eq!(turns.available_permits(), 0, "ready at once: kept");
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        {
            let waiting = turn.away(rx);
            tokio::pin!(waiting);
            assert!(futures::poll!(waiting.as_mut()).is_pending());
            assert_eq!(turns.available_permits(), 1, "given back while it waits");
            let other = turns.try_acquire().expect("another attempt's turn");
            tx.send(()).unwrap();
            assert!(futures::poll!(waiting.as_mut()).is_pending(), "no turn yet");
            drop(other);
            waiting.await.unwrap().unwrap();
        }
        assert_eq!(turns.available_permits(), 0, "taken again");
        drop(turn);
        assert_eq!(turns.available_permits(), 1);
    }

    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[test]
    fn a_zero_wait_is_one_attempt_and_an_overflowing_one_has_no_limit() {
        assert_eq!(Wait::for_duration(Duration::ZERO), Wait::Once);
        assert_eq!(Wait::for_duration(Duration::MAX), Wait::Until(None));
        assert_eq!(Wait::at_most(None), Wait::Until(None));
        assert!(matches!(
            Wait::at_most(Some(Duration::from_secs(1))),
            Wait::Until(Some(_))
        ));
        assert_eq!(Wait::Once.remaining(), None);
        assert_eq!(Wait::Until(None).remaining(), Some(Duration::MAX));
    }

    /// Counts the undone successes.
    #[derive(Debug)]
    struct Undo(Arc<AtomicUsize>);

    impl Orphan for Undo {
        fn orphaned(self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_success_nobody_takes_is_undone_and_a_taken_one_is_not() {
        let undone = Arc::new(AtomicUsize::new(0));
        drop(Won::new(Undo(undone.clone())));
        assert_eq!(undone.load(Ordering::SeqCst), 1);
        let taken = Won::new(Undo(undone.clone())).take();
        drop(taken);
        assert_eq!(undone.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn a_dropped_caller_leaves_its_mark_and_the_task_undoes_what_it_won() {
        let undone = Arc::new(AtomicUsize::new(0));
        let marks = Arc::new(AtomicUsize::new(0));
        let (sent, send) = tokio::sync::oneshot::channel::<()>();
        let caller = {
            let (undone, marks) = (undone.clone(), marks.clone());
            tokio::spawn(async move {
                detach(
                    &Handle::current(),
                    move || marks.fetch_add(1, Ordering::SeqCst),
                    move |_| async move {
                        // The script is in flight until the test lets it answer.
                        let _ = send.await;
                        Ok(Won::new(Undo(undone)))
                    },
                )
                .await
                .map(Won::take)
            })
        };
        tokio::task::yield_now().await;
        caller.abort();
        assert!(caller.await.unwrap_err().is_cancelled());
        assert_eq!(
            marks.load(Ordering::SeqCst),
            1,
            "the mark is made at the drop"
        );
        assert_eq!(undone.load(Ordering::SeqCst), 0, "still in flight");
        drop(sent);
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert_eq!(
            undone.load(Ordering::SeqCst),
            1,
            "the task finished the attempt and undid its success"
        );

        // A caller that waits gets the outcome, makes no mark, and undoes nothing.
        let won = Undo(undone.clone());
        let got = detach(
            &Handle::current(),
            || marks.fetch_add(1, Ordering::SeqCst),
            move |_| async move { Ok(Won::new(won)) },
        )
        .await
        .unwrap()
        .take();
        drop(got);
        assert_eq!(marks.load(Ordering::SeqCst), 1);
        assert_eq!(undone.load(Ordering::SeqCst), 1);
    }
}
