//! The synchronizers Java services share through Redisson besides locks (sync protocol §1–4):
//! [`Semaphore`] (`RSemaphore`), [`PermitExpirableSemaphore`] (`RPermitExpirableSemaphore`)
//! and [`CountDownLatch`] (`RCountDownLatch`). This file is their face: the modules and what
//! they export.
//!
//! They run on the lock family's machinery: every call is a [`ScriptCall`] run by the core,
//! and every acquisition or wait is a waiter of the one acquire engine
//! (`crate::engine`: a semaphore's taking of permits, a permit's taking, a latch's look
//! at its count), which joins the client's one subscription of the object's channel (read as
//! the object's messages mean, [`Reading`]) and runs the same wait, retry, undo and cancel
//! shell as a lock's claim. Acquisitions Redisson syncs to a replica run through the same
//! replica-sync path (`WAIT`) as lock acquisitions; the calls it syncs without undo, and the
//! acquisitions undone when unreplicated, are in `synced`.
//!
//! Java's semaphore and latch waiters have no time-based fallback: a missed message leaves them
//! asleep until their deadline. This crate's waiters also re-check after
//! [`Config::lock_watchdog_timeout`](crate::Config::lock_watchdog_timeout) without a message
//! (never sooner, so no busy loop), so a lost message costs at most that long.
//!
//! A wait that meets a transient failure (a command timeout, a lost connection) starts again
//! within its deadline, as a lock wait does, where that is safe: a latch's attempt is a read,
//! and a permit-expirable semaphore's attempt releases the permit it may have taken by its id.
//! A semaphore's attempt is not repeated: its permits are anonymous, so an attempt whose reply
//! was lost cannot be told apart from one that never ran, and trying again could take the
//! permits twice; the error ends the wait and the caller decides.
//!
//! [`ScriptCall`]: crate::conn::scripts::ScriptCall
//! [`Reading`]: crate::service::pubsub::Reading

pub(crate) mod expirable;
pub(crate) mod latch;
pub(crate) mod semaphore;
mod synced;

pub use expirable::{PermitExpirableSemaphore, PermitGuard, RPermitExpirableSemaphore};
pub use latch::{CountDownLatch, RCountDownLatch};
pub use semaphore::{RSemaphore, Semaphore, SemaphorePermits};
