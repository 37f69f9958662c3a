//! Observability hooks: one function per thing worth seeing, called where it happens.
//!
//! Without the `tracing` and `metrics` features every hook is a `log` record or nothing, and
//! compiles to next to nothing. With `tracing`, acquisitions get a span and the hooks emit
//! events with fields (the `log` records of the rest of the crate reach a tracing subscriber
//! through `tracing-log`). With `metrics`, the hooks feed the `metrics` facade; the names are
//! the constants in `names`.

use std::time::Duration;

#[cfg(any(feature = "tracing", feature = "metrics"))]
use tokio::time::Instant;

use crate::error::{Error, Result};

/// The metric names (all prefixed `redisson_lock_`).
#[cfg(feature = "metrics")]
pub(crate) mod names {
    /// Counter; labels `kind`, `outcome` (`acquired`, `not_acquired`, `error`, `cancelled`).
    pub(crate) const ACQUISITIONS: &str = "redisson_lock_acquisitions_total";
    /// Histogram (seconds) of the time an acquisition took; labels `kind`, `outcome`.
    pub(crate) const WAIT: &str = "redisson_lock_wait_seconds";
    /// Histogram (seconds) from acquisition to the end of its guard; label `kind`.
    pub(crate) const HOLD: &str = "redisson_lock_hold_seconds";
    /// Gauge: live guards; label `kind`.
    pub(crate) const HELD: &str = "redisson_lock_held";
    /// Gauge: acquisitions in progress (waiting or attempting); label `kind`.
    pub(crate) const WAITERS: &str = "redisson_lock_waiters";
    /// Gauge: subscribed lock channels.
    pub(crate) const SUBSCRIPTIONS: &str = "redisson_lock_subscriptions";
    /// Counter: holds renewed by the watchdog.
    pub(crate) const RENEWALS: &str = "redisson_lock_renewals_total";
    /// Counter: permits of permit-expirable semaphores renewed by the watchdog (counted in
    /// `RENEWALS` too).
    pub(crate) const PERMIT_RENEWALS: &str = "redisson_lock_permit_renewals_total";
    /// Counter: renewal calls that failed (retried).
    pub(crate) const RENEWAL_FAILURES: &str = "redisson_lock_renewal_failures_total";
    /// Counter: holds found lost by the watchdog (gone, or not renewed before the deadline).
    pub(crate) const LOST: &str = "redisson_lock_lost_total";
    /// Counter: holds put in doubt (their node's connection dropped or timed out).
    pub(crate) const IN_DOUBT: &str = "redisson_lock_in_doubt_total";
    /// Counter: re-subscriptions of every live channel after a reconnect.
    pub(crate) const RESUBSCRIPTIONS: &str = "redisson_lock_resubscriptions_total";
    /// Counter: synchronizer operations other than acquisitions; labels `object`
    /// (`semaphore`, `permit_semaphore`, `count_down_latch`) and `op`.
    pub(crate) const SYNC_OPS: &str = "redisson_lock_sync_operations_total";
    /// Counter: lock events delivered ([`Lock::events`](crate::Lock::events)); label `event`
    /// (`deleted`, `expired`).
    pub(crate) const EVENTS: &str = "redisson_lock_events_total";
    /// Counter: leadership changes of this client's campaigns ([`Election`](crate::Election));
    /// label `event` (`elected`, `resigned`, `lost`: a `run_as_leader` body cancelled).
    pub(crate) const ELECTIONS: &str = "redisson_lock_election_events_total";
    /// Counter: [`run_once`](crate::Client::run_once) calls; label `outcome` (`ran`,
    /// `skipped`, `timed_out`).
    pub(crate) const RUN_ONCE: &str = "redisson_lock_run_once_total";
}

/// Describes the metrics to the installed recorder (once per process).
pub(crate) fn describe() {
    #[cfg(feature = "metrics")]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        ONCE.call_once(|| {
            use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
            describe_counter!(names::ACQUISITIONS, "Lock acquisitions by kind and outcome");
            describe_histogram!(names::WAIT, Unit::Seconds, "Time an acquisition took");
            describe_histogram!(
                names::HOLD,
                Unit::Seconds,
                "Time a lock was held (guard life)"
            );
            describe_gauge!(names::HELD, "Live lock guards");
            describe_gauge!(names::WAITERS, "Acquisitions in progress");
            describe_gauge!(names::SUBSCRIPTIONS, "Subscribed lock channels");
            describe_counter!(names::RENEWALS, "Holds renewed by the watchdog");
            describe_counter!(
                names::PERMIT_RENEWALS,
                "Permits renewed by the watchdog (counted in the renewals too)"
            );
            describe_counter!(names::RENEWAL_FAILURES, "Failed watchdog renewal calls");
            describe_counter!(names::LOST, "Holds found lost by the watchdog");
            describe_counter!(
                names::IN_DOUBT,
                "Holds put in doubt by a connection failure"
            );
            describe_counter!(names::RESUBSCRIPTIONS, "Re-subscriptions after a reconnect");
            describe_counter!(
                names::ELECTIONS,
                "Leadership changes of this client's campaigns"
            );
            describe_counter!(names::RUN_ONCE, "Run-once calls by outcome");
            describe_counter!(
                names::SYNC_OPS,
                "Synchronizer operations (releases, sets, count-downs...)"
            );
        });
    }
}

