//! Settings: the client configuration ([`Config`]), named after Redisson's `Config` (snake
//! case, same defaults), and what it is built from: the connection URL check ([`url`]), TLS
//! ([`tls`]), credentials with their secrets ([`credentials`]), the name mapper
//! ([`name_mapper`]) and the choices about other clients ([`modes`]). Nothing here connects.
//!
//! `Config` is in `settings` (fields, defaults, `Debug`), with its `builder`, its `getters` and
//! its `validate` beside it.

mod builder;
pub(crate) mod credentials;
mod getters;
pub(crate) mod modes;
pub(crate) mod name_mapper;
mod settings;
pub(crate) mod tls;
pub(crate) mod url;
mod validate;

pub use modes::{LocalHandOff, ShardedSubscriptionMode};
pub use name_mapper::{NameMapper, PrefixNameMapper};
pub use settings::Config;
pub use tls::TlsSettings;
