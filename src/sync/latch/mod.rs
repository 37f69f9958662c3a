//! The count-down latch (Redisson `RCountDownLatch`, sync protocol §4): a string key holding
//! the count; the step to zero deletes it and announces `0`, which opens every waiter.
//!
//! Rooms, lowest first (as every synchronizer's): `calls` (the scripts' calls, from the
//! names), `handle` (the handle and its factory, every call but the waiting), `wait` (the
//! waiting: the engine's waiter). This file is the face.

mod calls;
mod handle;
mod wait;

pub use handle::{CountDownLatch, RCountDownLatch};
