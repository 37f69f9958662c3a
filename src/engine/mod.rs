//! The one acquisition engine every lock kind and synchronizer waits through: a waiter's
//! attempts ([`Waiter`]: a lock's claim, a semaphore's take, a permit's take, a latch's look)
//! run in one wait, retry, undo and cancel shell ([`acquire`]), which sleeps between them on
//! a channel's wake-ups, a local wait line or a back-off schedule ([`Schedule`]), and opens
//! the acquisition's observation span itself.
//!
//! Rooms, lowest first: `waiter` (the vocabulary a waiter speaks: [`Step`], [`Wait`],
//! [`SleepOn`], [`Won`], [`Orphan`], [`detach`]; the back-off [`Schedule`]), `sleep` (the
//! sleeping loops), `shell` (the engine itself). None imports one beside or above it but in
//! that order.

mod shell;
mod sleep;
mod waiter;

pub(crate) use shell::{acquire, Observed};
pub(crate) use waiter::{
    detach, Abandoned, AnySchedule, Orphan, Schedule, SleepOn, Step, Turn, Wait, Waiter, Won,
};
