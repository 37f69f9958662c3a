//! TLS: the settings a `rediss://` connection uses ([`TlsSettings`], PEM data in a file or in
//! memory) and, with the crate feature `tls`, the rustls client configuration built from them.
//!
//! The ring crypto provider is named explicitly, so nothing depends on a process-wide default
//! provider being installed. Roots: the configured CA, else the platform's store.

use std::{fmt, path::PathBuf, sync::Arc};

use crate::error::{Error, Result};

#[cfg(feature = "tls")]
pub(crate) use connector::fred_tls;

/// PEM data, in a file or in memory.
#[derive(Clone)]
pub(crate) enum Pem {
    File(PathBuf),
    Bytes(Arc<[u8]>),
}

impl Pem {
    /// The PEM bytes (reads the file).
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    pub(crate) fn read(&self, what: &str) -> Result<Vec<u8>> {
        match self {
            Pem::Bytes(b) => Ok(b.to_vec()),
            Pem::File(path) => std::fs::read(path).map_err(|e| {
                Error::InvalidArgument(format!(
                    "cannot read the {what} file {}: {e}",
                    path.display()
                ))
            }),
        }
    }
}

impl fmt::Debug for Pem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pem::File(p) => write!(f, "file {}", p.display()),
            Pem::Bytes(b) => write!(f, "{} PEM bytes", b.len()),
        }
    }
}

/// TLS settings for `rediss://` connections (needs the crate feature `tls`; rustls, no OpenSSL).
///
/// Without a CA the platform's root certificates are trusted. The server's name is always
/// verified against its certificate, unless
/// [`dangerous_skip_server_name_check_for_tests`](Self::dangerous_skip_server_name_check_for_tests)
/// says otherwise. A `rediss://` URL never falls back to plain text.
///
/// ```
/// use redisson_lock::{Config, TlsSettings};
/// let config = Config::default().tls(TlsSettings::new().ca_file("/etc/redis/ca.pem"));
/// assert!(config.get_tls().is_some());
/// ```
#[derive(Clone, Default)]
pub struct TlsSettings {
    pub(crate) ca: Option<Pem>,
    pub(crate) client_cert: Option<Pem>,
    pub(crate) client_key: Option<Pem>,
    pub(crate) skip_server_name_check: bool,
}

impl TlsSettings {
    /// Trust the platform's roots, verify the server's name.
    pub fn new() -> Self {
        Self::default()
    }

    /// Trust the CA certificate(s) in this PEM file (instead of the platform's roots).
    #[must_use]
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca = Some(Pem::File(path.into()));
        self
    }

    /// Trust the CA certificate(s) in these PEM bytes (instead of the platform's roots).
    #[must_use]
    pub fn ca_pem(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.ca = Some(Pem::Bytes(Arc::from(pem.into())));
        self
    }

    /// Present this client certificate chain and private key (PEM files): mutual TLS.
    #[must_use]
    pub fn client_identity_files(
        mut self,
        cert: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
    ) -> Self {
        self.client_cert = Some(Pem::File(cert.into()));
        self.client_key = Some(Pem::File(key.into()));
        self
    }

    /// Present this client certificate chain and private key (PEM bytes): mutual TLS.
    #[must_use]
    pub fn client_identity_pem(
        mut self,
        cert: impl Into<Vec<u8>>,
        key: impl Into<Vec<u8>>,
    ) -> Self {
        self.client_cert = Some(Pem::Bytes(Arc::from(cert.into())));
        self.client_key = Some(Pem::Bytes(Arc::from(key.into())));
        self
    }

    /// **For tests only.** Accept a server certificate issued for another name (the chain and
    /// the validity dates are still checked). Anyone who can get any certificate from the same
    /// CA can then impersonate the server.
    #[must_use]
    pub fn dangerous_skip_server_name_check_for_tests(mut self) -> Self {
        self.skip_server_name_check = true;
        self
    }
}

impl fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsSettings")
            .field("ca", &self.ca)
            .field("client_cert", &self.client_cert)
            .field(
                "client_key",
                &self.client_key.as_ref().map(|_| "<redacted>"),
            )
            .field("skip_server_name_check", &self.skip_server_name_check)
            .finish()
    }
}

