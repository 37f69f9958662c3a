//! Support for the cross-process compatibility tests and the bench: the benchmark loop shared by
//! the `lock-peer` program's `bench` command and the `bench` example, the Java driver of real
//! Redisson (compiling and starting it), and the reading of a fairness run on one hot lock.

pub mod bench;
pub mod fairness;
pub mod java;
