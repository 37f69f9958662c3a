//! The schemes: which deployment each names and whether it asks for TLS, the refusal of any
//! other, and the plain form of a TLS scheme for fred's parser.

use crate::error::Error;

/// What kind of deployment a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Deployment {
    /// One server (Redisson `useSingleServer`); default port 6379.
    Standalone,
    /// Sentinel nodes that know the master of `service_name` (Redisson `useSentinelServers`);
    /// default port 26379.
    Sentinel,
    /// Seed nodes of a Redis Cluster (Redisson `useClusterServers`); default port 6379.
    Cluster,
}

/// The schemes fred 10.1 understands, lowercase, with what they mean.
pub(super) const SCHEMES: [(&str, Deployment, bool); 12] = [
    ("redis", Deployment::Standalone, false),
    ("rediss", Deployment::Standalone, true),
    ("valkey", Deployment::Standalone, false),
    ("valkeys", Deployment::Standalone, true),
    ("redis-sentinel", Deployment::Sentinel, false),
    ("rediss-sentinel", Deployment::Sentinel, true),
    ("valkey-sentinel", Deployment::Sentinel, false),
    ("valkeys-sentinel", Deployment::Sentinel, true),
    ("redis-cluster", Deployment::Cluster, false),
    ("rediss-cluster", Deployment::Cluster, true),
    ("valkey-cluster", Deployment::Cluster, false),
    ("valkeys-cluster", Deployment::Cluster, true),
];

/// The same URL with its TLS scheme swapped for the plain one (`rediss-sentinel` →
/// `redis-sentinel`), for fred's parser: with a TLS feature on, fred would otherwise build a
/// default TLS connector (reading the platform's roots) just to parse. The crate sets the TLS
/// connector itself from the scheme it checked.
pub(crate) fn without_tls(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let lower = scheme.to_ascii_lowercase();
            let plain = match lower.as_str() {
                "rediss" => "redis",
                "valkeys" => "valkey",
                "rediss-sentinel" => "redis-sentinel",
                "valkeys-sentinel" => "valkey-sentinel",
                "rediss-cluster" => "redis-cluster",
                "valkeys-cluster" => "valkey-cluster",
                _ => return url.to_owned(),
            };
            format!("{plain}://{rest}")
        }
        None => url.to_owned(),
    }
}

/// The error for a scheme outside `SCHEMES`. It names the scheme (never anything after `://`).
pub(super) fn refused_scheme(scheme: &str) -> Error {
    let hint = if scheme.ends_with("+unix") {
        "Unix sockets need fred's unix-sockets feature, which this crate does not enable"
    } else {
        "use redis:// (or rediss:// for TLS), as with Redisson"
    };
    Error::InvalidArgument(format!("unsupported URL scheme '{scheme}://': {hint}"))
}
