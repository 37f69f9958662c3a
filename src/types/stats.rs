//! A point-in-time view of one client's background state.

use std::collections::BTreeMap;

/// A snapshot of one [`Client`](crate::Client)'s locks, renewals and subscriptions, taken by
/// [`Client::stats`](crate::Client::stats). Plain data: the numbers may change right after.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// let lock = client.get_lock("orders");
/// let guard = lock.lock().await?;
/// let stats = client.stats();
/// assert_eq!(stats.watchdog_holds, 1); // renewed by the watchdog
/// assert_eq!(lock.local_waiters(), 0); // nobody in this client waits for it
/// guard.unlock().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// (lock, owner) holds the watchdog is renewing: locks held in watchdog mode.
    pub watchdog_holds: usize,
    /// Renewal script calls made since the client connected (one call renews up to
    /// `lock_watchdog_batch_size` holds).
    pub renewal_calls: u64,
    /// Lock channels this client is subscribed to: one per channel with local waiters.
    pub subscribed_channels: usize,
    /// Local waiters of any lock (the sum of [`channels`](Self::channels)): asleep on a
    /// channel, or queued behind the first waiter of their lock (the local hand-off queue).
    pub waiters: usize,
    /// Local waiters per lock channel (e.g. `redisson_lock__channel:{orders}`,
    /// `redisson_rwlock:{catalog}`, or a fair lock's per-waiter channel), queued waiters
    /// included: the waiters of one queue share one subscription.
    pub channels: BTreeMap<String, usize>,
    /// (lock, owner) pairs whose hold count this client keeps in its owner ledger: owners
    /// holding a lock through this client, and, until their last lease has run out, owners of
    /// holds left to expire (a kept leased guard) or of a count unknown after an error.
    pub owner_entries: usize,
    /// Local wait lines alive: one per lock of a queueing kind (reentrant, fenced, write) with
    /// local waiters, kept while a local owner that took the lock from it holds it.
    pub wait_lines: usize,
    /// Releases handed to the background (dropped guards) not finished yet: running (a few
    /// dozen at most) or waiting for their turn.
    pub background_releases: usize,
    /// Releases since the client connected that handed the lock to a local waiter at once
    /// (the local hand-off queue; see `Config::local_hand_off`).
    pub local_hand_overs: u64,
    /// Releases since the client connected after which the local waiters raced for the lock
    /// like every other client's waiters, on the unlock message, instead (the hand-off
    /// policy's contests, while another client waits; every release with `LocalHandOff::Off`).
    pub hand_off_contests: u64,
}

impl Stats {
    /// Local waiters on one channel (0 when not subscribed). For the waiters of one lock
    /// whatever its channels, see [`Lock::local_waiters`](crate::Lock::local_waiters).
    pub fn channel_waiters(&self, channel: &str) -> usize {
        self.channels.get(channel).copied().unwrap_or(0)
    }
}
