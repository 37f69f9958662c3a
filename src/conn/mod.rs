//! Connecting and running calls: the command connection and its settings ([`core`]) with its
//! plain queries ([`queries`]), how a client connects to each deployment ([`connect`]), the script registry ([`scripts`]), cluster
//! routing facts ([`cluster`]) and the crate's own following of redirections ([`asking`]), what
//! this user may run ([`permissions`]), and replica-synced acquisition ([`replicas`]).

pub(crate) mod asking;
pub(crate) mod cluster;
pub(crate) mod connect;
pub(crate) mod core;
pub(crate) mod permissions;
pub(crate) mod queries;
pub(crate) mod replicas;
pub(crate) mod scripts;
