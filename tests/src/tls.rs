//! Certificate files for mutual-TLS tests, made the two ways an operator
//! would: by `pastebin ctl certs` (the testbed binary) and by the `openssl`
//! command line, so the parts are shown to read ordinary PEM files.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use pastebin_runtime::tls::{MutualTls, TlsArgs};

/// One part's `--tls-cert`, `--tls-key` and `--tls-ca`.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    pub ca: PathBuf,
}

impl TlsFiles {
    /// The three flags, as a part's command line takes them.
    pub fn flags(&self) -> Vec<String> {
        let path = |p: &Path| p.to_str().expect("UTF-8 temp path").to_owned();
        vec![
            "--tls-cert".into(),
            path(&self.cert),
            "--tls-key".into(),
            path(&self.key),
            "--tls-ca".into(),
            path(&self.ca),
        ]
    }

    /// The identity loaded as a client of K and P loads it.
    pub fn load(&self) -> MutualTls {
        let args = TlsArgs {
            tls_cert: Some(self.cert.clone()),
            tls_key: Some(self.key.clone()),
            tls_ca: Some(self.ca.clone()),
        };
        args.load().expect("the test's TLS files load").expect("all three files are given")
    }
}

/// The files of every part of a cluster. `client` is the test's own
/// identity; `public` the gateway's public gRPC listener's certificate, with
/// the CA its clients trust as `ca` (none: that listener is plaintext).
#[derive(Debug, Clone)]
pub struct ClusterTls {
    pub key_service: TlsFiles,
    pub paste_service: TlsFiles,
    pub gateway: TlsFiles,
    pub sweeper: TlsFiles,
    pub client: TlsFiles,
    pub public: Option<TlsFiles>,
}

impl TlsFiles {
    /// `--public-tls-cert` and `--public-tls-key` of these files.
    pub fn public_flags(&self) -> Vec<String> {
        let path = |p: &Path| p.to_str().expect("UTF-8 temp path").to_owned();
        vec!["--public-tls-cert".into(), path(&self.cert), "--public-tls-key".into(), path(&self.key)]
    }
}

/// Runs `pastebin ctl certs --out DIR` (the testbed binary) and returns each part's files.
pub fn ctl_certs(dir: &Path) -> ClusterTls {
    let output = Command::new(crate::cluster::testbed_binary())
        .args(["ctl", "certs", "--out"])
        .arg(dir)
        .output()
        .expect("the testbed binary runs");
    assert!(output.status.success(), "ctl certs failed: {}", String::from_utf8_lossy(&output.stderr));
    let part = |name: &str| TlsFiles {
        cert: dir.join(format!("{name}.pem")),
        key: dir.join(format!("{name}-key.pem")),
        ca: dir.join("ca.pem"),
    };
    ClusterTls {
        key_service: part("key-service"),
        paste_service: part("paste-service"),
        gateway: part("gateway"),
        sweeper: part("sweeper"),
        client: part("ctl"),
        public: Some(TlsFiles { ca: dir.join("public-ca.pem"), ..part("gateway-public") }),
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl").current_dir(dir).args(args).output().expect("openssl is installed");
    assert!(output.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
}

/// A CA, one server certificate (subjectAltName=IP:127.0.0.1,DNS:localhost,
/// `serverAuth` only) and one client certificate (`clientAuth` only), made
/// with the `openssl` command line as a guide on the web would have an
/// operator do it. K and P use the server certificate; the gateway, the
/// sweeper and the test the client certificate, and the gateway's public
/// gRPC listener is plaintext.
pub fn openssl_certs(dir: &Path) -> ClusterTls {
    let ca = ["-keyout", "ca-key.pem", "-out", "ca.pem", "-days", "2", "-subj", "/CN=test CA"];
    openssl(dir, &[&["req", "-x509", "-newkey", "rsa:2048", "-nodes"][..], &ca].concat());
    for (name, extensions) in [
        ("server", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n"),
        ("client", "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n"),
    ] {
        openssl_leaf(dir, name, extensions);
    }
    let files = |name: &str| TlsFiles {
        cert: dir.join(format!("{name}.pem")),
        key: dir.join(format!("{name}-key.pem")),
        ca: dir.join("ca.pem"),
    };
    ClusterTls {
        key_service: files("server"),
        paste_service: files("server"),
        gateway: files("client"),
        sweeper: files("client"),
        client: files("client"),
        public: None,
    }
}

/// A certificate signed with `ca.pem` and `ca-key.pem` in `dir` (both `ctl certs` and
/// [`openssl_certs`] leave them there), as `NAME.pem` and `NAME-key.pem`.
fn openssl_leaf(dir: &Path, name: &str, extensions: &str) {
    let (key, csr, ext, cert) =
        (format!("{name}-key.pem"), format!("{name}.csr"), format!("{name}.ext"), format!("{name}.pem"));
    std::fs::write(dir.join(&ext), extensions).expect("write the extensions file");
    openssl(
        dir,
        &["req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj", &format!("/CN={name}")],
    );
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca-key.pem",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &cert,
            "-extfile",
            &ext,
        ],
    );
}

/// An etcd member's certificate from the CA in `dir` (made by [`ctl_certs`] or
/// [`openssl_certs`]), so etcd and the parts trust one CA. It is both `serverAuth`
/// (etcd serves clients with it) and `clientAuth`: etcd's own HTTP gateway (`/health`,
/// the JSON API) calls the member's gRPC port with the same certificate, and a
/// `serverAuth`-only one is refused there ("incompatible key usage").
pub fn etcd_member(dir: &Path) -> TlsFiles {
    openssl_leaf(
        dir,
        "etcd",
        "basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n",
    );
    TlsFiles { cert: dir.join("etcd.pem"), key: dir.join("etcd-key.pem"), ca: dir.join("ca.pem") }
}
