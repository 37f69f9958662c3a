//! Lock names as the application spells them and as Redis stores them: [`NameMapper`]
//! (Redisson's `NameMapper`) and the [`PrefixNameMapper`] that `Config::key_prefix` builds.

/// Maps user-facing lock names to raw Redis names (Redisson's `NameMapper`).
///
/// Every key and channel is derived from the mapped name, as in Redisson, so a Java client with
/// the same mapper sees the same keys.
///
/// ```
/// use redisson_lock::{Config, NameMapper};
/// struct Tenant(&'static str);
/// impl NameMapper for Tenant {
///     fn map(&self, name: &str) -> String {
///         format!("{}/{name}", self.0)
///     }
///     fn unmap(&self, raw: &str) -> String {
///         raw.split_once('/').map_or(raw, |(_, n)| n).to_owned()
///     }
/// }
/// let config = Config::default().name_mapper(Tenant("acme"));
/// ```
pub trait NameMapper: Send + Sync + 'static {
    /// User name → raw Redis name.
    fn map(&self, name: &str) -> String;
    /// Raw Redis name → user name.
    fn unmap(&self, raw: &str) -> String;
}

/// A [`NameMapper`] that puts a fixed prefix in front of every name.
///
/// ```
/// use redisson_lock::{NameMapper, PrefixNameMapper};
/// let mapper = PrefixNameMapper::new("app1:");
/// assert_eq!(mapper.map("orders"), "app1:orders");
/// assert_eq!(mapper.unmap("app1:orders"), "orders");
/// ```
#[derive(Debug, Clone)]
pub struct PrefixNameMapper {
    prefix: String,
}

impl PrefixNameMapper {
    /// Creates a mapper that turns `name` into `prefix + name`.
    pub fn new(prefix: impl Into<String>) -> Self {
        Self {
            prefix: prefix.into(),
        }
    }
}

impl NameMapper for PrefixNameMapper {
    fn map(&self, name: &str) -> String {
        format!("{}{}", self.prefix, name)
    }
    fn unmap(&self, raw: &str) -> String {
        raw.strip_prefix(&self.prefix).unwrap_or(raw).to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_mapper_round_trips() {
        let m = PrefixNameMapper::new("app:");
        assert_eq!(m.map("x"), "app:x");
        assert_eq!(m.unmap("app:x"), "x");
    }
}
