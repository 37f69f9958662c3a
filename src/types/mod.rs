//! Small value types with no dependencies: the key and channel names ([`names`]), owners
//! ([`owner`]), TTL readings ([`ttl`]) and the client's statistics snapshot ([`stats`]).

pub(crate) mod highway;
pub(crate) mod names;
pub(crate) mod owner;
pub(crate) mod stats;
pub(crate) mod ttl;
