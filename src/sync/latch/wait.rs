//! Waiting for a latch to open: `CountDownLatch::wait` and `wait_for`, and the engine's waiter
//! `Opening` (a look at the count; the last look at the deadline is the engine's).

use std::time::Duration;

use super::handle::CountDownLatch;
use crate::{
    client::Client,
    engine::{self, Observed, SleepOn, Step, Turn, Wait, Waiter, Won},
    error::Result,
    service::pubsub::Reading,
};

impl CountDownLatch {
    /// Waits without limit until the count is 0 (Redisson `await()`). A transient failure
    /// (a command timeout, a lost connection) does not end the wait: it reads again after a
    /// pause.
    ///
    /// # Errors
    /// Redis errors that are not transient; [`Error::PermissionDenied`](crate::error::Error::PermissionDenied) for a channel it may
    /// not listen on.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped wait leaves the channel and nothing else.
    pub async fn wait(&self) -> Result<()> {
        self.wait_until(Wait::Until(None)).await.map(drop)
    }

    /// Waits at most `timeout` until the count is 0 (Redisson `await(timeout)`): `true` when
    /// it is 0, `false` when the time passed first. The count is read once more at the
    /// deadline, as Redisson does, so a latch opened unheard still gives `true`. A zero
    /// `timeout` reads the count once.
    ///
    /// # Errors
    /// As [`wait`](Self::wait).
    ///
    /// # Cancel safety
    /// As [`wait`](Self::wait).
    pub async fn wait_for(&self, timeout: Duration) -> Result<bool> {
        self.wait_until(Wait::for_duration(timeout)).await
    }

    async fn wait_until(&self, wait: Wait) -> Result<bool> {
        let seen = Observed {
            kind: "count_down_latch",
            owner: "",
            wait: wait.remaining(),
            lease: None,
        };
        Ok(engine::acquire(&Opening(self), wait, seen)
            .await?
            .map(Won::take)
            .is_some())
    }
}

/// A look at a latch's count: the engine's waiter for [`CountDownLatch::wait`] and
/// [`CountDownLatch::wait_for`]. Done when the count is 0.
struct Opening<'a>(&'a CountDownLatch);

impl Waiter for Opening<'_> {
    /// A look takes nothing.
    type Won = ();
    /// Nothing to replicate: a read.
    const RETRIES_UNREPLICATED_ONCE: bool = true;
    /// The last look at the count at the deadline, as Redisson's.
    const LOOKS_AGAIN_AT_DEADLINE: bool = true;

    fn client(&self) -> &Client {
        &self.0.client
    }

    fn name(&self) -> &str {
        &self.0.name
    }

    /// Reads the count (a read: nothing to undo, no task of its own).
    async fn attempt(&self, _wait: Wait, _turn: &mut Turn<'_>) -> Result<Step<Won<()>>> {
        Ok(match self.0.count().await? {
            0 => Step::Done(Won::new(())),
            _ => Step::Busy { frees_in: None },
        })
    }

    /// A read may be repeated.
    fn repeatable(&self) -> bool {
        true
    }

    fn sleep_on(&self) -> SleepOn {
        SleepOn::Channel {
            channel: self.0.channel.clone(),
            reading: Reading::Opening,
        }
    }
}
