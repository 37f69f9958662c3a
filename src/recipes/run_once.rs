//! Run-once jobs (ShedLock's semantics on Redisson's lock wire): [`Client::run_once`] and what
//! `#[run_once]` expands to.

use std::{future::Future, sync::Arc, time::Duration};

use parking_lot::Mutex;

use tokio::time::Instant;

use super::watch::{scoped, HoldWatch};
use crate::{
    client::Client,
    error::{Error, Result},
    lock::LockGuard,
};

/// What [`Client::run_once`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RunOnce<T> {
    /// The job ran to its end; its output.
    Ran(T),
    /// Another instance (Rust or Java) held the name: the job did not run.
    Skipped,
    /// The job was still running at `at_most`: it was dropped there and the name released.
    TimedOut,
}

impl<T> RunOnce<T> {
    /// The job's output if it ran to its end.
    pub fn ran(self) -> Option<T> {
        match self {
            RunOnce::Ran(t) => Some(t),
            _ => None,
        }
    }
}

fn check(name: &str, at_least: Duration, at_most: Duration) -> Result<()> {
    if at_most.is_zero() || at_least > at_most {
        return Err(Error::InvalidArgument(format!(
            "run_once {name}: need 0 <= at_least <= at_most and at_most > 0 (got {at_least:?}, \
             {at_most:?})"
        )));
    }
    crate::types::millis::lease_millis(at_most)?;
    Ok(())
}

impl Client {
    /// Runs `job` once across every instance that runs it under `name` (ShedLock's
    /// `lockAtLeastFor` / `lockAtMostFor`, on Redisson's lock wire: the reentrant lock `name`).
    ///
    /// * If another instance (Rust, or Java holding the `RLock` `name`) holds the name, returns
    ///   [`RunOnce::Skipped`] at once (one attempt, no wait).
    /// * Otherwise takes the name with a TTL of at least `at_least` (at least the watchdog
    ///   timeout) and runs `job` under the watchdog for at most `at_most` from the start: at
    ///   `at_most` the job's future is dropped, the name released and [`RunOnce::TimedOut`]
    ///   returned. The job gets a [`HoldWatch`] that tells it the moment the hold is in doubt
    ///   or lost (it is not cancelled then: it decides), and
    ///   [`assert_locked`](super::watch::assert_locked) works inside it.
    /// * **`at_least` is kept whatever ends the run**: the job's end, a panic, this future
    ///   dropped, a dropped connection, the process dying, a Redis restart with persistence.
    ///   The key's TTL covers `at_least` from the acquisition on (renewals only ever raise a
    ///   TTL); when the run ends early, the renewal stops and the TTL is set (owner-checked) to
    ///   what is left, so the name frees at `at_least` (if that call fails, at the latest
    ///   renewal's end: later, never sooner). After `at_least`, the name is released at once.
    ///
    /// A process that dies *during* the job stops renewing it: the name is free again at
    /// `at_least` or one [`lock_watchdog_timeout`](crate::Config::lock_watchdog_timeout) after
    /// the last renewal, whichever is later.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// use std::time::Duration;
    /// use redisson_lock::RunOnce;
    /// let outcome = client
    ///     .run_once("invoices:daily", Duration::from_secs(30), Duration::from_secs(600), |hold| async move {
    ///         hold.assert_locked()?;
    ///         // send the invoices
    ///         Ok::<u32, redisson_lock::Error>(12)
    ///     })
    ///     .await?;
    /// match outcome {
    ///     RunOnce::Ran(sent) => println!("sent {:?}", sent?),
    ///     RunOnce::Skipped => println!("another instance runs it"),
    ///     _ => println!("cut off at at_most"),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`InvalidArgument`](Error::InvalidArgument) unless `0 <= at_least <= at_most` and
    /// `at_most > 0` (nothing is sent); the acquisition's Redis or connection errors (the job
    /// does not run). Failures after the job ended (setting the TTL, the release) are logged,
    /// not returned: the job's work is done.
    ///
    /// # Cancel safety
    /// Dropping the future while the job runs drops the job; the name is kept until
    /// `at_least` (released then, or at once when `at_least` has passed) by a task of the
    /// client, as when the job ends.
    pub async fn run_once<F, Fut, T>(
        &self,
        name: &str,
        at_least: Duration,
        at_most: Duration,
        job: F,
    ) -> Result<RunOnce<T>>
    where
        F: FnOnce(HoldWatch) -> Fut,
        Fut: Future<Output = T>,
    {
        let Some((ending, watch, start)) = self.run_once_take(name, at_least, at_most).await?
        else {
            return Ok(RunOnce::Skipped);
        };
        let ran = tokio::time::timeout_at(start + at_most, scoped(watch.clone(), job(watch))).await;
        let raw = ending.name().to_owned();
        let outcome = match ran {
            Ok(output) => {
                crate::observe::run_once(&raw, "ran");
                RunOnce::Ran(output)
            }
            Err(_) => {
                crate::observe::run_once(&raw, "timed_out");
                RunOnce::TimedOut
            }
        };
        ending.finish().await;
        Ok(outcome)
    }

