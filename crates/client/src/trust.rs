//! Which server certificates the client trusts over HTTPS: what curl trusts.
//! A chain up to one of the system's CAs, or of the bundle `SSL_CERT_FILE`
//! names; and, as OpenSSL does, a server certificate that is itself one of
//! those trusted certificates (the self-signed certificate of the usual
//! `openssl req -x509` one-liner, which says `CA:TRUE` and so is refused as
//! a leaf by the web PKI rules). `--server-cert PEM` pins instead: the server
//! must present one of the certificates in that file, and no CA is asked.
//! Either way the certificate must name the server and be valid now.

use std::{path::Path, sync::Arc};

use anyhow::Context;
use rustls::{
    client::{
        danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier},
        WebPkiServerVerifier,
    },
    crypto::{CryptoProvider, WebPkiSupportedAlgorithms},
    pki_types::{pem::PemObject, CertificateDer, ServerName, UnixTime},
    CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

/// The certificates a client trusts.
#[derive(Debug, Clone, Default)]
pub enum Trust {
    /// The system's CAs, or `SSL_CERT_FILE` / `SSL_CERT_DIR`.
    #[default]
    System,
    /// Only these server certificates (`--server-cert`).
    Pinned(Vec<CertificateDer<'static>>),
}

impl Trust {
    /// The certificates of the PEM file at `path`, pinned.
    pub fn pinned(path: &Path) -> anyhow::Result<Self> {
        let certificates = CertificateDer::pem_file_iter(path)
            .and_then(|certificates| certificates.collect::<Result<Vec<_>, _>>())
            .with_context(|| format!("cannot read --server-cert {} (a PEM certificate file)", path.display()))?;
        anyhow::ensure!(
            !certificates.is_empty(),
            "--server-cert {} holds no certificate: give the server's certificate as PEM",
            path.display()
        );
        Ok(Self::Pinned(certificates))
    }

    /// A rustls configuration that verifies servers as this trust says.
    pub fn tls_config(&self) -> anyhow::Result<rustls::ClientConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = match self {
            Self::System => CurlLike::system(&provider),
            Self::Pinned(certificates) => CurlLike::pinned(certificates.clone(), &provider),
        };
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("no TLS version both rustls and ring support")?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        Ok(config)
    }
}

/// A verifier that accepts a chain to a trusted CA (when it has CAs) or a
/// server certificate that is itself trusted.
#[derive(Debug)]
struct CurlLike {
    chains: Option<Arc<WebPkiServerVerifier>>,
    trusted_as_themselves: Vec<CertificateDer<'static>>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl CurlLike {
    fn system(provider: &Arc<CryptoProvider>) -> Self {
        // The same certificates reqwest's own rustls setup reads; unreadable
        // entries are skipped as it skips them, and with none at all every
        // handshake fails as an unknown issuer, explained to the user.
        let certificates = rustls_native_certs::load_native_certs().certs;
        let mut roots = RootCertStore::empty();
        roots.add_parsable_certificates(certificates.iter().cloned());
        let chains = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone()).build().ok();
        Self { chains, trusted_as_themselves: certificates, algorithms: provider.signature_verification_algorithms }
    }

    fn pinned(certificates: Vec<CertificateDer<'static>>, provider: &Arc<CryptoProvider>) -> Self {
        Self {
            chains: None,
            trusted_as_themselves: certificates,
            algorithms: provider.signature_verification_algorithms,
        }
    }
}

