//! Support for the cross-process compatibility tests: the benchmark loop shared by the
//! `lock-peer` program's `bench` command and the `bench` example.

pub mod bench;
