//! Small value types with no dependencies: the key and channel names ([`names`]), owners
//! ([`owner`]), the local wait lines of the queueing kinds ([`line`]), permit ids ([`permit`]), TTL readings ([`ttl`]) and the client's statistics snapshot ([`stats`]).

pub(crate) mod highway;
pub(crate) mod line;
pub(crate) mod names;
pub(crate) mod owner;
pub(crate) mod permit;
pub(crate) mod stats;
pub(crate) mod ttl;
