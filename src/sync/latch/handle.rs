//! The latch's handle and its factory: `CountDownLatch` (`RCountDownLatch`),
//! `Client::get_count_down_latch`, and every call but the waiting (`wait`): set, count down,
//! count, delete.

use super::calls::Calls;
use crate::{
    client::Client,
    conn::core::flag,
    error::{Error, Result},
    types::names,
};

/// A distributed count-down latch, wire-compatible with Redisson's `RCountDownLatch`.
///
/// The key `N` holds the count (absent: 0, open). [`count_down`](Self::count_down) deletes it
/// when the count reaches zero and announces `0` on
/// `redisson_countdownlatch__channel__{N}`, which wakes every waiter of every client.
///
/// On a cluster the channel's hash tag is `N` up to its first `}`; a name containing `}` (such
/// as `{t}x`) puts the channel in another slot than the key, and every call that needs both
/// fails with [`Error::CrossSlot`] before anything is sent (Redisson fails with `CROSSSLOT`).
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// let latch = client.get_count_down_latch("workers-ready");
/// latch.try_set_count(2).await?;
/// // in each worker, when ready:
/// latch.count_down().await?;
/// // in the coordinator:
/// let opened = latch.wait_for(std::time::Duration::from_secs(10)).await?;
/// # let _ = opened;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct CountDownLatch {
    pub(super) client: Client,
    pub(super) name: String,
    pub(super) channel: String,
}

/// Redisson's name for [`CountDownLatch`].
pub type RCountDownLatch = CountDownLatch;

impl std::fmt::Debug for CountDownLatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountDownLatch")
            .field("name", &self.name)
            .finish()
    }
}

impl Client {
    /// The count-down latch `name` (Redisson `getCountDownLatch`); the name goes through the
    /// configured [`NameMapper`](crate::NameMapper). Makes no call.
    pub fn get_count_down_latch(&self, name: &str) -> CountDownLatch {
        let name = self.map_name(name);
        CountDownLatch {
            client: self.clone(),
            channel: names::latch_channel(&name),
            name,
        }
    }
}

impl CountDownLatch {
    /// The raw name in Redis (after the name mapper): the key holding the count.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn calls(&self) -> Calls<'_> {
        Calls {
            name: &self.name,
            channel: &self.channel,
            publish: self.client.core().messaging().publish_command(),
        }
    }

    /// Sets the count if the latch does not exist (Redisson `trySetCount`) and announces `1`
    /// ("closed"). `true` when set, `false` when a count was there (nothing changed).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero count (nothing sent: a latch of count 0 is open
    /// and has no key); Redis and connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may or may not have set the count.
    pub async fn try_set_count(&self, count: u64) -> Result<bool> {
        if count == 0 {
            return Err(Error::InvalidArgument(
                "a count-down latch's count is at least 1".into(),
            ));
        }
        let call = self.calls().set(count);
        let reply = self.client.core().run(call, &self.name).await?;
        crate::observe::synchronizer("count_down_latch", &self.name, "set");
        flag(&reply, &self.name)
    }

    /// Counts down by one (Redisson `countDown`). The step to zero deletes the latch and
    /// announces `0`, which opens every waiter; counting down an open latch changes nothing.
    ///
    /// # Errors
    /// Redis and connection errors. A lost reply is not retried (it would count twice).
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may or may not have counted down.
    pub async fn count_down(&self) -> Result<()> {
        let call = self.calls().count_down();
        self.client.core().run(call, &self.name).await?;
        crate::observe::synchronizer("count_down_latch", &self.name, "count_down");
        Ok(())
    }

    /// The count (Redisson `getCount`): 0 when the latch is open (absent).
    ///
    /// # Errors
    /// Redis and connection errors ([`Error::Redis`] for a key that is not a number).
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn count(&self) -> Result<u64> {
        let n = self.client.core().integer(&self.name, &self.name).await?;
        Ok(u64::try_from(n).unwrap_or(0))
    }

    /// Deletes the latch (Redisson `delete`) and announces `1`: `true` when it existed.
    /// Waiters are not opened by a deletion (as in Redisson); they see the count 0 when they
    /// next look (at their deadline, or after a message).
    ///
    /// # Errors
    /// Redis and connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may or may not have deleted it.
    pub async fn delete(&self) -> Result<bool> {
        let call = self.calls().delete();
        let reply = self.client.core().run(call, &self.name).await?;
        flag(&reply, &self.name)
    }
}
