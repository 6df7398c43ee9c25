//! `pastebin ctl certs --out DIR`: a development CA and a certificate for
//! each part, so mutual TLS is one command away (docs/operations.md,
//! "Certificates"). Production certificates can come from any CA: the parts
//! read ordinary PEM files.

use std::{
    fs::{DirBuilder, OpenOptions},
    io::Write,
    os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt},
    path::{Path, PathBuf},
};

use chrono::{Datelike, Days, NaiveDate, Utc};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

use rustls::pki_types::ServerName;

use crate::{CtlError, Exit};

/// Every part that presents a certificate, and the file stem of its files.
pub const PARTS: &[&str] = &["key-service", "paste-service", "gateway", "sweeper", "ctl"];

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
    let failed = |error: rcgen::Error| CtlError::Failed(format!("cannot make the certificates: {error}"));
    let mut names: Vec<String> = LOCAL_NAMES.iter().map(|n| n.to_string()).collect();
    for name in args.extra_names.iter().map(|n| n.trim()).filter(|n| !n.is_empty()) {
        // The check a client makes of a server name: a name no client could
        // ever ask for would make a certificate that fails every handshake.
        ServerName::try_from(name)
            .map_err(|_| CtlError::Usage(format!("--san {name} is neither a host name nor an IP address")))?;
        names.push(name.to_owned());
    }

    let today = Utc::now().date_naive();
    let ca_key = KeyPair::generate().map_err(failed)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
    // A name of its own: during a CA roll the old and the new CA sit in one
    // bundle, and a verifier picks an issuer by name before the signature.
    let fingerprint: String = ca.key_identifier(&ca_key)[..4].iter().map(|b| format!("{b:02x}")).collect();
    ca.distinguished_name.push(DnType::CommonName, format!("pastebin development CA {fingerprint}"));
    ca.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    set_validity(&mut ca, today, CA_DAYS);
    let ca_cert = ca.self_signed(&ca_key).map_err(failed)?;
    let mut files = vec![("ca.pem".to_owned(), ca_cert.pem()), ("ca-key.pem".to_owned(), ca_key.serialize_pem())];
    let issuer = Issuer::new(ca, ca_key);

    for part in PARTS {
        let mut leaf = CertificateParams::new(names.clone()).map_err(failed)?;
        leaf.distinguished_name.push(DnType::CommonName, *part);
        // The gateway is both a client (of K and P) and a server (its public
        // gRPC listener); one purpose set for all keeps every file usable either way.
        leaf.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        leaf.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        leaf.use_authority_key_identifier_extension = true;
        set_validity(&mut leaf, today, args.days);
        let key = KeyPair::generate().map_err(failed)?;
        let cert = leaf.signed_by(&key, &issuer).map_err(failed)?;
        files.push((cert_file(part), cert.pem()));
        files.push((key_file(part), key.serialize_pem()));
    }
    Ok(files)
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
    for part in PARTS {
        writeln!(
            out,
            "  {part:<14} --tls-cert {} --tls-key {} --tls-ca {}",
            dir.join(cert_file(part)).display(),
            dir.join(key_file(part)).display(),
            ca.display()
        )?;
    }
    writeln!(
        out,
        "\nOr set PASTEBIN_TLS_CERT, PASTEBIN_TLS_KEY and PASTEBIN_TLS_CA. With them, shard addresses \
         (--key-shards, --paste-shards) mean TLS: write host:port or https://host:port, with a host named above."
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(path: &Path) -> u32 {
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn writes_a_ca_and_every_part_private_and_never_overwrites() {
        let temp = tempfile::tempdir().unwrap();
        let args = CertsArgs { out: temp.path().join("certs"), extra_names: vec!["k1.internal".into()], days: 30 };
        let mut out = Vec::new();
        assert_eq!(run(&args, &mut out).unwrap(), Exit::Ok);
        assert_eq!(mode(&args.out), 0o700);
        for part in PARTS {
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