/// The rustls client configuration (crate feature `tls`).
#[cfg(feature = "tls")]
mod connector {
    use std::sync::Arc;

    use fred::{
        rustls::{
            self,
            client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
            client::WebPkiServerVerifier,
            pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer, ServerName, UnixTime},
            ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
        },
        types::config::{TlsConfig, TlsConnector, TlsHostMapping},
    };

    use super::TlsSettings;
    use crate::error::{Error, Result};

    fn invalid(m: String) -> Error {
        Error::InvalidArgument(m)
    }

    fn certificates(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>> {
        let certs = CertificateDer::pem_slice_iter(pem)
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(|e| invalid(format!("the {what} is not valid PEM: {e}")))?;
        if certs.is_empty() {
            return Err(invalid(format!("the {what} holds no PEM certificate")));
        }
        Ok(certs)
    }

    /// The trusted roots: the configured CA, or the platform's.
    fn roots(settings: &TlsSettings) -> Result<RootCertStore> {
        let mut store = RootCertStore::empty();
        match &settings.ca {
            Some(pem) => {
                for cert in certificates(&pem.read("CA certificate")?, "CA certificate")? {
                    store
                        .add(cert)
                        .map_err(|e| invalid(format!("the CA certificate is not usable: {e}")))?;
                }
            }
            None => {
                let found = fred::rustls_native_certs::load_native_certs();
                for cert in found.certs {
                    // A broken entry in the platform store is skipped, as browsers do.
                    let _ = store.add(cert);
                }
                if store.is_empty() {
                    return Err(invalid(
                        "no CA configured and no usable root certificate in the platform's store \
                         (set TlsSettings::ca_file)"
                            .into(),
                    ));
                }
            }
        }
        Ok(store)
    }

    /// The connector for fred.
    pub(crate) fn fred_tls(settings: &TlsSettings) -> Result<TlsConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let roots = Arc::new(roots(settings)?);
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| invalid(format!("TLS protocol versions: {e}")))?;
        let verifier = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(|e| invalid(format!("TLS verifier: {e}")))?;
        let builder = if settings.skip_server_name_check {
            log::warn!(
                "TLS server name verification is OFF (dangerous_skip_server_name_check_for_tests)"
            );
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyName { inner: verifier }))
        } else {
            builder.with_webpki_verifier(verifier)
        };
        let config = match (&settings.client_cert, &settings.client_key) {
            (Some(cert), Some(key)) => {
                let chain = certificates(&cert.read("client certificate")?, "client certificate")?;
                let key = PrivateKeyDer::from_pem_slice(&key.read("client key")?)
                    // The key's bytes are never part of the message.
                    .map_err(|_| invalid("the client key is not a valid PEM private key".into()))?;
                builder.with_client_auth_cert(chain, key).map_err(|e| {
                    invalid(format!("the client certificate or key is unusable: {e}"))
                })?
            }
            _ => builder.with_no_client_auth(),
        };
        Ok(TlsConfig {
            connector: TlsConnector::from(config),
            hostnames: TlsHostMapping::None,
        })
    }

    /// Checks the chain and dates like the webpki verifier, but accepts a certificate issued for
    /// another name. Only behind the test-only opt-out.
    #[derive(Debug)]
    struct AnyName {
        inner: Arc<WebPkiServerVerifier>,
    }

    impl ServerCertVerifier for AnyName {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            intermediates: &[CertificateDer<'_>],
            server_name: &ServerName<'_>,
            ocsp_response: &[u8],
            now: UnixTime,
        ) -> std::result::Result<ServerCertVerified, rustls::Error> {
            match self.inner.verify_server_cert(
                end_entity,
                intermediates,
                server_name,
                ocsp_response,
                now,
            ) {
                Err(rustls::Error::InvalidCertificate(
                    rustls::CertificateError::NotValidForName
                    | rustls::CertificateError::NotValidForNameContext { .. },
                )) => Ok(ServerCertVerified::assertion()),
                other => other,
            }
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
            self.inner.verify_tls12_signature(message, cert, dss)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
            self.inner.verify_tls13_signature(message, cert, dss)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.inner.supported_verify_schemes()
        }
    }
}
