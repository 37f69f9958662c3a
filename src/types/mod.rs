//! Small value types with no dependencies on the rest of the crate: the wall clock
//! ([`clock`]), the key and channel names ([`names`]), the group multi-lock's field names
//! ([`group_fields`]), owners ([`owner`]), the local wait lines of the queueing kinds
//! ([`line`](mod@line)), permit ids ([`permit`]), TTL readings ([`ttl`]), the table of values
//! found by their own keys ([`table`]), the millisecond arithmetic of leases and deadlines
//! ([`millis`]) and the client's statistics snapshot ([`stats`]).

pub(crate) mod clock;
pub(crate) mod group_fields;
pub(crate) mod line;
pub(crate) mod millis;
pub(crate) mod names;
pub(crate) mod owner;
pub(crate) mod permit;
pub(crate) mod stats;
pub(crate) mod table;
pub(crate) mod ttl;
