//! Support for the cross-process compatibility tests and the bench: the benchmark loop shared by
//! the `lock-peer` program's `bench` command and the `bench` example, the Java driver of real
//! Redisson (compiling and starting it), the reading of a fairness run on one hot lock, and the
//! test side of the peer protocol (`peer`: a peer process and its replies).

pub mod bench;
pub mod fairness;
pub mod java;
pub mod peer;
