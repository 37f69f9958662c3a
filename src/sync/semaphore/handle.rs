//! The semaphore's handle and its factory: `Semaphore` (`RSemaphore`), `Client::get_semaphore`,
//! and every call but the taking of permits (`take`): set, release, available, drain, add,
//! delete.

use std::time::Duration;

use super::calls::Calls;
use crate::{
    client::Client,
    conn::core::{flag, integer},
    error::{Error, Result},
    sync::synced::run_synced,
    types::names,
};

/// The object kind in logs and metrics.
pub(super) const OBJECT: &str = "semaphore";

/// A distributed counting semaphore, wire-compatible with Redisson's `RSemaphore`.
///
/// The key `N` is a string holding the available permits; nothing records who took them, so
/// any client may release any number (a Java service can release what a Rust service took).
/// A release announces the new count on `redisson_sc:{N}`; a waiter of any client wakes on it
/// (as many waiters per client as the announced permits allow) and tries again.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// let semaphore = client.get_semaphore("pool");
/// semaphore.try_set_permits(3).await?;
/// let permit = semaphore.acquire(1).await?;
/// // ... use the resource ...
/// drop(permit); // given back (or `permit.release().await?`)
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Semaphore {
    pub(super) client: Client,
    pub(super) name: String,
    pub(super) channel: String,
}

/// Redisson's name for [`Semaphore`].
pub type RSemaphore = Semaphore;

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore")
            .field("name", &self.name)
            .finish()
    }
}

impl Client {
    /// The semaphore `name` (Redisson `getSemaphore`); the name goes through the configured
    /// [`NameMapper`](crate::NameMapper). Makes no call.
    pub fn get_semaphore(&self, name: &str) -> Semaphore {
        let name = self.map_name(name);
        Semaphore {
            client: self.clone(),
            channel: names::semaphore_channel(&name),
            name,
        }
    }
}

impl Semaphore {
    /// The raw name in Redis (after the name mapper): the key holding the permits.
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(super) fn calls(&self) -> Calls<'_> {
        Calls {
            name: &self.name,
            channel: &self.channel,
            publish: self.client.core().messaging().publish_command(),
        }
    }

    /// Sets the permits if the semaphore does not exist yet (Redisson `trySetPermits`), and
    /// announces them. `true` when set, `false` when it existed (nothing changed).
    ///
    /// # Errors
    /// Redis and connection errors; [`Error::NotReplicated`] when replica sync is on and no
    /// replica acknowledged (the master has the permits).
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may or may not have set the permits.
    pub async fn try_set_permits(&self, permits: u64) -> Result<bool> {
        self.set(permits, 0).await
    }

    /// As [`try_set_permits`](Self::try_set_permits), with a time to live for the key
    /// (Redisson 3.29+ `trySetPermits(permits, timeToLive)`): the semaphore disappears, with
    /// its permits, after `ttl`.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero `ttl` (nothing sent); else as
    /// [`try_set_permits`](Self::try_set_permits).
    ///
    /// # Cancel safety
    /// As [`try_set_permits`](Self::try_set_permits).
    pub async fn try_set_permits_with_ttl(&self, permits: u64, ttl: Duration) -> Result<bool> {
        let ms = crate::types::millis::clamp_millis(ttl);
        if ms == 0 {
            return Err(Error::InvalidArgument(
                "a semaphore's time to live is at least 1 ms".into(),
            ));
        }
        self.set(permits, ms).await
    }

    async fn set(&self, permits: u64, ttl_ms: u64) -> Result<bool> {
        let call = self.calls().set(permits, ttl_ms);
        let reply = run_synced(&self.client, call, &self.name, (OBJECT, "set")).await?;
        flag(&reply, &self.name)
    }
    /// SEM-REL without the replica sync (an undo).
    pub(super) async fn give_back(&self, permits: u64) -> Result<i64> {
        let call = self.calls().release(permits);
        let reply = self.client.core().run(call, &self.name).await?;
        integer(&reply, &self.name)
    }

    /// Gives `permits` back in the background, once (the permits are anonymous: a repeat
    /// could give them back twice); `what` names them in the log of a failure.
    pub(super) fn give_back_in_background(&self, permits: u64, what: &str) {
        let semaphore = self.clone();
        self.client.release_in_background(
            format!(
                "{permits} {what} of {} (tried once: anonymous permits)",
                self.name
            ),
            move || async move { semaphore.give_back(permits).await.map(drop) },
        );
    }

    /// Gives back `permits` permits (Redisson `release(permits)`), creating the semaphore if
    /// it does not exist, and announces the new count, which wakes as many waiters (of every
    /// client) as it allows. Zero permits make no call.
    ///
    /// # Errors
    /// Redis and connection errors; [`Error::NotReplicated`] when replica sync is on and no
    /// replica acknowledged (the master has the permits).
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may or may not have released the permits.
    pub async fn release(&self, permits: u64) -> Result<()> {
        if permits == 0 {
            return Ok(());
        }
        run_synced(
            &self.client,
            self.calls().release(permits),
            &self.name,
            (OBJECT, "release"),
        )
        .await?;
        Ok(())
    }

    /// The available permits (Redisson `availablePermits`): 0 when the semaphore does not
    /// exist; negative after more permits were removed than there were.
    ///
    /// # Errors
    /// Redis and connection errors ([`Error::Redis`] for a key that is not a number).
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn available_permits(&self) -> Result<i64> {
        self.client.core().integer(&self.name, &self.name).await
    }

    /// Takes every available permit (Redisson `drainPermits`) and returns how many that was;
    /// 0 when the semaphore does not exist. Announces nothing.
    ///
    /// # Errors
    /// Redis and connection errors; [`Error::NotReplicated`] as for
    /// [`release`](Self::release) (the permits were taken).
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may have taken the permits.
    pub async fn drain_permits(&self) -> Result<i64> {
        let call = self.calls().drain();
        let reply = run_synced(&self.client, call, &self.name, (OBJECT, "drain")).await?;
        integer(&reply, &self.name)
    }

    /// Adds `permits` (or removes, when negative) to the available permits (Redisson
    /// `addPermits`), creating the semaphore if needed, and announces the new count.
    ///
    /// # Errors
    /// Redis and connection errors; [`Error::NotReplicated`] as for
    /// [`release`](Self::release). Never run twice: a lost reply is not retried.
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may or may not have added the permits.
    pub async fn add_permits(&self, permits: i64) -> Result<()> {
        let call = self.calls().add(permits);
        run_synced(&self.client, call, &self.name, (OBJECT, "add")).await?;
        Ok(())
    }

    /// Deletes the semaphore (Redisson `delete`): `true` when it existed. Announces nothing,
    /// as Redisson does: waiters keep waiting.
    ///
    /// # Errors
    /// Redis and connection errors.
    ///
    /// # Cancel safety
    /// Dropping the future after the call was sent may or may not have deleted it.
    pub async fn delete(&self) -> Result<bool> {
        let n = self.client.core().delete(&[&self.name], &self.name).await?;
        Ok(n > 0)
    }
}
