//! Small value types with no dependencies: the key and channel names ([`names`]), owners
//! ([`owner`]), permit ids ([`permit`]), TTL readings ([`ttl`]), the millisecond arithmetic of leases and deadlines ([`millis`]) and the client's statistics snapshot ([`stats`]).

pub(crate) mod highway;
pub(crate) mod millis;
pub(crate) mod names;
pub(crate) mod owner;
pub(crate) mod permit;
pub(crate) mod stats;
pub(crate) mod ttl;
