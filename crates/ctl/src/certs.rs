//! `pastebin ctl certs --out DIR`: a development CA and a certificate for
//! each part, so mutual TLS is one command away (docs/operations.md,
//! "Certificates"). Production certificates can come from any CA: the parts
//! read ordinary PEM files.
//!
//! Each certificate has the narrowest purpose (docs/design.md#mtls): K and
//! P's say `serverAuth` only, the gateway's, the sweeper's and `ctl`'s
//! `clientAuth` only, so a key stolen from a client part cannot pose as a
//! shard. Only ctl's also carries the operator role (the subjectAltName
//! URI `pastebin:role:operator`), which P asks of a takedown and a report's
//! dismissal (docs/security.md#operator-calls): a gateway's or a sweeper's
//! key cannot take a paste down. The gateway's public gRPC listener gets its own `serverAuth`
//! certificate from a second CA that no internal part trusts: the key on
//! the internet-facing part is worthless against K and P.

use std::{
    fs::{DirBuilder, OpenOptions},
    io::Write,
    os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
};

use chrono::{Datelike, Days, NaiveDate, Utc};
use pastebin_runtime::operator::OPERATOR_ROLE;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    SanType,
};

use rustls::pki_types::ServerName;

use crate::{CtlError, Exit};

/// Every part that presents a certificate, the file stem of its files, and
/// what the certificate is for.
pub const PARTS: &[(&str, Purpose)] = &[
    ("key-service", Purpose::Serves),
    ("paste-service", Purpose::Serves),
    ("gateway", Purpose::Calls),
    ("sweeper", Purpose::Calls),
    ("ctl", Purpose::Calls),
];

/// The one part whose certificate carries the operator role.
const OPERATOR_PART: &str = "ctl";

/// The gateway's public gRPC listener: its certificate's file stem, and the
/// CA that signs it alone (public clients trust it; no internal part does).
const PUBLIC_LISTENER: &str = "gateway-public";
const PUBLIC_CA: &str = "public-ca";

/// What a certificate may be used for, and nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A TLS server (K, P, the public listener): `serverAuth`.
    Serves,
    /// A client of K and P: `clientAuth`.
    Calls,
}

impl Purpose {
    fn extended_key_usage(self) -> ExtendedKeyUsagePurpose {
        match self {
            Self::Serves => ExtendedKeyUsagePurpose::ServerAuth,
            Self::Calls => ExtendedKeyUsagePurpose::ClientAuth,
        }
    }
}

/// The names every certificate is valid for, before `--san` adds more.
const LOCAL_NAMES: &[&str] = &["localhost", "127.0.0.1"];

/// A development CA outlives its leaves, so leaves can be re-issued without a CA roll.
const CA_DAYS: u64 = 10 * 365;

#[derive(Debug, Clone, clap::Args)]
pub struct CertsArgs {
    /// Directory for the files (made 0700 if missing; an existing one must not be
    /// open to group or others, and must not hold certificates from an earlier run).
    #[arg(long)]
    pub out: PathBuf,
    /// More host names or IP addresses the certificates are valid for, besides
    /// localhost and 127.0.0.1 (repeat, or comma-separate). Clients check the
    /// host of each shard address against these.
    #[arg(long = "san", value_delimiter = ',')]
    pub extra_names: Vec<String>,
    /// Days each part's certificate is valid.
    #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(u64).range(1..=3650))]
    pub days: u64,
}

fn cert_file(part: &str) -> String {
    format!("{part}.pem")
}

fn key_file(part: &str) -> String {
    format!("{part}-key.pem")
}

/// Writes the CA and one certificate per part into `--out`, then prints the flags to use.
pub fn run(args: &CertsArgs, out: &mut (dyn Write + Send)) -> Result<Exit, CtlError> {
    let files = issue(args)?;
    prepare_directory(&args.out)?;
    for (name, _) in &files {
        let path = args.out.join(name);
        if path.exists() {
            return Err(CtlError::Failed(format!(
                "{} exists: choose another --out, or remove the old files first",
                path.display()
            )));
        }
    }
    for (name, pem) in &files {
        write_private(&args.out.join(name), pem)?;
    }
    print_flags(args, out)?;
    Ok(Exit::Ok)
}