    /// Checks the bounds and takes the name for a run-once (`None`: skipped).
    async fn run_once_take(
        &self,
        name: &str,
        at_least: Duration,
        at_most: Duration,
    ) -> Result<Option<(Ending, HoldWatch, Instant)>> {
        check(name, at_least, at_most)?;
        let start = Instant::now();
        // A run is an owner of its own: a second run of the name skips, from any task.
        let lock = self.get_lock_with_owner(name, crate::types::owner::Owner::new());
        let Some(guard) = lock.try_lock_at_least(at_least).await? else {
            crate::observe::run_once(lock.raw_name(), "skipped");
            return Ok(None);
        };
        let watch = HoldWatch::of(&guard);
        let ending = Ending {
            guard: Some(guard),
            until: start + at_least,
            client: self.clone(),
        };
        Ok(Some((ending, watch, start)))
    }

    /// The first half of a run-once whose job runs elsewhere (the blocking facade's, on the
    /// calling thread): checks the bounds, takes the name (`None`: skipped) and arms the cut at
    /// `at_most`. Finish with [`Begun::finish`]; a `Begun` dropped without it (the job
    /// panicked) ends the hold as the job's end does.
    pub(crate) async fn run_once_begin(
        &self,
        name: &str,
        at_least: Duration,
        at_most: Duration,
    ) -> Result<Option<Begun>> {
        let Some((ending, watch, start)) = self.run_once_take(name, at_least, at_most).await?
        else {
            return Ok(None);
        };
        let slot = Arc::new(Mutex::new(Some(ending)));
        let cutter = self.spawn({
            let slot = slot.clone();
            let watch = watch.clone();
            async move {
                tokio::time::sleep_until(start + at_most).await;
                // Whoever takes the hold first decides: the job's end, or this cut.
                let Some(ending) = slot.lock().take() else {
                    return;
                };
                crate::observe::run_once(ending.name(), "timed_out");
                watch.cut();
                ending.finish().await;
            }
        });
        Ok(Some(Begun {
            slot,
            watch,
            cutter,
        }))
    }
}

/// The end of a run-once's hold, whatever ends the run: kept until `until` (its `at_least`) by
/// the key's TTL, released at once after it. It runs on the client's runtime, so a caller that
/// goes away meanwhile (a dropped future, a panic) ends nothing early: dropped unfinished, it
/// hands the end to the client.
struct Ending {
    guard: Option<LockGuard>,
    until: Instant,
    client: Client,
}

impl Ending {
    fn name(&self) -> &str {
        self.guard.as_ref().map_or("", |g| g.name())
    }

    /// Ends the hold and waits for it (the waiting may be cancelled: the end goes on).
    async fn finish(mut self) {
        if let Some(end) = self.hand_over() {
            let _ = end.await;
        }
    }

    fn hand_over(&mut self) -> Option<tokio::task::JoinHandle<()>> {
        let guard = self.guard.take()?;
        let until = self.until;
        Some(self.client.spawn(async move {
            let raw = guard.name().to_owned();
            match guard.keep_until(until).await {
                Ok(true) => {}
                Ok(false) => log::warn!("run-once {raw} was no longer held when its job ended"),
                Err(e) => log::warn!(
                    "keeping run-once {raw} until at_least failed ({e:#}); it ends when its TTL \
                     runs out"
                ),
            }
        }))
    }
}

impl Drop for Ending {
    fn drop(&mut self) {
        drop(self.hand_over());
    }
}

/// A run-once whose name is taken and whose job runs elsewhere (see
/// [`Client::run_once_begin`]): at `at_most` a task of the client releases the name and
/// marks the job's [`HoldWatch`] lost (a running synchronous job cannot be stopped; it sees
/// `Lost`, and [`assert_locked`](super::watch::assert_locked) fails from then on).
pub(crate) struct Begun {
    slot: Arc<Mutex<Option<Ending>>>,
    watch: HoldWatch,
    cutter: tokio::task::JoinHandle<()>,
}

impl Begun {
    /// The job's view of the hold.
    pub(crate) fn watch(&self) -> HoldWatch {
        self.watch.clone()
    }

    /// The job ended with `output`: [`RunOnce::TimedOut`] if the cut at `at_most` came first
    /// (the output is dropped: the name was released while the job ran), else the `at_least`
    /// rule of [`Client::run_once`] and [`RunOnce::Ran`].
    pub(crate) async fn finish<T>(self, output: T) -> RunOnce<T> {
        let taken = self.slot.lock().take();
        let Some(ending) = taken else {
            return RunOnce::TimedOut;
        };
        self.cutter.abort();
        crate::observe::run_once(ending.name(), "ran");
        ending.finish().await;
        RunOnce::Ran(output)
    }
}

impl Drop for Begun {
    /// Dropped without [`finish`](Self::finish) (the job panicked): the hold ends as at the
    /// job's end (kept until `at_least`), not at `at_most`.
    fn drop(&mut self) {
        if let Some(ending) = self.slot.lock().take() {
            self.cutter.abort();
            crate::observe::run_once(ending.name(), "ended");
            drop(ending);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_are_checked_before_anything_is_sent() {
        let s = Duration::from_secs;
        assert!(check("j", s(0), s(1)).is_ok());
        assert!(check("j", s(1), s(1)).is_ok());
        assert!(matches!(
            check("j", s(2), s(1)),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            check("j", s(0), s(0)),
            Err(Error::InvalidArgument(_))
        ));
    }
}
