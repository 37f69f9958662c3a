//! The URL split by hand, before and around fred's parse, so that a URL fred cannot parse still
//! has its secrets known: the pieces, what fred would silently ignore (a fragment, query
//! parameters the deployment does not read, a database on a cluster), and the messages kept
//! free of the password.

use super::scheme::Deployment;
use crate::error::{Error, Result};

/// The query parameters fred reads, per deployment (a standalone URL takes none).
const CLUSTER_PARAMS: &[&str] = &["node"];
const SENTINEL_PARAMS: &[&str] = &[
    "node",
    "sentinelServiceName",
    "sentinelUsername",
    "sentinelPassword",
];

/// The raw pieces of a URL needed before and around fred's parse, split by hand so that a URL
/// fred cannot parse still has its secrets known (to keep them out of error messages).
pub(super) struct Parts<'a> {
    pub(super) scheme: &'a str,
    /// Between `://` and the first `/`, `?` or `#`.
    authority: &'a str,
    /// After the authority, before `?` or `#` (e.g. `/3`).
    path: &'a str,
    /// After `?`, before `#`.
    query: Option<&'a str>,
    has_fragment: bool,
}

impl<'a> Parts<'a> {
    pub(super) fn split(url: &'a str) -> Result<Parts<'a>> {
        let Some((scheme, rest)) = url.split_once("://") else {
            return Err(Error::InvalidArgument(
                "a Redis URL starts with a scheme and '://', e.g. redis://host:6379".into(),
            ));
        };
        // RFC 3986: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ). Anything else before "://" is
        // not a scheme and is not echoed (it could be part of a password).
        let is_scheme = scheme
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic())
            && scheme
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
        if !is_scheme {
            return Err(Error::InvalidArgument(
                "the text before '://' is not a URL scheme; a Redis URL starts with redis://"
                    .into(),
            ));
        }
        let (rest, has_fragment) = match rest.split_once('#') {
            Some((before, _)) => (before, true),
            None => (rest, false),
        };
        let (rest, query) = match rest.split_once('?') {
            Some((before, q)) => (before, Some(q)),
            None => (rest, None),
        };
        let (authority, path) = match rest.find('/') {
            Some(i) => rest.split_at(i),
            None => (rest, ""),
        };
        Ok(Parts {
            scheme,
            authority,
            path,
            query,
            has_fragment,
        })
    }

    /// The password as written in the URL (still percent-encoded), if any.
    fn raw_password(&self) -> Option<&'a str> {
        let (userinfo, _) = self.authority.rsplit_once('@')?;
        let (_, password) = userinfo.split_once(':')?;
        (!password.is_empty()).then_some(password)
    }

    /// Checks what fred would silently ignore: a fragment, query parameters the deployment does
    /// not read, a database on a cluster.
    pub(super) fn check_shape(&self, scheme: &str, deployment: Deployment) -> Result<()> {
        if self.has_fragment {
            return Err(Error::InvalidArgument(format!(
                "{scheme}:// URL has a '#' fragment; percent-encode '#' in a password as %23"
            )));
        }
        let allowed = match deployment {
            Deployment::Standalone => &[][..],
            Deployment::Cluster => CLUSTER_PARAMS,
            Deployment::Sentinel => SENTINEL_PARAMS,
        };
        for pair in self
            .query
            .unwrap_or("")
            .split('&')
            .filter(|p| !p.is_empty())
        {
            let key = percent_decode(pair.split_once('=').map_or(pair, |(k, _)| k));
            if !allowed.contains(&key.as_str()) {
                // Known names are echoed; an unknown one is not (it could be a secret).
                let shown = if CLUSTER_PARAMS.contains(&key.as_str())
                    || SENTINEL_PARAMS.contains(&key.as_str())
                {
                    format!("'{key}'")
                } else {
                    "an unknown query parameter".to_owned()
                };
                let takes = match deployment {
                    Deployment::Standalone => "takes no query parameters".to_owned(),
                    _ => format!("takes only {}", allowed.join(", ")),
                };
                return Err(Error::InvalidArgument(format!(
                    "{scheme}:// URL has {shown}; a {scheme}:// URL {takes} (a '?' in a \
                     password must be percent-encoded as %3F)"
                )));
            }
        }
        if deployment == Deployment::Cluster && !self.path.trim_matches('/').is_empty() {
            return Err(Error::InvalidArgument(format!(
                "{scheme}:// URL names a database; a Redis Cluster has only database 0"
            )));
        }
        Ok(())
    }

    /// `details` unless it contains the password (as written or decoded), in which case a
    /// neutral text replaces it.
    pub(super) fn without_secrets(&self, details: &str) -> String {
        let leaks = self.raw_password().is_some_and(|raw| {
            let decoded = percent_decode(raw);
            details.contains(raw) || (!decoded.is_empty() && details.contains(decoded.as_str()))
        });
        if leaks {
            "the parser's message is withheld because it contains the password".to_owned()
        } else {
            details.to_owned()
        }
    }
}

/// Percent-decoding, lossy on invalid UTF-8 (only used to compare and to name known keys).
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("a%40b%3A"), "a@b:");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
        assert_eq!(percent_decode("%C3%A9"), "é");
    }
}