/// Every file as (name, PEM text): the CA certificate and key, then each part's.
fn issue(args: &CertsArgs) -> Result<Vec<(String, String)>, CtlError> {
    let mut names: Vec<String> = LOCAL_NAMES.iter().map(|n| n.to_string()).collect();
    for name in args.extra_names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        // The check a client makes of a server name: a name no client could
        // ever ask for would make a certificate that fails every handshake.
        ServerName::try_from(name)
            .map_err(|_| CtlError::Usage(format!("--san {name} is neither a host name nor an IP address")))?;
        names.push(name.to_owned());
    }

    let today = Utc::now().date_naive();
    let ca = development_ca("pastebin development CA", today)?;
    let mut files = vec![("ca.pem".to_owned(), ca.certificate), ("ca-key.pem".to_owned(), ca.key)];
    for (part, purpose) in PARTS {
        files.extend(leaf(part, *purpose, &names, &ca.issuer, today, args.days)?);
    }
    // Its key is not kept: a new public certificate is a new run of this command.
    let public_ca = development_ca("pastebin development public CA", today)?;
    files.push((cert_file(PUBLIC_CA), public_ca.certificate));
    files.extend(leaf(PUBLIC_LISTENER, Purpose::Serves, &names, &public_ca.issuer, today, args.days)?);
    Ok(files)
}

fn failed(error: rcgen::Error) -> CtlError {
    CtlError::Failed(format!("cannot make the certificates: {error}"))
}

