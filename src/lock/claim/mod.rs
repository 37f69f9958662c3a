//! A lock's waiter: one owner's claim to one lock ([`Claim`], `calls`: before, while and
//! after it holds it, with every call made for a hold it has) and its attempts (`attempt`:
//! `impl Waiter for Claim`, the lock kinds' side of the one engine in `crate::engine`).

mod attempt;
mod calls;

pub(crate) use attempt::Acquired;
pub(crate) use calls::Claim;
