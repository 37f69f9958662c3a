//! Credentials that can change while a client runs (password rotation), and the one place that
//! tells the connection layer which user and password each new connection authenticates with.
//!
//! fred reads credentials through a [`CredentialProvider`] each time it opens a connection (the
//! command and subscriber connections, every cluster node, the sentinels and the master they
//! name), so a password changed in a [`Credentials`] handle is used by the next reconnect, and
//! connections that are already authenticated are left alone (Redis keeps them authenticated
//! after `ACL SETUSER ... resetpass`).

use std::{fmt, sync::Arc};

use fred::{
    error::Error as FredError,
    types::config::{CredentialProvider, Server},
};
use parking_lot::RwLock;

/// A password or other secret. Its `Debug` and `Display` print `<redacted>`, never the value.
///
/// ```
/// use redisson_lock::{Config, Secret};
///
/// let password = Secret::new("s3cret");
/// assert_eq!(format!("{password:?} {password}"), "<redacted> <redacted>");
/// assert_eq!(password.expose(), "s3cret");
/// let config = Config::default().username("app").password(password);
/// assert!(!format!("{config:?}").contains("s3cret"));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Arc<str>);

impl Secret {
    /// Wraps a secret.
    pub fn new(value: impl Into<String>) -> Self {
        Secret(Arc::from(value.into()))
    }

    /// The secret itself (pass it on, never log it).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl From<&str> for Secret {
    fn from(s: &str) -> Self {
        Secret::new(s)
    }
}

impl From<String> for Secret {
    fn from(s: String) -> Self {
        Secret::new(s)
    }
}

/// An ACL user name and a password that the application may change while the client runs:
/// password rotation. Cheap to clone; every clone is the same handle.
///
/// Give it to [`Config::credentials`](crate::Config::credentials) (data nodes) or
/// [`Config::sentinel_credentials`](crate::Config::sentinel_credentials) (the sentinels), keep a
/// clone, and call [`rotate`](Self::rotate) (or [`set`](Self::set)) when the secret changes. Every
/// connection opened afterwards — a reconnect of the command or subscriber connection, a
/// connection to another cluster node, a new master after a Sentinel failover — authenticates
/// with the new value. Connections already open stay as they are: Redis does not log out a
/// connection whose user's password changes.
///
/// Neither `Debug` nor `Display` shows the password.
///
/// ```
/// use redisson_lock::{Config, Credentials};
///
/// let credentials = Credentials::new(Some("locks"), "first-password");
/// let config = Config::default().credentials(credentials.clone());
/// // ... later, after `ACL SETUSER locks >second-password` on the server:
/// credentials.rotate("second-password");
/// assert_eq!(credentials.username().as_deref(), Some("locks"));
/// assert!(!format!("{credentials:?} {config:?}").contains("second-password"));
/// # let _ = config;
/// ```
#[derive(Clone)]
pub struct Credentials {
    current: Arc<RwLock<(Option<String>, Option<Secret>)>>,
}

impl Credentials {
    /// An ACL user (`None`: the `default` user, plain `AUTH password`) and its password.
    pub fn new(username: Option<impl Into<String>>, password: impl Into<Secret>) -> Self {
        Self {
            current: Arc::new(RwLock::new((
                username.map(Into::into),
                Some(password.into()),
            ))),
        }
    }

    /// Replaces the password; the user stays. Used by the next connection opened.
    pub fn rotate(&self, password: impl Into<Secret>) {
        self.current.write().1 = Some(password.into());
    }

    /// Replaces the user and the password together (the next connection sees both or neither).
    pub fn set(&self, username: Option<impl Into<String>>, password: impl Into<Secret>) {
        *self.current.write() = (username.map(Into::into), Some(password.into()));
    }

    /// The current user name (`None` for the `default` user).
    pub fn username(&self) -> Option<String> {
        self.current.read().0.clone()
    }

