//! Mutual TLS between the parts (docs/design.md#mtls): every K and P server
//! and every client of them (gateway, sweeper, `ctl`, bench) is configured
//! with the same three files — its own certificate, its key, and the CA
//! bundle that signs everyone else's. A server with them serves TLS only and
//! requires a client certificate signed by that CA; a client with them
//! presents its certificate and checks the server's against the CA, for the
//! host named in the address. Plain PEM files from any CA work.
//!
//! Each part's certificate says only what it is for: K and P serve
//! (`serverAuth`), the gateway, the sweeper and `ctl` call them
//! (`clientAuth`), and rustls checks that purpose on both ends. The gateway's
//! public gRPC listener presents a certificate of its own
//! ([`PublicTlsArgs`]), never the one it calls K and P with: the part that
//! faces the internet holds no key that K's or P's clients accept as a server.

use std::{
    io,
    path::{Path, PathBuf},
    time::Duration,
};

use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
use tonic::transport::{Certificate, ClientTlsConfig, Identity, ServerTlsConfig};

/// A handshake that has not finished by then is dropped, so a client that
/// opens connections and stalls cannot hold them open forever. The public
/// listener's is `--tls-handshake-timeout-secs`, this unless set.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// `--tls-cert`, `--tls-key`, `--tls-ca`: this part's identity and the CA it trusts.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = crate::help::TLS)]
pub struct TlsArgs {
    /// This part's certificate (PEM; leaf first, then any intermediates). With
    /// --tls-key and --tls-ca: mutual TLS to and from K and P.
    #[arg(long, env = "PASTEBIN_TLS_CERT", global = true)]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM: PKCS#8, PKCS#1 or SEC1).
    #[arg(long, env = "PASTEBIN_TLS_KEY", global = true)]
    pub tls_key: Option<PathBuf>,
    /// CA certificates (PEM bundle) that sign the other parts' certificates.
    /// During a CA roll: the old and the new CA in one file.
    #[arg(long, env = "PASTEBIN_TLS_CA", global = true)]
    pub tls_ca: Option<PathBuf>,
}

/// `--topology-tls-cert`, `--topology-tls-key`, `--topology-tls-ca`: this
/// part's identity towards etcd and the CA that signs etcd's members, for an
/// etcd with a CA of its own (docs/security.md#certificates). Unset, a part
/// meets etcd with its `--tls-*` files.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = crate::help::TLS)]
pub struct TopologyTlsArgs {
    /// This part's certificate towards etcd (clientAuth; default: --tls-cert).
    #[arg(long, env = "PASTEBIN_TOPOLOGY_TLS_CERT", global = true)]
    pub topology_tls_cert: Option<PathBuf>,
    /// The private key of --topology-tls-cert (PEM).
    #[arg(long, env = "PASTEBIN_TOPOLOGY_TLS_KEY", global = true)]
    pub topology_tls_key: Option<PathBuf>,
    /// The CA that signs etcd's members.
    #[arg(long, env = "PASTEBIN_TOPOLOGY_TLS_CA", global = true)]
    pub topology_tls_ca: Option<PathBuf>,
}

impl TopologyTlsArgs {
    const FLAGS: [&'static str; 3] = ["--topology-tls-cert", "--topology-tls-key", "--topology-tls-ca"];

    /// The files given to meet etcd with, or `parts` (the `--tls-*` files)
    /// when none is; an error when only some are.
    pub fn load_or(&self, parts: Option<&MutualTls>) -> Result<Option<MutualTls>, TlsError> {
        let given = [&self.topology_tls_cert, &self.topology_tls_key, &self.topology_tls_ca];
        Ok(load_mutual(Self::FLAGS, given)?.or_else(|| parts.cloned()))
    }
}

/// `--public-tls-cert`, `--public-tls-key`: the gateway's public gRPC
/// listener's own certificate, for the names its clients dial.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = crate::help::TLS)]
pub struct PublicTlsArgs {
    /// The public gRPC listener's certificate (PEM, leaf first), for the names
    /// its clients dial; best from a CA that K's and P's clients do not trust.
    /// Without it the public gRPC listener is plaintext, as the HTTP one is.
    #[arg(long, env = "PASTEBIN_PUBLIC_TLS_CERT")]
    pub public_tls_cert: Option<PathBuf>,
    /// The private key of --public-tls-cert (PEM).
    #[arg(long, env = "PASTEBIN_PUBLIC_TLS_KEY")]
    pub public_tls_key: Option<PathBuf>,
    /// Seconds a client of the public gRPC listener may take to finish its TLS handshake; then it
    /// is disconnected.
    #[arg(long, env = "PASTEBIN_TLS_HANDSHAKE_TIMEOUT_SECS", default_value_t = HANDSHAKE_TIMEOUT.as_secs(),
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub tls_handshake_timeout_secs: u64,
}

/// The public gRPC listener's identity.
#[derive(Debug, Clone)]
pub struct PublicTls {
    identity: Identity,
    handshake_timeout: Duration,
}

/// Whether a TLS server asks its clients for a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ClientAuth {
    /// Refuse a client without a certificate signed by --tls-ca (K and P always).
    Required,
    /// Check a certificate if the client sends one; accept clients without.
    Optional,
    /// Ask for none: ordinary server-only TLS (the public listener's default).
    #[default]
    #[value(name = "none")]
    Off,
}

