//! [`HoldWatch`]: a cloneable, owned view of one hold's state, handed to the code a recipe runs
//! (a run-once job, a leader's body), and [`assert_locked`], the check that code calls before a
//! side effect (ShedLock's `LockAssert.assertLocked()`), through a task-local set by the recipe.

use std::sync::Arc;

use crate::{
    error::{Error, Result},
    lock::{Guard, Kind},
    service::watchdog::{HoldState, LossSignal},
};

/// What the code a recipe runs knows of the hold it runs under: its [`state`](Self::state),
/// a future that resolves the moment it is no longer certain ([`lost`](Self::lost)), and
/// [`assert_locked`](Self::assert_locked). Cheap to clone; owned (`'static`), so it can move
/// into spawned tasks.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// use std::time::Duration;
/// client
///     .run_once("nightly", Duration::from_secs(60), Duration::from_secs(600), |hold| async move {
///         tokio::select! {
///             _ = hold.lost() => eprintln!("the hold is in doubt or lost: stop"),
///             _ = tokio::time::sleep(Duration::from_secs(1)) => {
///                 hold.assert_locked()?; // still held: do the side effect
///             }
///         }
///         Ok::<_, redisson_lock::Error>(())
///     })
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct HoldWatch {
    loss: Arc<LossSignal>,
    lock: Arc<str>,
    token: Option<u64>,
}

impl std::fmt::Debug for HoldWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HoldWatch")
            .field("lock", &self.lock)
            .field("state", &self.state())
            .field("token", &self.token)
            .finish()
    }
}

impl HoldWatch {
    pub(crate) fn of<K: Kind>(guard: &Guard<K>) -> Self {
        Self {
            loss: guard.loss_signal(),
            lock: guard.name().into(),
            token: guard.token_value(),
        }
    }

    /// The raw name of the lock the hold is of.
    pub fn lock_name(&self) -> &str {
        &self.lock
    }

    /// The fencing token of the hold's acquisition, for a fenced lock (an election's term).
    pub fn token(&self) -> Option<u64> {
        self.token
    }

    /// Where the hold stands (as [`Guard::state`](crate::Guard::state)).
    pub fn state(&self) -> HoldState {
        self.loss.state()
    }

    /// `true` while the hold is [`Held`](HoldState::Held): not in doubt, not lost.
    pub fn is_held(&self) -> bool {
        self.state() == HoldState::Held
    }

    /// Resolves the moment the hold is in doubt or lost (as
    /// [`Guard::lost`](crate::Guard::lost)).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future has no effect on the hold.
    pub async fn lost(&self) {
        self.loss.wait_not_held().await
    }

    /// `Ok(())` while the hold is [`Held`](HoldState::Held); else [`Error::LockLost`] (in doubt
    /// counts as lost: another client may hold the lock). Call it before a side effect.
    ///
    /// # Errors
    /// [`Error::LockLost`] as above.
    pub fn assert_locked(&self) -> Result<()> {
        if self.is_held() {
            Ok(())
        } else {
            Err(Error::LockLost {
                lock: self.lock.to_string(),
            })
        }
    }
}

tokio::task_local! {
    /// The hold of the recipe whose code this task is running.
    static CURRENT: HoldWatch;
}

/// Runs `fut` with `watch` as the hold [`assert_locked`] checks.
pub(crate) async fn scoped<F: std::future::Future>(watch: HoldWatch, fut: F) -> F::Output {
    CURRENT.scope(watch, fut).await
}

/// ShedLock's `LockAssert.assertLocked()`: `Ok(())` when called from code a recipe runs (a
/// [`run_once`](crate::Client::run_once) job, a `#[run_once]` function, a
/// [`run_as_leader`](crate::Election::run_as_leader) body) while its hold is
/// [`Held`](HoldState::Held). The check follows the task that polls the code; a task that code
/// spawns has no hold of its own: give it the [`HoldWatch`] instead.
///
/// ```no_run
/// fn charge_cards() -> redisson_lock::Result<()> {
///     redisson_lock::assert_locked()?; // refuse to run outside the nightly job's hold
///     // ... the side effect
///     Ok(())
/// }
/// ```
///
/// # Errors
/// [`Error::LockLost`] when the hold is in doubt or lost; [`Error::NotHeld`] (with empty
/// names) when called outside any recipe's code.
pub fn assert_locked() -> Result<()> {
    CURRENT
        .try_with(HoldWatch::assert_locked)
        .unwrap_or_else(|_| {
            Err(Error::NotHeld {
                lock: String::new(),
                owner: String::new(),
            })
        })
}