    /// The user and password in the form fred sends them.
    fn read(&self) -> (Option<String>, Option<String>) {
        let current = self.current.read();
        (
            current.0.clone(),
            current.1.as_ref().map(|p| p.expose().to_owned()),
        )
    }
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let current = self.current.read();
        f.debug_struct("Credentials")
            .field("username", &current.0)
            .field("password", &current.1)
            .finish()
    }
}

/// Where one kind of node gets its credentials: fixed at connect, or a live handle.
#[derive(Clone, Debug)]
pub(crate) enum Source {
    Fixed(Option<String>, Option<Secret>),
    Live(Credentials),
}

impl Source {
    fn read(&self) -> (Option<String>, Option<String>) {
        match self {
            Source::Fixed(user, password) => (
                user.clone(),
                password.as_ref().map(|p| p.expose().to_owned()),
            ),
            Source::Live(c) => c.read(),
        }
    }
}

/// The provider handed to fred: data-node credentials for every server, except the configured
/// sentinels (matched by host and port), which get the sentinel credentials.
///
/// fred also connects to sentinels it learns of through `SENTINEL sentinels`; one that was not
/// configured is not recognised here and is offered the data-node credentials (if those differ
/// from the sentinels', it refuses them and fred moves on to the next sentinel). List every
/// sentinel when their credentials differ from the data nodes'.
#[derive(Debug)]
pub(crate) struct Provider {
    pub(crate) data: Source,
    pub(crate) sentinels: Vec<(String, u16)>,
    pub(crate) sentinel: Source,
}

impl Provider {
    fn for_server(&self, server: Option<&Server>) -> &Source {
        match server {
            Some(s)
                if self
                    .sentinels
                    .iter()
                    .any(|(host, port)| *port == s.port && host.as_str() == &*s.host) =>
            {
                &self.sentinel
            }
            _ => &self.data,
        }
    }
}

#[async_trait::async_trait]
impl CredentialProvider for Provider {
    async fn fetch(
        &self,
        server: Option<&Server>,
    ) -> Result<(Option<String>, Option<String>), FredError> {
        Ok(self.for_server(server).read())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> (Provider, Credentials, Credentials) {
        let data = Credentials::new(Some("app"), "pw-data-1");
        let sentinel = Credentials::new(None::<String>, "pw-sent-1");
        let p = Provider {
            data: Source::Live(data.clone()),
            sentinels: vec![("127.0.0.1".into(), 26379), ("10.0.0.2".into(), 26380)],
            sentinel: Source::Live(sentinel.clone()),
        };
        (p, data, sentinel)
    }

    #[tokio::test]
    async fn each_connection_reads_the_current_secret_of_its_kind_of_node() {
        let (p, data, sentinel) = provider();
        let master = Server::new("127.0.0.1", 6379);
        let sent = Server::new("10.0.0.2", 26380);
        assert_eq!(
            p.fetch(Some(&master)).await.unwrap(),
            (Some("app".into()), Some("pw-data-1".into()))
        );
        assert_eq!(
            p.fetch(Some(&sent)).await.unwrap(),
            (None, Some("pw-sent-1".into()))
        );
        data.rotate("pw-data-2");
        sentinel.set(Some("sam"), "pw-sent-2");
        assert_eq!(
            p.fetch(Some(&master)).await.unwrap(),
            (Some("app".into()), Some("pw-data-2".into()))
        );
        assert_eq!(
            p.fetch(Some(&sent)).await.unwrap(),
            (Some("sam".into()), Some("pw-sent-2".into()))
        );
        // Without a server (fred's periodic refresh, unused here): the data nodes'.
        assert_eq!(p.fetch(None).await.unwrap().1.as_deref(), Some("pw-data-2"));
    }

    #[test]
    fn no_password_in_debug() {
        let (p, data, _) = provider();
        data.rotate("pw-data-3");
        let shown = format!("{p:?} {p:#?} {data:?} {data:#?}");
        for s in ["pw-data-1", "pw-data-3", "pw-sent-1"] {
            assert!(!shown.contains(s), "{s} in {shown}");
        }
        assert!(shown.contains("app") && shown.contains("<redacted>"));
    }
}
