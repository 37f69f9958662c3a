//! The recipes for synchronous code: `Election` / `Leadership` / `LeaderWatch` over the async
//! ones, and `Client::run_once` (the job on the calling thread between the recipe's
//! `run_once_begin` and `Begun::finish`: the hold, not the job, is cut at `at_most`).

use std::{sync::mpsc::RecvTimeoutError, sync::Arc, time::Duration};

use super::client::{Client, Rt};
use crate::error::Result;

impl Client {
    /// The leader election `name` (as [`crate::Client::get_election`]).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
    /// let leadership = client.get_election("scheduler").campaign()?;
    /// println!("leading in term {}", leadership.term());
    /// leadership.resign()?;
    /// # Ok(()) }
    /// ```
    pub fn get_election(&self, name: &str) -> Election {
        Election {
            inner: self.inner.get_election(name),
            rt: self.rt.clone(),
        }
    }

    /// Runs `job` on the calling thread once across every instance that runs it under `name`
    /// (as [`crate::Client::run_once`]: skipped at once when another instance, Rust or Java,
    /// holds the name; the hold renewed by the watchdog while the job runs; an early end keeps
    /// the name until `at_least` by the key's TTL).
    ///
    /// **Cutting at `at_most`.** A running synchronous job cannot be stopped from outside, so
    /// the blocking form cuts the *hold*, not the job: at `at_most` the client's runtime
    /// releases the name, and the job's [`HoldWatch`](crate::HoldWatch) turns
    /// [`Lost`](crate::HoldState::Lost) at that moment ([`assert_locked`](crate::assert_locked)
    /// and `hold.assert_locked()` fail from then on, on the job's thread). The job should check
    /// before each side effect and return. A job that returns after the cut gives
    /// [`RunOnce::TimedOut`](crate::RunOnce::TimedOut) (its output is dropped: another
    /// instance may have run the tick meanwhile).
    ///
    /// ```no_run
    /// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
    /// use std::time::Duration;
    /// let outcome = client.run_once("reports:hourly", Duration::from_secs(10), Duration::from_secs(300), |hold| {
    ///     for batch in 0..10 {
    ///         hold.assert_locked()?; // stop at the first batch after at_most (or a loss)
    ///         let _ = batch; // ... one batch of the report
    ///     }
    ///     Ok::<_, redisson_lock::Error>(())
    /// })?;
    /// println!("{outcome:?}");
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`crate::Client::run_once`].
    pub fn run_once<F, T>(
        &self,
        name: &str,
        at_least: Duration,
        at_most: Duration,
        job: F,
    ) -> Result<crate::RunOnce<T>>
    where
        F: FnOnce(crate::HoldWatch) -> T,
    {
        let Some(begun) = self
            .rt
            .block_on(self.inner.run_once_begin(name, at_least, at_most))?
        else {
            return Ok(crate::RunOnce::Skipped);
        };
        let watch = begun.watch();
        let output = crate::recipes::watch::scoped_on_thread(watch.clone(), || job(watch));
        Ok(self.rt.block_on(begun.finish(output)))
    }
}

/// A blocking leader election (see [`crate::Election`]); every campaign is a fresh owner.
#[derive(Debug, Clone)]
pub struct Election {
    inner: crate::Election,
    rt: Arc<Rt>,
}

impl Election {
    /// Waits until this instance leads (as [`crate::Election::campaign`]).
    ///
    /// # Errors
    /// As [`crate::Election::campaign`].
    pub fn campaign(&self) -> Result<Leadership> {
        let inner = self.rt.block_on(self.inner.campaign())?;
        Ok(Leadership {
            inner: Some(inner),
            rt: self.rt.clone(),
        })
    }

    /// Campaigns for at most `wait` (as [`crate::Election::try_campaign_for`]).
    ///
    /// # Errors
    /// As [`crate::Election::try_campaign_for`].
    pub fn try_campaign_for(&self, wait: Duration) -> Result<Option<Leadership>> {
        let inner = self.rt.block_on(self.inner.try_campaign_for(wait))?;
        Ok(inner.map(|inner| Leadership {
            inner: Some(inner),
            rt: self.rt.clone(),
        }))
    }

    /// Who leads now (as [`crate::Election::leader`]).
    ///
    /// # Errors
    /// As [`crate::Election::leader`].
    pub fn leader(&self) -> Result<Option<crate::Leader>> {
        self.rt.block_on(self.inner.leader())
    }