impl ServerCertVerifier for CurlLike {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if self.trusted_as_themselves.iter().any(|trusted| trusted.as_ref() == end_entity.as_ref()) {
            names_the_server_and_is_valid(end_entity, server_name, now)?;
            return Ok(ServerCertVerified::assertion());
        }
        match &self.chains {
            Some(chains) => chains.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now),
            None => Err(rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// What still holds for a certificate trusted as itself: it names the
/// server (subjectAltName, as for any certificate) and `now` is within its
/// validity.
fn names_the_server_and_is_valid(
    certificate: &CertificateDer<'_>,
    server_name: &ServerName<'_>,
    now: UnixTime,
) -> Result<(), rustls::Error> {
    let parsed = rustls::server::ParsedCertificate::try_from(certificate)?;
    rustls::client::verify_server_name(&parsed, server_name)?;
    let bad_encoding = || rustls::Error::InvalidCertificate(CertificateError::BadEncoding);
    let (_, x509) = x509_parser::parse_x509_certificate(certificate.as_ref()).map_err(|_| bad_encoding())?;
    let validity = x509.validity();
    let now = i64::try_from(now.as_secs()).map_err(|_| bad_encoding())?;
    if now < validity.not_before.timestamp() {
        return Err(rustls::Error::InvalidCertificate(CertificateError::NotValidYet));
    }
    if now > validity.not_after.timestamp() {
        return Err(rustls::Error::InvalidCertificate(CertificateError::Expired));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate for `names`, valid from 2027-01-01 to
    /// 2027-01-03, marked as a CA as `openssl req -x509` does.
    fn self_signed(names: &[&str]) -> CertificateDer<'static> {
        let mut params = rcgen::CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>())
            .expect("valid names");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.not_before = rcgen::date_time_ymd(2027, 1, 1);
        params.not_after = rcgen::date_time_ymd(2027, 1, 3);
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().clone()
    }

    /// What a client trusting only `trusted` says of a server presenting `presented` as `name` at `now`.
    fn verify(
        trusted: &CertificateDer<'static>,
        presented: &CertificateDer<'_>,
        name: &str,
        now: u64,
    ) -> Result<(), rustls::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = CurlLike::pinned(vec![trusted.clone()], &provider);
        let name = ServerName::try_from(name.to_owned()).unwrap();
        let now = UnixTime::since_unix_epoch(std::time::Duration::from_secs(now));
        verifier.verify_server_cert(presented, &[], &name, &[], now).map(|_| ())
    }

    fn refused_for(error: Result<(), rustls::Error>) -> CertificateError {
        match error {
            Err(rustls::Error::InvalidCertificate(why)) => why,
            other => panic!("expected an invalid certificate, got {other:?}"),
        }
    }

    const DAY: u64 = 86_400;
    /// 2027-01-02T00:00:00Z, inside the test certificates' validity.
    const NOW: u64 = 1_798_848_000;

    #[test]
    fn a_trusted_self_signed_certificate_is_accepted_for_its_names_while_valid() {
        let certificate = self_signed(&["localhost", "127.0.0.1"]);
        verify(&certificate, &certificate, "localhost", NOW).expect("its own name");
        verify(&certificate, &certificate, "127.0.0.1", NOW).expect("its own address");
        let other_name = refused_for(verify(&certificate, &certificate, "pastebin.example", NOW));
        assert!(matches!(other_name, CertificateError::NotValidForNameContext { .. }), "{other_name:?}");
        let late = refused_for(verify(&certificate, &certificate, "localhost", NOW + 2 * DAY));
        assert_eq!(late, CertificateError::Expired);
        let early = refused_for(verify(&certificate, &certificate, "localhost", NOW - 2 * DAY));
        assert_eq!(early, CertificateError::NotValidYet);
    }

    #[test]
    fn a_certificate_that_is_not_the_trusted_one_is_refused() {
        let trusted = self_signed(&["localhost"]);
        let impostor = self_signed(&["localhost"]);
        assert_eq!(refused_for(verify(&trusted, &impostor, "localhost", NOW)), CertificateError::UnknownIssuer);
    }

    #[test]
    fn a_pin_file_without_a_certificate_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let error = Trust::pinned(&empty).unwrap_err().to_string();
        assert!(error.contains("holds no certificate"), "{error}");
        let missing = Trust::pinned(&dir.path().join("missing.pem")).unwrap_err().to_string();
        assert!(missing.contains("cannot read --server-cert"), "{missing}");
    }
}
