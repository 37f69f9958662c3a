//! `RedisUrl`, the summary of a checked URL without its secrets (`HostPort` for each server),
//! its parse (fred's own, around the parts fred would ignore) and `check_supported`; the
//! messages of a refusal (see the folder's face for the rules).

use std::fmt;

use fred::types::config::{Config as FredConfig, ServerConfig};

use super::{
    parts::Parts,
    scheme::{refused_scheme, without_tls, Deployment, SCHEMES},
};
use crate::error::{Error, Result};

/// One `host:port` as fred will resolve it. An IPv6 literal keeps its brackets (`[::1]`), which
/// is the form fred passes to the resolver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostPort {
    pub(crate) host: String,
    pub(crate) port: u16,
}

impl fmt::Display for HostPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// A checked connection URL, summarised. It holds no password (only whether there is one), so
/// neither its `Debug` nor its `Display` can print one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RedisUrl {
    scheme: &'static str,
    deployment: Deployment,
    tls: bool,
    hosts: Vec<HostPort>,
    database: Option<u8>,
    service_name: Option<String>,
    has_username: bool,
    has_password: bool,
}

impl RedisUrl {
    /// Checks `url` and summarises it. Errors are [`Error::InvalidArgument`] and name the scheme
    /// or the part that is wrong, never the password.
    pub(crate) fn parse(url: &str) -> Result<RedisUrl> {
        let parts = Parts::split(url)?;
        let scheme = parts.scheme.to_ascii_lowercase();
        let Some(&(scheme, deployment, tls)) = SCHEMES.iter().find(|(s, _, _)| *s == scheme) else {
            return Err(refused_scheme(&scheme));
        };
        parts.check_shape(scheme, deployment)?;

        let config = FredConfig::from_url(&without_tls(url)).map_err(|e| {
            let details = parts.without_secrets(explain(e.details()));
            Error::InvalidArgument(format!("invalid {scheme}:// URL: {details}"))
        })?;
        let server = &config.server;
        let parsed_as = if server.is_centralized() {
            Some(Deployment::Standalone)
        } else if server.is_sentinel() {
            Some(Deployment::Sentinel)
        } else if server.is_clustered() {
            Some(Deployment::Cluster)
        } else {
            None
        };
        if parsed_as != Some(deployment) {
            return Err(Error::InvalidArgument(format!(
                "{scheme}:// URL was not read as {deployment:?} by the connection library"
            )));
        }
        let service_name = match server {
            ServerConfig::Sentinel { service_name, .. } => Some(service_name.clone()),
            _ => None,
        };
        let mut hosts: Vec<HostPort> = server
            .hosts()
            .into_iter()
            .map(|s| HostPort {
                host: s.host.to_string(),
                port: s.port,
            })
            .collect();
        // fred lists the `node` parameters first and the URL's own host last.
        hosts.rotate_right(1);
        if let Some(zero) = hosts.iter().find(|h| h.port == 0) {
            return Err(Error::InvalidArgument(format!(
                "{scheme}:// URL names port 0 (host {}), which is not a port",
                zero.host
            )));
        }
        Ok(RedisUrl {
            scheme,
            deployment,
            tls,
            hosts,
            database: config.database,
            service_name,
            has_username: config.username.is_some(),
            has_password: config.password.is_some(),
        })
    }

    /// Refuses what this build cannot do: TLS without the crate feature `tls` (the connection
    /// would not be encrypted). Every deployment is supported.
    pub(crate) fn check_supported(&self) -> Result<()> {
        let scheme = self.scheme;
        if self.tls && !cfg!(feature = "tls") {
            return Err(Error::InvalidArgument(format!(
                "{scheme}:// asks for TLS, but this build of redisson-lock lacks the `tls` \
                 feature (it will not connect in plain text instead)"
            )));
        }
        Ok(())
    }
}

/// Accessors for the connectors (cluster, Sentinel and TLS read them as they arrive).
#[cfg_attr(not(test), allow(dead_code))]
impl RedisUrl {
    /// The scheme as matched, lowercase (`redis`, `rediss-sentinel`, ...).
    pub(crate) fn scheme(&self) -> &'static str {
        self.scheme
    }

    /// The kind of deployment.
    pub(crate) fn deployment(&self) -> Deployment {
        self.deployment
    }

    /// `true` for the `rediss`/`valkeys` schemes.
    pub(crate) fn tls(&self) -> bool {
        self.tls
    }

    /// The server (standalone), the sentinels or the cluster seeds; the URL's own host first.
    pub(crate) fn hosts(&self) -> &[HostPort] {
        &self.hosts
    }

    /// The database in the path (`/3`), if any.
    pub(crate) fn database(&self) -> Option<u8> {
        self.database
    }

    /// The master's name a Sentinel URL asks for (`sentinelServiceName`).
    pub(crate) fn service_name(&self) -> Option<&str> {
        self.service_name.as_deref()
    }

    /// Whether the URL carries a user name.
    pub(crate) fn has_username(&self) -> bool {
        self.has_username
    }

    /// Whether the URL carries a password (the password itself is not kept).
    pub(crate) fn has_password(&self) -> bool {
        self.has_password
    }
}

