//! [`HoldWatch`]: a cloneable, owned view of one hold's state, handed to the code a recipe runs
//! (a run-once job, a leader's body), and [`assert_locked`], the check that code calls before a
//! side effect (ShedLock's `LockAssert.assertLocked()`), through a task-local set by the recipe.

use std::{cell::RefCell, sync::Arc, time::Duration};

use crate::{
    error::{Error, Result},
    lock::{Guard, Kind},
    service::watchdog::{HoldState, LossSignal},
    sync::expirable::PermitGuard,
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
    /// Lost when the recipe ended the hold under the code's feet (a blocking run-once job cut
    /// at `at_most`): the hold's own signal is shared with its owner's other guards.
    cut: Arc<LossSignal>,
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
        Self::over(guard.loss_signal(), guard.name(), guard.token_value())
    }

    /// The view of a permit of a permit-expirable semaphore (`lock_name` is the semaphore's).
    pub(crate) fn of_permit(permit: &PermitGuard) -> Self {
        Self::over(permit.loss_signal(), permit.semaphore().name(), None)
    }

    fn over(loss: Arc<LossSignal>, lock: &str, token: Option<u64>) -> Self {
        let never = crate::types::millis::later(tokio::time::Instant::now(), Duration::MAX);
        Self {
            loss,
            lock: lock.into(),
            token,
            cut: LossSignal::new(never),
        }
    }

    /// The recipe ended the hold while its code runs: `Lost` for the code from now on.
    pub(crate) fn cut(&self) {
        self.cut.mark_lost();
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
        if self.cut.is_lost() {
            return HoldState::Lost;
        }
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
        tokio::select! {
            _ = self.loss.wait_not_held() => {}
            _ = self.cut.wait_lost() => {}
        }
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

/// The lock guard's view (here, above the lock family: the view is the recipes').
impl<K: Kind> Guard<K> {
    /// An owned view of the hold's state, for tasks the holder spawns: its
    /// [`state`](HoldWatch::state), [`lost`](HoldWatch::lost) and
    /// [`assert_locked`](HoldWatch::assert_locked) (call it before a side effect) follow this
    /// hold; its [`lock_name`](HoldWatch::lock_name) is the lock's and its
    /// [`token`](HoldWatch::token) the fenced lock's token. It does not keep the lock: the
    /// guard does.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let guard = client.get_lock("orders").lock().await?;
    /// let watch = guard.watch();
    /// tokio::spawn(async move {
    ///     watch.assert_locked()?; // still held: write
    ///     Ok::<_, redisson_lock::Error>(())
    /// });
    /// # Ok(()) }
    /// ```
    pub fn watch(&self) -> HoldWatch {
        HoldWatch::of(self)
    }
}

/// The permit guard's view (here, above the synchronizers: the view is the recipes').
impl PermitGuard {
    /// An owned view of the permit's state, for tasks the holder spawns: its
    /// [`state`](HoldWatch::state), [`lost`](HoldWatch::lost) and
    /// [`assert_locked`](HoldWatch::assert_locked) (call it before a side effect) follow
    /// this permit; its [`lock_name`](HoldWatch::lock_name) is the semaphore's name and
    /// it has no [`token`](HoldWatch::token). It does not keep the permit: the guard
    /// does.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let permit = client.get_permit_expirable_semaphore("exports").acquire(None).await?;
    /// let watch = permit.watch();
    /// tokio::spawn(async move {
    ///     watch.assert_locked()?; // still held: export
    ///     Ok::<_, redisson_lock::Error>(())
    /// });
    /// # Ok(()) }
    /// ```
    pub fn watch(&self) -> HoldWatch {
        HoldWatch::of_permit(self)
    }
}

tokio::task_local! {
    /// The hold of the recipe whose code this task is running.
    static CURRENT: HoldWatch;
}

std::thread_local! {
    /// The hold of the recipe whose synchronous code this thread is running (the blocking
    /// facade's run-once job).
    static THREAD_CURRENT: RefCell<Option<HoldWatch>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread with `watch` as the hold [`assert_locked`] checks (a blocking job).
pub(crate) fn scoped_on_thread<T>(watch: HoldWatch, f: impl FnOnce() -> T) -> T {
    struct Reset(Option<HoldWatch>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let before = self.0.take();
            THREAD_CURRENT.with(|c| *c.borrow_mut() = before);
        }
    }
    let before = THREAD_CURRENT.with(|c| c.borrow_mut().replace(watch));
    let _reset = Reset(before);
    f()
}

/// Runs `fut` with `watch` as the hold [`assert_locked`] checks.
pub(crate) async fn scoped<F: std::future::Future>(watch: HoldWatch, fut: F) -> F::Output {
    CURRENT.scope(watch, fut).await
}

/// ShedLock's `LockAssert.assertLocked()`: `Ok(())` when called from code a recipe runs (a
/// [`run_once`](crate::Client::run_once) job, a `#[run_once]` function, a
/// [`run_as_leader`](crate::Election::run_as_leader) body, a blocking
/// `run_once` job (`blocking::Client::run_once`) on its thread) while its hold is
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
            THREAD_CURRENT.with(|c| match &*c.borrow() {
                Some(watch) => watch.assert_locked(),
                None => Err(Error::NotHeld {
                    lock: String::new(),
                    owner: String::new(),
                }),
            })
        })
}