/// `fut` inside the span that is current where it is made (with `tracing`): work an
/// acquisition hands to a task of its own stays in the acquisition's span.
pub(crate) fn in_current_span<F: std::future::Future>(
    fut: F,
) -> impl std::future::Future<Output = F::Output> {
    #[cfg(feature = "tracing")]
    {
        use tracing::Instrument;
        fut.in_current_span()
    }
    #[cfg(not(feature = "tracing"))]
    {
        fut
    }
}

/// One acquisition being watched: a span (with `tracing`), the waiters gauge and, when it ends,
/// the outcome counter and the wait histogram (with `metrics`). Dropped before
/// [`finish`](Self::finish), it counts as cancelled.
pub(crate) struct Acquisition {
    #[cfg(feature = "metrics")]
    kind: &'static str,
    #[cfg(any(feature = "tracing", feature = "metrics"))]
    started: Instant,
    #[cfg(feature = "tracing")]
    span: tracing::Span,
    done: bool,
}

impl Acquisition {
    /// Watches the acquisition `fut` from its start to its outcome (the one place an
    /// acquisition, a lock's or a synchronizer's, is observed). Dropped before it ends, it
    /// counts as cancelled.
    ///
    /// The returned future wraps `fut` in place (not an `async fn` awaiting it, which would
    /// keep a second slot of `fut`'s size in its state): a waiting acquisition's memory is
    /// its own future's size, once.
    pub(crate) fn observe<T>(
        kind: &'static str,
        lock: &str,
        owner: &str,
        wait: Option<Duration>,
        lease: Option<Duration>,
        fut: impl std::future::Future<Output = Result<Option<T>>>,
    ) -> impl std::future::Future<Output = Result<Option<T>>> {
        use futures::FutureExt;
        let watched = Self::start(kind, lock, owner, wait, lease);
        watched.run(fut).map(move |outcome| {
            watched.finish(&outcome);
            outcome
        })
    }

    #[allow(unused_variables)]
    fn start(
        kind: &'static str,
        lock: &str,
        owner: &str,
        wait: Option<Duration>,
        lease: Option<Duration>,
    ) -> Self {
        #[cfg(feature = "metrics")]
        metrics::gauge!(names::WAITERS, "kind" => kind).increment(1.0);
        Self {
            #[cfg(feature = "metrics")]
            kind,
            #[cfg(any(feature = "tracing", feature = "metrics"))]
            started: Instant::now(),
            #[cfg(feature = "tracing")]
            span: tracing::info_span!(
                target: "redisson_lock",
                "acquire",
                lock = lock,
                kind = kind,
                owner = owner,
                wait_ms = wait.map(|w| w.as_millis() as u64),
                lease_ms = lease.map(|l| l.as_millis() as u64),
                outcome = tracing::field::Empty,
                waited_ms = tracing::field::Empty,
            ),
            done: false,
        }
    }

    /// `fut` inside the acquisition's span.
    fn run<F: std::future::Future>(&self, fut: F) -> impl std::future::Future<Output = F::Output> {
        #[cfg(feature = "tracing")]
        {
            use tracing::Instrument;
            fut.instrument(self.span.clone())
        }
        #[cfg(not(feature = "tracing"))]
        {
            fut
        }
    }

    /// Records how the acquisition ended.
    fn finish<T>(mut self, result: &Result<Option<T>>) {
        self.done = true;
        let outcome = match result {
            Ok(Some(_)) => "acquired",
            Ok(None) => "not_acquired",
            Err(_) => "error",
        };
        self.end(outcome, result.as_ref().err());
    }

