//! The rustls client configuration built from [`TlsSettings`] (crate feature `tls`).
//!
//! The ring crypto provider is named explicitly, so nothing depends on a process-wide default
//! provider being installed. Roots: the configured CA, else the platform's store.

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

use crate::{
    config::TlsSettings,
    error::{Error, Result},
};

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
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| invalid(format!("the client certificate or key is unusable: {e}")))?
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