/// A CA's certificate and key as PEM, and the issuer that signs with it.
struct DevelopmentCa {
    certificate: String,
    key: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A CA that signs leaves only (path length 0), named `name` and its key's fingerprint.
fn development_ca(name: &str, today: NaiveDate) -> Result<DevelopmentCa, CtlError> {
    let key = KeyPair::generate().map_err(failed)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
    // A name of its own: during a CA roll the old and the new CA sit in one
    // bundle, and a verifier picks an issuer by name before the signature.
    let fingerprint: String = ca.key_identifier(&key)[..4].iter().map(|b| format!("{b:02x}")).collect();
    ca.distinguished_name.push(DnType::CommonName, format!("{name} {fingerprint}"));
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    set_validity(&mut ca, today, CA_DAYS);
    let certificate = ca.self_signed(&key).map_err(failed)?.pem();
    Ok(DevelopmentCa { certificate, key: key.serialize_pem(), issuer: Issuer::new(ca, key) })
}

/// `part`'s certificate and key files, for `names` and `purpose` only.
fn leaf(
    part: &str,
    purpose: Purpose,
    names: &[String],
    issuer: &Issuer<'_, KeyPair>,
    today: NaiveDate,
    days: u64,
) -> Result<[(String, String); 2], CtlError> {
    let mut leaf = CertificateParams::new(names.to_vec()).map_err(failed)?;
    leaf.distinguished_name.push(DnType::CommonName, part);
    if part == OPERATOR_PART {
        leaf.subject_alt_names.push(SanType::URI(OPERATOR_ROLE.try_into().map_err(failed)?));
    }
    leaf.extended_key_usages = vec![purpose.extended_key_usage()];
    leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf.use_authority_key_identifier_extension = true;
    set_validity(&mut leaf, today, days);
    let key = KeyPair::generate().map_err(failed)?;
    let cert = leaf.signed_by(&key, issuer).map_err(failed)?;
    Ok([(cert_file(part), cert.pem()), (key_file(part), key.serialize_pem())])
}

/// From yesterday (a peer whose clock is a little behind still accepts it) for `days`.
fn set_validity(params: &mut CertificateParams, today: NaiveDate, days: u64) {
    let ymd = |date: NaiveDate| rcgen::date_time_ymd(date.year(), date.month() as u8, date.day() as u8);
    params.not_before = ymd(today - Days::new(1));
    params.not_after = ymd(today + Days::new(days));
}

/// Creates the directory 0700, or checks that an existing one is private:
/// it will hold private keys.
fn prepare_directory(dir: &Path) -> Result<(), CtlError> {
    let cannot = |error: std::io::Error| CtlError::Failed(format!("cannot create {}: {error}", dir.display()));
    if !dir.exists() {
        return DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(cannot);
    }
    let mode = std::fs::metadata(dir).map_err(cannot)?.permissions().mode();
    if mode & 0o077 != 0 {
        return Err(CtlError::Failed(format!(
            "{} is open to other users (mode {:o}): use a new directory, or chmod 700 it first",
            dir.display(),
            mode & 0o777
        )));
    }
    Ok(())
}

/// A new file readable by its owner only; never overwrites.
fn write_private(path: &Path, contents: &str) -> Result<(), CtlError> {
    let cannot = |error: std::io::Error| CtlError::Failed(format!("cannot write {}: {error}", path.display()));
    let mut file = OpenOptions::new().write(true).create_new(true).mode(0o600).open(path).map_err(cannot)?;
    file.write_all(contents.as_bytes()).map_err(cannot)
}

fn print_flags(args: &CertsArgs, out: &mut (dyn Write + Send)) -> Result<(), CtlError> {
    let dir = std::path::absolute(&args.out).unwrap_or_else(|_| args.out.clone());
    let mut names: Vec<&str> = LOCAL_NAMES.to_vec();
    names.extend(args.extra_names.iter().map(String::as_str));
    writeln!(out, "Made a development CA and a certificate for each part in {}", dir.display())?;
    writeln!(out, "(files 0600, directory 0700; valid for {}; {} days).", names.join(", "), args.days)?;
    writeln!(out, "ca-key.pem signs certificates: no part needs it, keep it away from the servers.\n")?;
    let ca = dir.join("ca.pem");
    for (part, purpose) in PARTS {
        let role = match purpose {
            Purpose::Serves => "server",
            Purpose::Calls if *part == OPERATOR_PART => "client, operator",
            Purpose::Calls => "client",
        };
        writeln!(
            out,
            "  {part:<14} ({role}) --tls-cert {} --tls-key {} --tls-ca {}",
            dir.join(cert_file(part)).display(),
            dir.join(key_file(part)).display(),
            ca.display()
        )?;
    }
    writeln!(
        out,
        "  gateway, its public gRPC listener (server) --public-tls-cert {} --public-tls-key {}",
        dir.join(cert_file(PUBLIC_LISTENER)).display(),
        dir.join(key_file(PUBLIC_LISTENER)).display()
    )?;
    writeln!(
        out,
        "\nOr set PASTEBIN_TLS_CERT, PASTEBIN_TLS_KEY and PASTEBIN_TLS_CA. With them, shard addresses \
         (--key-shards, --paste-shards) mean TLS: write host:port or https://host:port, with a host named above.\n\
         Clients of the public gRPC listener trust {} (no internal part does).",
        dir.join(cert_file(PUBLIC_CA)).display()
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rustls::{
        client::{danger::ServerCertVerifier, WebPkiServerVerifier},
        pki_types::{pem::PemObject, CertificateDer, UnixTime},
        server::WebPkiClientVerifier,
        CertificateError, RootCertStore,
    };

    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    fn roots(ca: &Path) -> Arc<RootCertStore> {
        let mut roots = RootCertStore::empty();
        for certificate in CertificateDer::pem_file_iter(ca).unwrap() {
            roots.add(certificate.unwrap()).unwrap();
        }
        Arc::new(roots)
    }

    fn certificate(path: &Path) -> CertificateDer<'static> {
        CertificateDer::from_pem_file(path).unwrap()
    }

    /// What a client of K or P trusting `ca` says of `cert` served as localhost.
    fn accepted_as_server(ca: &Path, cert: &Path) -> Result<(), rustls::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiServerVerifier::builder_with_provider(roots(ca), provider).build().unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        verifier.verify_server_cert(&certificate(cert), &[], &name, &[], UnixTime::now()).map(|_| ())
    }

