//! The semaphore (Redisson `RSemaphore`, sync protocol §2): a string key holding the available
//! permits, anonymous permits, a channel on which every release announces the new count.
//!
//! Rooms, lowest first (as every synchronizer's): `calls` (the scripts' calls, from the
//! names), `handle` (the handle and its factory, every call but the taking), `permits` (the
//! taken permits' guard), `take` (the taking of permits: the engine's waiter). This file is
//! the face.

mod calls;
mod handle;
mod permits;
mod take;

pub(crate) use calls::Calls;
pub use handle::{RSemaphore, Semaphore};
pub use permits::SemaphorePermits;