/// A redacted form for logs: `rediss://<credentials>@host:6380/2`, several hosts joined by `,`.
impl fmt::Display for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://", self.scheme)?;
        if self.has_username || self.has_password {
            f.write_str("<credentials>@")?;
        }
        for (i, h) in self.hosts.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{h}")?;
        }
        if let Some(db) = self.database {
            write!(f, "/{db}")?;
        }
        if let Some(name) = &self.service_name {
            write!(f, " (master {name})")?;
        }
        Ok(())
    }
}

/// Plain words for the terse messages of fred's URL parser (the `url` crate's error names and
/// fred's own texts); anything else is passed on as it is.
fn explain(details: &str) -> &str {
    match details {
        "EmptyHost" => "the host is empty",
        "InvalidPort" => "the port is not a number from 1 to 65535",
        "InvalidIpv4Address" => "the IPv4 address is malformed",
        "InvalidIpv6Address" => "the IPv6 address is malformed (write it in brackets: [::1])",
        "InvalidDomainCharacter" => "the host name has a character a host name cannot have",
        "IdnaError" => "the host name is not a valid international domain name",
        "Invalid integer string." => {
            "the database (a number from 0 to 255) or a node's port is not a valid number"
        }
        "Invalid database path." => "the path must be a single database number, e.g. /2",
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A password that must never show up in any output.
    const SECRET: &str = "S3cr3t-pw";

    fn ok(url: &str) -> RedisUrl {
        RedisUrl::parse(url).unwrap_or_else(|e| panic!("{url} should parse: {e}"))
    }

    fn err(url: &str) -> String {
        match RedisUrl::parse(url) {
            Ok(u) => panic!("{url} should be refused, got {u:?}"),
            Err(e) => {
                assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
                e.to_string()
            }
        }
    }

    fn host(h: &str, port: u16) -> HostPort {
        HostPort {
            host: h.into(),
            port,
        }
    }

    fn assert_no_secret(text: &str, secrets: &[&str]) {
        for s in secrets {
            assert!(!text.contains(s), "{s:?} leaked into: {text}");
        }
    }

    #[test]
    fn a_plain_host_is_one_server_on_port_6379() {
        let u = ok("redis://localhost");
        assert_eq!(u.scheme(), "redis");
        assert_eq!(u.deployment(), Deployment::Standalone);
        assert!(!u.tls());
        assert_eq!(u.hosts(), [host("localhost", 6379)]);
        assert_eq!(u.database(), None);
        assert_eq!(u.service_name(), None);
        assert!(!u.has_username() && !u.has_password());
        u.check_supported().unwrap();
        assert_eq!(u.to_string(), "redis://localhost:6379");
    }

    #[test]
    fn credentials_port_and_database_are_read() {
        let u = ok(&format!("redis://alice:{SECRET}@cache.internal:6380/2"));
        assert_eq!(u.hosts(), [host("cache.internal", 6380)]);
        assert_eq!(u.database(), Some(2));
        assert!(u.has_username() && u.has_password());
        u.check_supported().unwrap();

        let u = ok(&format!("redis://:{SECRET}@h"));
        assert!(!u.has_username() && u.has_password());
        let u = ok("redis://alice@h");
        assert!(u.has_username() && !u.has_password());
        let u = ok("redis://h:6379/");
        assert_eq!(u.database(), None, "an empty path is no database");
        let u = ok("redis://h/0");
        assert_eq!(u.database(), Some(0));
    }

    #[test]
    fn schemes_are_case_insensitive_and_valkey_spellings_are_aliases() {
        assert_eq!(ok("REDIS://h").scheme(), "redis");
        assert_eq!(ok("Rediss://h").scheme(), "rediss");
        let v = ok("valkey://h");
        assert_eq!((v.deployment(), v.tls()), (Deployment::Standalone, false));
        let v = ok("valkeys://h");
        assert_eq!((v.deployment(), v.tls()), (Deployment::Standalone, true));
    }

    #[test]
    fn every_known_scheme_is_read_by_fred_as_the_same_deployment() {
        for (scheme, deployment, tls) in SCHEMES {
            let query = match deployment {
                Deployment::Sentinel => "?sentinelServiceName=mymaster",
                _ => "",
            };
            let u = ok(&format!("{scheme}://h:7000{query}"));
            assert_eq!(u.scheme(), scheme);
            assert_eq!(u.deployment(), deployment, "{scheme}");
            assert_eq!(u.tls(), tls, "{scheme}");
            assert_eq!(u.hosts(), [host("h", 7000)]);
        }
    }

    #[test]
    fn tls_urls_need_the_tls_feature() {
        for url in [
            "rediss://h:6380",
            "valkeys://h",
            "rediss-cluster://h",
            "rediss-sentinel://h?sentinelServiceName=m",
        ] {
            let u = ok(url);
            assert!(u.tls());
            let r = u.check_supported();
            if cfg!(feature = "tls") {
                r.unwrap();
            } else {
                let e = r.unwrap_err().to_string();
                assert!(
                    e.contains(&format!("{}://", u.scheme())) && e.contains("tls"),
                    "{e}"
                );
            }
        }
        assert_eq!(without_tls("RediSS://h:1"), "redis://h:1");
        assert_eq!(without_tls("rediss-sentinel://h"), "redis-sentinel://h");
        assert_eq!(without_tls("redis://h"), "redis://h");
    }

    #[test]
    fn ipv6_literals_keep_their_brackets() {
        let u = ok("redis://[::1]:7000/1");
        assert_eq!(u.hosts(), [host("[::1]", 7000)]);
        assert_eq!(u.to_string(), "redis://[::1]:7000/1");
        let u = ok("redis://[2001:db8::5]");
        assert_eq!(u.hosts(), [host("[2001:db8::5]", 6379)]);
        err("redis://[::1");
        err("redis://::1:6379");
    }

    #[test]
    fn sentinel_urls_list_the_sentinels_and_the_master_name() {
        let u = ok(&format!(
            "redis-sentinel://:{SECRET}@s1:26380/1?sentinelServiceName=mymaster&node=s2:26379&node=s3:26381"
        ));
        assert_eq!(u.deployment(), Deployment::Sentinel);
        assert_eq!(
            u.hosts(),
            [host("s1", 26380), host("s2", 26379), host("s3", 26381)]
        );
        assert_eq!(u.service_name(), Some("mymaster"));
        assert_eq!(u.database(), Some(1));
        assert!(u.has_password());
        assert_eq!(
            u.to_string(),
            "redis-sentinel://<credentials>@s1:26380,s2:26379,s3:26381/1 (master mymaster)"
        );
        u.check_supported().unwrap();

        let u = ok("redis-sentinel://s1?sentinelServiceName=m");
        assert_eq!(u.hosts(), [host("s1", 26379)], "Sentinel's default port");
        let e = err("redis-sentinel://s1");
        assert!(e.contains("sentinel service name"), "{e}");
    }

    #[test]
    fn cluster_urls_list_the_seed_nodes() {
        let u = ok("redis-cluster://c1:7000?node=c2:7001&node=c3:7002");
        assert_eq!(u.deployment(), Deployment::Cluster);
        assert_eq!(
            u.hosts(),
            [host("c1", 7000), host("c2", 7001), host("c3", 7002)]
        );
        u.check_supported().unwrap();
        assert_eq!(ok("redis-cluster://c1").hosts(), [host("c1", 6379)]);
        let e = err("redis-cluster://c1:7000/3");
        assert!(e.contains("database 0"), "{e}");
    }

    #[test]
    fn other_schemes_are_refused_by_name() {
        for (url, scheme) in [
            ("http://h:6379", "http"),
            ("https://h", "https"),
            ("tcp://h:6379", "tcp"),
            ("unix:///tmp/redis.sock", "unix"),
            ("redis+tls://h", "redis+tls"),
            ("HTTP://h", "http"),
        ] {
            let e = err(url);
            assert!(e.contains(&format!("'{scheme}://'")), "{url}: {e}");
        }
        let e = err("redis+unix:///tmp/redis.sock");
        assert!(
            e.contains("redis+unix") && e.contains("unix-sockets"),
            "{e}"
        );
        // fred alone would take this as a plain connection to `h`: the reason for the check.
        assert!(FredConfig::from_url("http://h").is_ok());
    }

    #[test]
    fn urls_without_a_scheme_are_refused() {
        for url in ["localhost:6379", "redis:h", "//h:6379", "", "redis:/h"] {
            let e = err(url);
            assert!(e.contains("redis://"), "{url}: {e}");
        }
        err("://h");
        err("1redis://h");
    }

    #[test]
    fn bad_hosts_ports_and_databases_are_refused() {
        for url in [
            "redis://",
            "redis://:6379",
            "redis://h:99999",
            "redis://h:abc",
            "redis://h:0",
            "redis://h/256",
            "redis://h/x",
            "redis://h/1/2",
        ] {
            err(url);
        }
        assert!(err("redis://h:0").contains("port 0"));
        assert!(err("redis://h:99999").contains("1 to 65535"));
        assert!(err("redis://h/256").contains("0 to 255"));
        assert!(err("redis://h/1/2").contains("single database"));
        assert!(err("redis://:6379").contains("host is empty"));
        assert!(err("redis://[::1").contains("IPv6"));
    }

    #[test]
    fn query_parameters_fred_would_ignore_are_refused() {
        let e = err("redis://h?node=a:1");
        assert!(
            e.contains("'node'") && e.contains("no query parameters"),
            "{e}"
        );
        err("redis://h?sentinelServiceName=m");
        err("redis://h?protocol=resp3");
        let e = err("redis-cluster://h?sentinelServiceName=m");
        assert!(e.contains("takes only node"), "{e}");
        ok("redis-sentinel://h?sentinelServiceName=m&sentinelUsername=bob&sentinelPassword=x");
        // Percent-encoded names are decoded, as fred does.
        err("redis://h?sentinel%50assword=x");
        err("redis://h#frag");
    }

    #[test]
    fn the_password_never_appears_in_debug_or_display() {
        for url in [
            format!("redis://alice:{SECRET}@h:6379/1"),
            format!("redis://:{SECRET}@h"),
            format!("rediss://alice:{SECRET}@[::1]:6380"),
            format!("redis-sentinel://u:{SECRET}@s1?sentinelServiceName=m&node=s2:1"),
            format!("redis-cluster://u:{SECRET}@c1:7000?node=c2:7001"),
            format!("redis-sentinel://u:{SECRET}@s1?sentinelServiceName=m&sentinelUsername=u&sentinelPassword={SECRET}"),
            // Percent-encoded: neither the written nor the decoded form may show.
            "redis://alice:S3cr%40t-pw@h".to_owned(),
        ] {
            let u = ok(&url);
            assert!(u.has_password(), "{url}");
            let shown = format!("{u:?} {u} {u:#?} {:?}", u.check_supported());
            assert_no_secret(&shown, &[SECRET, "S3cr%40t-pw", "S3cr@t-pw"]);
        }
    }

    #[test]
    fn the_password_never_appears_in_errors() {
        for url in [
            // Refused schemes and malformed starts.
            format!("http://alice:{SECRET}@h"),
            format!("redis+unix://alice:{SECRET}@h/tmp/sock"),
            format!("alice:{SECRET}@redis://h"),
            format!("{SECRET}@h:6379"),
            format!("redis:alice:{SECRET}@h"),
            // fred parse errors with a password present.
            format!("redis://alice:{SECRET}@h:99999"),
            format!("redis://alice:{SECRET}@h:0"),
            format!("redis://alice:{SECRET}@h/300"),
            format!("redis://alice:{SECRET}@:6379"),
            format!("redis://alice:{SECRET}@[::1"),
            format!("redis-sentinel://alice:{SECRET}@h"),
            // fred echoes a bad node value: withheld when it is the password.
            format!("redis-cluster://alice:{SECRET}@h:7000?node={SECRET}"),
            format!("redis-cluster://alice:{SECRET}@h:7000?node=x:{SECRET}"),
            // Characters that break a URL when not percent-encoded.
            format!("redis://alice:pa#{SECRET}@h"),
            format!("redis://alice:pa?{SECRET}@h"),
            format!("redis://alice:pa/{SECRET}@h"),
            // Secrets in the query.
            format!("redis://h?sentinelPassword={SECRET}"),
            format!("redis-sentinel://h?sentinelPassword={SECRET}&node=x:{SECRET}"),
            format!("redis://h?{SECRET}=1"),
            format!("redis://h?x={SECRET}"),
        ] {
            let e = RedisUrl::parse(&url).expect_err(&url);
            let shown = format!("{e} {e:?}");
            assert_no_secret(&shown, &[SECRET]);
        }
    }

    #[test]
    fn fred_details_are_kept_when_they_hold_no_secret() {
        let e = err("redis-cluster://h:7000?node=nohostport");
        assert!(e.contains("nohostport"), "{e}");
        let e = err(&format!("redis-cluster://u:{SECRET}@h:7000?node={SECRET}"));
        assert!(e.contains("withheld"), "{e}");
    }
}