    /// What K or P trusting `ca` says of `cert` presented by a client.
    fn accepted_as_client(ca: &Path, cert: &Path) -> Result<(), rustls::Error> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = WebPkiClientVerifier::builder_with_provider(roots(ca), provider).build().unwrap();
        verifier.verify_client_cert(&certificate(cert), &[], UnixTime::now()).map(|_| ())
    }

    #[test]
    fn each_certificate_only_serves_or_only_calls_and_the_public_listeners_is_foreign_to_k_and_p() {
        let temp = tempfile::tempdir().unwrap();
        let args = CertsArgs { out: temp.path().join("certs"), extra_names: vec![], days: 1 };
        run(&args, &mut Vec::new()).unwrap();
        let ca = args.out.join("ca.pem");
        for (part, purpose) in PARTS {
            let cert = args.out.join(cert_file(part));
            let (server, client) = (accepted_as_server(&ca, &cert), accepted_as_client(&ca, &cert));
            match purpose {
                Purpose::Serves => {
                    assert!(server.is_ok(), "{part}: {server:?}");
                    assert!(client.is_err(), "{part}'s certificate is accepted from a client");
                }
                Purpose::Calls => {
                    assert!(server.is_err(), "{part}'s certificate is accepted as a shard's");
                    assert!(client.is_ok(), "{part}: {client:?}");
                }
            }
        }
        for (part, _) in PARTS {
            let der = certificate(&args.out.join(cert_file(part)));
            let (_, parsed) = x509_parser::parse_x509_certificate(der.as_ref()).unwrap();
            let uris: Vec<String> = parsed
                .subject_alternative_name()
                .unwrap()
                .map(|names| names.value.general_names.iter().map(ToString::to_string).collect())
                .unwrap_or_default();
            let operator = uris.iter().any(|name| name == &format!("URI({OPERATOR_ROLE})"));
            assert_eq!(operator, *part == "ctl", "{part}: only ctl's certificate is an operator's: {uris:?}");
        }
        let public = args.out.join(cert_file(PUBLIC_LISTENER));
        let refused = accepted_as_server(&ca, &public).unwrap_err();
        assert!(matches!(refused, rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)), "{refused:?}");
        assert!(accepted_as_client(&ca, &public).is_err(), "the public listener's certificate calls nothing");
        accepted_as_server(&args.out.join(cert_file(PUBLIC_CA)), &public).expect("its own CA vouches for it");
    }

    #[test]
    fn writes_a_ca_and_every_part_private_and_never_overwrites() {
        let temp = tempfile::tempdir().unwrap();
        let args = CertsArgs { out: temp.path().join("certs"), extra_names: vec!["k1.internal".into()], days: 30 };
        let mut out = Vec::new();
        assert_eq!(run(&args, &mut out).unwrap(), Exit::Ok);
        assert_eq!(mode(&args.out), 0o700);
        for part in PARTS.iter().map(|(part, _)| *part).chain([PUBLIC_LISTENER]) {
            for file in [cert_file(part), key_file(part)] {
                assert_eq!(mode(&args.out.join(&file)), 0o600, "{file}");
            }
        }
        let ca = std::fs::read_to_string(args.out.join("ca.pem")).unwrap();
        assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
        let key = std::fs::read_to_string(args.out.join("gateway-key.pem")).unwrap();
        assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"));
        let printed = String::from_utf8(out).unwrap();
        assert!(printed.contains("localhost, 127.0.0.1, k1.internal"), "{printed}");
        assert!(printed.contains("--tls-cert") && printed.contains("sweeper.pem"), "{printed}");
        assert!(!printed.contains("BEGIN"), "no key material is printed");

        let again = run(&args, &mut Vec::new()).unwrap_err();
        assert!(again.to_string().ends_with("exists: choose another --out, or remove the old files first"));
        assert_eq!(std::fs::read_to_string(args.out.join("ca.pem")).unwrap(), ca, "nothing was overwritten");
    }

    #[test]
    fn a_shared_directory_and_a_bad_name_are_refused_before_writing() {
        let temp = tempfile::tempdir().unwrap();
        std::fs::set_permissions(temp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let args = CertsArgs { out: temp.path().to_owned(), extra_names: vec![], days: 1 };
        let error = run(&args, &mut Vec::new()).unwrap_err();
        assert!(error.to_string().contains("is open to other users (mode 755)"), "{error}");

        let args = CertsArgs { out: temp.path().join("new"), extra_names: vec!["not a name!".into()], days: 1 };
        assert!(matches!(run(&args, &mut Vec::new()).unwrap_err(), CtlError::Usage(_)));
        assert!(!args.out.exists(), "nothing was written");
    }
}
