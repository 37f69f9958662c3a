//! Connection URL check: which deployment a URL names, refused early with a message that never
//! contains the password.
//!
//! Nothing here connects. [`RedisUrl::parse`](check::RedisUrl::parse) accepts exactly the schemes fred 10.1's
//! `Config::from_url` understands, lets fred parse the rest (so a URL that passes here is the
//! URL fred will connect to), and keeps only a summary without secrets:
//!
//! | scheme | deployment | TLS |
//! |---|---|---|
//! | `redis://`, `valkey://` | one server | no |
//! | `rediss://`, `valkeys://` | one server | yes |
//! | `redis-sentinel://`, `valkey-sentinel://` | sentinels naming a master | no |
//! | `rediss-sentinel://`, `valkeys-sentinel://` | sentinels naming a master | yes |
//! | `redis-cluster://`, `valkey-cluster://` | cluster seed nodes | no |
//! | `rediss-cluster://`, `valkeys-cluster://` | cluster seed nodes | yes |
//!
//! Java Redisson takes `redis://` and `rediss://` addresses only (one per server; Sentinel and
//! Cluster are chosen by the kind of server config, not by the scheme). The `valkey` spellings
//! are fred's aliases. fred itself would take any other scheme (`http://h`) as a plain
//! connection to one server, and `rediss://` without a TLS feature as plain text; this check
//! exists to refuse both. Unix sockets (`redis+unix://`) need fred's `unix-sockets` feature,
//! which this crate does not enable.
//!
//! [`RedisUrl::check_supported`](check::RedisUrl::check_supported) then says whether this build can use it: every deployment is
//! supported; a TLS scheme needs the crate feature `tls` and is refused without it (never
//! silently connected in plain text).

//!
//! Rooms, lowest first: `scheme` (the schemes and the deployment each names), `parts` (the URL
//! split by hand around fred's parse), `check` (`RedisUrl` itself). This file is the face.

mod check;
mod parts;
mod scheme;

pub(crate) use check::RedisUrl;
pub(crate) use scheme::{without_tls, Deployment};