    #[allow(unused_variables)]
    fn end(&self, outcome: &'static str, error: Option<&Error>) {
        #[cfg(any(feature = "tracing", feature = "metrics"))]
        let waited = self.started.elapsed();
        #[cfg(feature = "tracing")]
        {
            self.span.record("outcome", outcome);
            self.span.record("waited_ms", waited.as_millis() as u64);
            let _entered = self.span.enter();
            match error {
                Some(e) => tracing::debug!(
                    target: "redisson_lock",
                    error = %format_args!("{e:#}"),
                    error_kind = ?e.kind(),
                    "acquisition failed"
                ),
                None => tracing::debug!(target: "redisson_lock", outcome, "acquisition ended"),
            }
        }
        #[cfg(feature = "metrics")]
        {
            let kind = self.kind;
            metrics::gauge!(names::WAITERS, "kind" => kind).decrement(1.0);
            metrics::counter!(names::ACQUISITIONS, "kind" => kind, "outcome" => outcome)
                .increment(1);
            metrics::histogram!(names::WAIT, "kind" => kind, "outcome" => outcome)
                .record(waited.as_secs_f64());
        }
    }
}

impl Drop for Acquisition {
    fn drop(&mut self) {
        if !self.done {
            self.end("cancelled", None);
        }
    }
}

/// A guard came to life (the lock is held through it).
#[allow(unused_variables)]
pub(crate) fn guard_opened(kind: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::gauge!(names::HELD, "kind" => kind).increment(1.0);
}

/// A guard ended (released, kept or dropped) after `held` for `held_for`.
#[allow(unused_variables)]
pub(crate) fn guard_closed(kind: &'static str, held_for: Duration) {
    #[cfg(feature = "metrics")]
    {
        metrics::gauge!(names::HELD, "kind" => kind).decrement(1.0);
        metrics::histogram!(names::HOLD, "kind" => kind).record(held_for.as_secs_f64());
    }
}

/// A synchronizer operation other than an acquisition or an await (those are
/// [`Acquisition`]s) was done: `object` is `semaphore`, `permit_semaphore` or
/// `count_down_latch`, `op` what was done (`release`, `set`, `count_down`...).
#[allow(unused_variables)]
pub(crate) fn synchronizer(object: &'static str, name: &str, op: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(names::SYNC_OPS, "object" => object, "op" => op).increment(1);
    #[cfg(feature = "tracing")]
    tracing::debug!(target: "redisson_lock", object, name, op, "synchronizer operation");
    #[cfg(not(feature = "tracing"))]
    log::trace!("{object} {name}: {op}");
}

/// An election `name` changed for one of this client's campaigns: `event` is `elected`,
/// `resigned`, `in_doubt` (the body stopped while the term is in doubt) or `lost`.
#[allow(unused_variables)]
pub(crate) fn election(name: &str, event: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(names::ELECTIONS, "event" => event).increment(1);
    #[cfg(feature = "tracing")]
    tracing::info!(target: "redisson_lock", election = name, event, "election");
    #[cfg(not(feature = "tracing"))]
    log::debug!("election {name}: {event}");
}

/// A run-once call on `name` ended: `outcome` is `ran`, `skipped`, `timed_out` or `ended` (a
/// blocking job that panicked).
#[allow(unused_variables)]
pub(crate) fn run_once(name: &str, outcome: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(names::RUN_ONCE, "outcome" => outcome).increment(1);
    #[cfg(feature = "tracing")]
    tracing::debug!(target: "redisson_lock", job = name, outcome, "run once");
    #[cfg(not(feature = "tracing"))]
    log::debug!("run-once {name}: {outcome}");
}

/// The watchdog renewed one hold.
pub(crate) fn renewed() {
    #[cfg(feature = "metrics")]
    metrics::counter!(names::RENEWALS).increment(1);
}

/// The watchdog renewed one permit of a permit-expirable semaphore (after [`renewed`]).
pub(crate) fn permit_renewed() {
    #[cfg(feature = "metrics")]
    metrics::counter!(names::PERMIT_RENEWALS).increment(1);
}

/// A renewal call for `holds` holds failed; the watchdog retries.
pub(crate) fn renewal_failed(holds: usize, error: &Error) {
    #[cfg(feature = "metrics")]
    metrics::counter!(names::RENEWAL_FAILURES).increment(1);
    #[cfg(feature = "tracing")]
    tracing::warn!(
        target: "redisson_lock",
        holds,
        error = %format_args!("{error:#}"),
        error_kind = ?error.kind(),
        "renewal failed, will retry"
    );
    #[cfg(not(feature = "tracing"))]
    log::warn!("can't renew {holds} locks, will retry: {error:#}");
}

