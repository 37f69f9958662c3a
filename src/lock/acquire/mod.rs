//! The acquisition: the one acquire engine ([`engine`]) and one owner's hold of one lock with
//! every call made for it ([`claim`]).

pub(crate) mod claim;
pub(crate) mod engine;