/// Why the TLS files could not be used; each names the flag and the file.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{}, {} and {} go together: {missing} is missing", flags[0], flags[1], flags[2])]
    Incomplete { flags: [&'static str; 3], missing: &'static str },
    #[error("--public-tls-cert and --public-tls-key go together: {0} is missing")]
    PublicIncomplete(&'static str),
    #[error("cannot read {flag} {}: {error}", path.display())]
    Unreadable { flag: &'static str, path: PathBuf, error: io::Error },
    #[error("{flag} {} holds no PEM {what}", path.display())]
    NotPem { flag: &'static str, path: PathBuf, what: &'static str },
}

/// The loaded files: this part's identity and the CA bundle it trusts.
#[derive(Debug, Clone)]
pub struct MutualTls {
    identity: Identity,
    ca: Certificate,
}

impl TlsArgs {
    /// `None` when no TLS flag is set (plaintext, as before); the files read
    /// and checked when all three are; an error naming what is missing or
    /// unreadable otherwise, so a typo never silently means plaintext.
    pub fn load(&self) -> Result<Option<MutualTls>, TlsError> {
        load_mutual(["--tls-cert", "--tls-key", "--tls-ca"], [&self.tls_cert, &self.tls_key, &self.tls_ca])
    }
}

/// A certificate, its key and a CA bundle given by the three `flags`:
/// `None` when none is given, an error naming the one missing when some are.
fn load_mutual(
    flags: [&'static str; 3],
    [cert, key, ca]: [&Option<PathBuf>; 3],
) -> Result<Option<MutualTls>, TlsError> {
    let (cert, key, ca) = match (cert, key, ca) {
        (None, None, None) => return Ok(None),
        (Some(cert), Some(key), Some(ca)) => (cert, key, ca),
        (None, _, _) => return Err(TlsError::Incomplete { flags, missing: flags[0] }),
        (_, None, _) => return Err(TlsError::Incomplete { flags, missing: flags[1] }),
        (_, _, None) => return Err(TlsError::Incomplete { flags, missing: flags[2] }),
    };
    let cert = read_certificates(flags[0], cert)?;
    let key = read_key(flags[1], key)?;
    let ca = read_certificates(flags[2], ca)?;
    choose_ring_provider();
    Ok(Some(MutualTls { identity: Identity::from_pem(cert, key), ca: Certificate::from_pem(ca) }))
}

impl PublicTlsArgs {
    /// `None` when neither flag is set (a plaintext public listener); the
    /// files read and checked when both are; an error naming the missing one.
    pub fn load(&self) -> Result<Option<PublicTls>, TlsError> {
        let (cert, key) = match (&self.public_tls_cert, &self.public_tls_key) {
            (None, None) => return Ok(None),
            (Some(cert), Some(key)) => (cert, key),
            (None, _) => return Err(TlsError::PublicIncomplete("--public-tls-cert")),
            (_, None) => return Err(TlsError::PublicIncomplete("--public-tls-key")),
        };
        let cert = read_certificates("--public-tls-cert", cert)?;
        let key = read_key("--public-tls-key", key)?;
        choose_ring_provider();
        let handshake_timeout = Duration::from_secs(self.tls_handshake_timeout_secs);
        Ok(Some(PublicTls { identity: Identity::from_pem(cert, key), handshake_timeout }))
    }
}

impl PublicTls {
    /// The public listener's TLS: its own certificate, and, as `client_auth`
    /// says, a client certificate signed by `clients_ca`'s CA; a handshake not
    /// finished within `--tls-handshake-timeout-secs` is dropped.
    pub fn server(&self, client_auth: ClientAuth, clients_ca: Option<&MutualTls>) -> ServerTlsConfig {
        let config = ServerTlsConfig::new().identity(self.identity.clone()).timeout(self.handshake_timeout);
        match clients_ca {
            Some(internal) => internal.asking_clients(config, client_auth),
            None => config,
        }
    }
}

impl MutualTls {
    /// A server that serves TLS only, with `client_auth` deciding whether
    /// a client must present a certificate signed by the CA.
    pub fn server(&self, client_auth: ClientAuth) -> ServerTlsConfig {
        let config = ServerTlsConfig::new().identity(self.identity.clone()).timeout(HANDSHAKE_TIMEOUT);
        self.asking_clients(config, client_auth)
    }

    /// `config`, asking clients for a certificate signed by the CA as `client_auth` says.
    fn asking_clients(&self, config: ServerTlsConfig, client_auth: ClientAuth) -> ServerTlsConfig {
        match client_auth {
            ClientAuth::Required => config.client_ca_root(self.ca.clone()).client_auth_optional(false),
            ClientAuth::Optional => config.client_ca_root(self.ca.clone()).client_auth_optional(true),
            ClientAuth::Off => config,
        }
    }

    /// A client that presents this identity and trusts only the CA. The
    /// server name checked is the host of the address it connects to.
    pub fn client(&self) -> ClientTlsConfig {
        ClientTlsConfig::new()
            .identity(self.identity.clone())
            .ca_certificate(self.ca.clone())
            .timeout(HANDSHAKE_TIMEOUT)
    }
}

fn read(flag: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|error| TlsError::Unreadable { flag, path: path.to_owned(), error })
}

/// The file's bytes, once at least one certificate in it parses.
fn read_certificates(flag: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    let pem = read(flag, path)?;
    let certificates: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(&pem).collect();
    match certificates {
        Ok(found) if !found.is_empty() => Ok(pem),
        _ => Err(TlsError::NotPem { flag, path: path.to_owned(), what: "certificate" }),
    }
}

fn read_key(flag: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    let pem = read(flag, path)?;
    match PrivateKeyDer::from_pem_slice(&pem) {
        Ok(_) => Ok(pem),
        Err(_) => Err(TlsError::NotPem { flag, path: path.to_owned(), what: "private key" }),
    }
}

/// rustls picks its process-wide crypto provider by itself only when one
/// is compiled in; the S3 client compiles in aws-lc-rs beside tonic's ring,
/// so without this a TLS server would panic at start-up. Installing twice is
/// harmless (the first choice stays).
fn choose_ring_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(cert: Option<&str>, key: Option<&str>, ca: Option<&str>) -> TlsArgs {
        TlsArgs { tls_cert: cert.map(PathBuf::from), tls_key: key.map(PathBuf::from), tls_ca: ca.map(PathBuf::from) }
    }

    #[test]
    fn no_flags_is_plaintext_and_a_partial_set_names_what_is_missing() {
        assert!(args(None, None, None).load().unwrap().is_none());
        let error = args(Some("c.pem"), None, Some("ca.pem")).load().unwrap_err();
        assert_eq!(error.to_string(), "--tls-cert, --tls-key and --tls-ca go together: --tls-key is missing");
        let error = args(None, Some("k.pem"), Some("ca.pem")).load().unwrap_err();
        assert!(error.to_string().ends_with("--tls-cert is missing"), "{error}");
        let error = args(Some("c.pem"), Some("k.pem"), None).load().unwrap_err();
        assert!(error.to_string().ends_with("--tls-ca is missing"), "{error}");
    }

    #[test]
    fn the_public_listeners_files_go_together() {
        let public = |cert: Option<&str>, key: Option<&str>| PublicTlsArgs {
            public_tls_cert: cert.map(PathBuf::from),
            public_tls_key: key.map(PathBuf::from),
            tls_handshake_timeout_secs: 10,
        };
        assert!(public(None, None).load().unwrap().is_none());
        let error = public(Some("p.pem"), None).load().unwrap_err();
        assert_eq!(
            error.to_string(),
            "--public-tls-cert and --public-tls-key go together: --public-tls-key is missing"
        );
        let error = public(None, Some("p-key.pem")).load().unwrap_err();
        assert!(error.to_string().ends_with("--public-tls-cert is missing"), "{error}");
        let error = public(Some("/nonexistent/p.pem"), Some("/nonexistent/k.pem")).load().unwrap_err();
        assert!(error.to_string().starts_with("cannot read --public-tls-cert /nonexistent/p.pem"), "{error}");
    }

    #[test]
    fn unreadable_and_non_pem_files_are_named() {
        let dir = std::env::temp_dir().join(format!("pastebin-tls-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let junk = dir.join("junk.pem");
        std::fs::write(&junk, "not a certificate").unwrap();
        let junk = junk.to_str().unwrap();

        let missing = args(Some("/nonexistent/c.pem"), Some(junk), Some(junk)).load().unwrap_err();
        assert!(missing.to_string().starts_with("cannot read --tls-cert /nonexistent/c.pem"), "{missing}");
        let not_pem = args(Some(junk), Some(junk), Some(junk)).load().unwrap_err();
        assert_eq!(not_pem.to_string(), format!("--tls-cert {junk} holds no PEM certificate"));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