/// The watchdog found a hold lost: `reason` says how.
pub(crate) fn lock_lost(lock: &str, owner: &str, reason: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(names::LOST).increment(1);
    #[cfg(feature = "tracing")]
    tracing::warn!(target: "redisson_lock", lock, owner, reason, "lock lost");
    #[cfg(not(feature = "tracing"))]
    log::info!("lock {lock} is no longer held by {owner} ({reason}); renewal stopped");
}

/// A hold is in doubt: the connection to its node dropped or timed out (`reason`); its holder's
/// `lost()` fires and its state is `InDoubt` until a renewal confirms it.
pub(crate) fn lock_in_doubt(lock: &str, owner: &str, reason: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(names::IN_DOUBT).increment(1);
    #[cfg(feature = "tracing")]
    tracing::warn!(target: "redisson_lock", lock, owner, reason, "lock in doubt");
    #[cfg(not(feature = "tracing"))]
    log::warn!("lock {lock} held by {owner} is in doubt ({reason}); its holder is told");
}

/// A hold in doubt was confirmed by a renewal on the new connection: held again.
pub(crate) fn lock_confirmed(lock: &str, owner: &str) {
    #[cfg(feature = "tracing")]
    tracing::info!(target: "redisson_lock", lock, owner, "lock confirmed after a doubt");
    #[cfg(not(feature = "tracing"))]
    log::info!("lock {lock} held by {owner} is confirmed held again");
}

/// A lock channel was subscribed (`+1`) or left (`-1`).
#[allow(unused_variables)]
pub(crate) fn subscriptions_changed(delta: i8) {
    #[cfg(feature = "metrics")]
    metrics::gauge!(names::SUBSCRIPTIONS).increment(f64::from(delta));
}

/// A stream of a lock's keyspace events was opened (the server's setting checked, the
/// subscriptions acknowledged).
pub(crate) fn lock_events_subscribed(lock: &str) {
    #[cfg(feature = "tracing")]
    tracing::debug!(target: "redisson_lock", lock, "listening to the lock's keyspace events");
    #[cfg(not(feature = "tracing"))]
    log::debug!("listening to the keyspace events of lock {lock}");
}

/// A lock event was delivered to its stream.
#[allow(unused_variables)]
pub(crate) fn lock_event(lock: &str, event: &'static str) {
    #[cfg(feature = "metrics")]
    metrics::counter!(names::EVENTS, "event" => event).increment(1);
    #[cfg(feature = "tracing")]
    tracing::debug!(target: "redisson_lock", lock, event, "lock event");
}

/// After a reconnect, every live channel (`channels` of them) is subscribed again.
#[allow(unused_variables)]
pub(crate) fn resubscribed(channels: usize) {
    #[cfg(feature = "metrics")]
    metrics::counter!(names::RESUBSCRIPTIONS).increment(1);
    #[cfg(feature = "tracing")]
    tracing::info!(
        target: "redisson_lock",
        channels,
        "reconnected: subscribing again and waking every waiter"
    );
    #[cfg(not(feature = "tracing"))]
    log::info!("reconnected: subscribing {channels} channels again and waking every waiter");
}

/// An acquisition succeeded after its caller gave up (dropped future, or a reply that came
/// after a timeout): the outcome was ambiguous to the caller, and the hold is released.
pub(crate) fn late_acquisition(lock: &str, owner: &str) {
    #[cfg(feature = "tracing")]
    tracing::info!(
        target: "redisson_lock",
        lock,
        owner,
        "acquired after the caller gave up; releasing it"
    );
    #[cfg(not(feature = "tracing"))]
    log::debug!("acquisition of {lock} by {owner} finished after its caller gave up; releasing it");
}

/// An ambiguous acquisition was reconciled: the owner's count was `before` when it was sent and
/// is `after` now (equal when the attempt's hold, if any, was undone).
pub(crate) fn reconciled(lock: &str, owner: &str, before: u64, after: u64) {
    #[cfg(feature = "tracing")]
    tracing::info!(
        target: "redisson_lock",
        lock,
        owner,
        before,
        after,
        "ambiguous acquisition reconciled"
    );
    #[cfg(not(feature = "tracing"))]
    log::info!(
        "ambiguous acquisition of {lock} by {owner} reconciled: hold count {before} -> {after}"
    );
}

/// An acquisition no replica acknowledged within the sync timeout; it is being undone.
pub(crate) fn not_replicated(lock: &str, owner: &str) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        target: "redisson_lock",
        lock,
        owner,
        "no replica acknowledged the acquisition in time; undoing it"
    );
    #[cfg(not(feature = "tracing"))]
    log::warn!("no replica acknowledged the acquisition of {lock} by {owner} in time; undoing it");
}
