//! The acquisition: the one acquire engine ([`engine`]) and one owner's hold of one lock with
//! every call made for it ([`hold`]).

pub(crate) mod engine;
pub(crate) mod hold;