    /// Who leads, as it changes (as [`crate::Election::observe`]): a blocking iterator whose
    /// first item is who leads now.
    ///
    /// ```no_run
    /// # fn demo(client: redisson_lock::blocking::Client) -> redisson_lock::Result<()> {
    /// let leaders = client.get_election("scheduler").observe()?;
    /// for change in leaders {
    ///     match change? {
    ///         Some(leader) => println!("{} leads (term {})", leader.holder, leader.term),
    ///         None => println!("nobody leads"),
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`crate::Election::observe`].
    pub fn observe(&self) -> Result<LeaderWatch> {
        self.observe_every(crate::DEFAULT_OBSERVE_POLL)
    }

    /// As [`observe`](Self::observe), looking at most every `poll` (as
    /// [`crate::Election::observe_every`]).
    ///
    /// # Errors
    /// As [`crate::Election::observe_every`].
    pub fn observe_every(&self, poll: Duration) -> Result<LeaderWatch> {
        let inner = self.rt.block_on(self.inner.observe_every(poll))?;
        Ok(LeaderWatch {
            inner,
            rt: self.rt.clone(),
        })
    }
}

/// Who leads an election, as it changes, for synchronous code (the blocking twin of
/// [`crate::LeaderWatch`]), from [`Election::observe`]: an [`Iterator`] whose first item is who
/// leads now and every later one the next change (`Ok(None)`: nobody leads), ending once the
/// client is shut down; [`next_timeout`](Self::next_timeout) for a bounded wait.
#[derive(Debug)]
pub struct LeaderWatch {
    inner: crate::LeaderWatch,
    rt: Arc<Rt>,
}

impl LeaderWatch {
    /// Waits at most `timeout` for the next change (the first call: who leads now).
    ///
    /// # Errors
    /// [`RecvTimeoutError::Timeout`] when nothing changed within `timeout` (the watch goes on:
    /// a later change is returned by the next call); [`RecvTimeoutError::Disconnected`] once
    /// the client is shut down. A failed look is an item, `Ok(Err(_))`, as the iterator's.
    pub fn next_timeout(
        &mut self,
        timeout: Duration,
    ) -> std::result::Result<Result<Option<crate::Leader>>, RecvTimeoutError> {
        self.rt.next_within(timeout, self.inner.next())
    }
}

impl Iterator for LeaderWatch {
    type Item = Result<Option<crate::Leader>>;

    /// Blocks until the next change (the first call: who leads now); `None` once the client
    /// is shut down.
    fn next(&mut self) -> Option<Self::Item> {
        self.rt.block_on(self.inner.next())
    }
}

/// A blocking leadership (see [`crate::Leadership`]); dropping it resigns in the background.
#[derive(Debug)]
#[must_use = "dropping the leadership resigns at once"]
pub struct Leadership {
    inner: Option<crate::Leadership>,
    rt: Arc<Rt>,
}

impl Leadership {
    fn get(&self) -> &crate::Leadership {
        self.inner
            .as_ref()
            .expect("leadership present until resigned")
    }

    /// The term (the fencing token).
    pub fn term(&self) -> u64 {
        self.get().term()
    }

    /// Where the hold of the election's lock stands.
    pub fn state(&self) -> crate::HoldState {
        self.get().state()
    }

    /// `true` only while the hold is `Held` (a leader in doubt does not lead).
    pub fn is_leading(&self) -> bool {
        self.get().is_leading()
    }

    /// An owned view of the hold (for [`HoldWatch::assert_locked`](crate::HoldWatch::assert_locked)).
    pub fn watch(&self) -> crate::HoldWatch {
        self.get().watch()
    }

    /// Publishes `value` beside the lock (as [`crate::Leadership::proclaim`]).
    ///
    /// # Errors
    /// As [`crate::Leadership::proclaim`].
    pub fn proclaim(&self, value: &str) -> Result<bool> {
        self.rt.block_on(self.get().proclaim(value))
    }

    /// Resigns (as [`crate::Leadership::resign`]).
    ///
    /// # Errors
    /// As [`crate::Leadership::resign`].
    pub fn resign(mut self) -> Result<()> {
        let l = self
            .inner
            .take()
            .expect("leadership present until resigned");
        self.rt.block_on(l.resign())
    }
}
