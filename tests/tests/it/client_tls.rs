//! The bundled client against an HTTPS server: a TLS terminator made in the
//! test (tokio-rustls, with a CA and a server certificate made by openssl)
//! in front of a real `pastebin up`. The client trusts the CA only through
//! `SSL_CERT_FILE`, as curl and OpenSSL users expect; without it, the
//! failure is a configuration error, never "not confirmed". A self-signed
//! certificate (the `openssl req -x509` one-liner) is trusted as curl trusts
//! it: when it is itself in `SSL_CERT_FILE`, or pinned with `--server-cert`;
//! its names still count.

use std::{path::Path, process::Command, sync::Arc};

use pastebin_tests::cluster::{testbed_binary, Process};
use rustls::pki_types::{pem::PemObject, CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};

/// A CA (`ca.pem`) and a certificate for 127.0.0.1 signed by it (`server.pem`, `server.key`).
fn make_certificates(dir: &Path) {
    let run = |args: &[&str]| {
        let output = Command::new("openssl").args(args).current_dir(dir).output().expect("openssl runs");
        assert!(output.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&output.stderr));
    };
    let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
    run(&[
        &["req", "-x509"][..],
        &ec,
        &["-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=pastebin test CA"],
    ]
    .concat());
    run(&[&["req"][..], &ec, &["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost"]].concat());
    std::fs::write(dir.join("san.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n").unwrap();
    run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "san.ext",
    ]);
}

/// Terminates TLS on a port of its own and relays each connection to `backend`.
async fn https_in_front_of(backend: String, dir: &Path) -> String {
    let certs: Vec<CertificateDer> =
        CertificateDer::pem_file_iter(dir.join("server.pem")).unwrap().collect::<Result<_, _>>().unwrap();
    let key = PrivateKeyDer::from_pem_file(dir.join("server.key")).unwrap();
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("https://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, backend) = (acceptor.clone(), backend.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let Ok(mut plain) = TcpStream::connect(backend).await else { return };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
            });
        }
    });
    address
}

/// `pastebin paste FILE --server URL` with `SSL_CERT_FILE` set or not.
fn paste(server: &str, file: &Path, state: &Path, ca: Option<&Path>) -> (i32, String, String) {
    paste_with(server, file, state, ca, &[])
}

/// [`paste`] with `extra` flags.
fn paste_with(server: &str, file: &Path, state: &Path, ca: Option<&Path>, extra: &[&str]) -> (i32, String, String) {
    let paste = ["paste", file.to_str().unwrap(), "--server", server, "--state-dir", state.to_str().unwrap()];
    client(&[&paste[..], extra].concat(), ca)
}

/// `pastebin get ID --server URL` with `SSL_CERT_FILE` set or not, and `extra` flags.
fn get(server: &str, id: &str, ca: Option<&Path>, extra: &[&str]) -> (i32, String, String) {
    client(&[&["get", id, "--server", server][..], extra].concat(), ca)
}

/// The client with `args`, trusting only the CA in `ca` (as `SSL_CERT_FILE`) or none.
fn client(args: &[&str], ca: Option<&Path>) -> (i32, String, String) {
    let mut command = Command::new(testbed_binary());
    command.args(args).env_remove("SSL_CERT_FILE").env_remove("SSL_CERT_DIR").env_remove("PASTEBIN_CONFIG");
    if let Some(ca) = ca {
        command.env("SSL_CERT_FILE", ca);
    }
    let output = command.output().unwrap();
    let text = |bytes: Vec<u8>| String::from_utf8_lossy(&bytes).into_owned();
    (output.status.code().unwrap_or(-1), text(output.stdout), text(output.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_pastes_over_https_with_the_ca_from_ssl_cert_file() {
    let dir = tempfile::tempdir().unwrap();
    make_certificates(dir.path());
    let data = dir.path().join("data");
    let args: Vec<String> = [
        "up",
        "--data-dir",
        data.to_str().unwrap(),
        "--http",
        "127.0.0.1:0",
        "--grpc",
        "127.0.0.1:0",
        "--admin",
        "127.0.0.1:0",
    ]
    .map(String::from)
    .to_vec();
    let up = Process::start(args, vec![], &["gateway-http"]).await;
    let server = https_in_front_of(up.address("gateway-http").to_owned(), dir.path()).await;
    let file = dir.path().join("note.txt");
    std::fs::write(&file, "over TLS").unwrap();

    // Without the CA: a clear configuration error, distinct from "not confirmed" (75).
    let state = dir.path().join("state-untrusted");
    let (code, _, stderr) = tokio::task::spawn_blocking({
        let (s, f, st) = (server.clone(), file.clone(), state.clone());
        move || paste(&s, &f, &st, None)
    })
    .await
    .unwrap();
    assert_eq!(code, pastebin_client::EXIT_CONFIG, "{stderr}");
    assert!(stderr.contains("TLS") && stderr.contains("SSL_CERT_FILE"), "{stderr}");
    assert!(!stderr.contains("not confirmed"), "{stderr}");

    // With it, the paste is made and readable over the same HTTPS front.
    let ca = dir.path().join("ca.pem");
    let state = dir.path().join("state");
    let (code, stdout, stderr) = tokio::task::spawn_blocking({
        let (s, f, st) = (server.clone(), file.clone(), state.clone());
        move || paste(&s, &f, &st, Some(&ca))
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{stderr}");
    let url = stdout.trim();
    let id = url.rsplit('/').next().unwrap().to_owned();
    let read = pastebin_tests::api::get(&format!("http://{}", up.address("gateway-http")), &id).await;
    assert_eq!(read.json()["content"], "over TLS");
    // `pastebin get` follows the same trust: refused without the CA, read with it.
    let ca = dir.path().join("ca.pem");
    let (untrusted, trusted) =
        tokio::task::spawn_blocking(move || (get(&server, &id, None, &[]), get(&server, &id, Some(&ca), &[])))
            .await
            .unwrap();
    assert_eq!(untrusted.0, pastebin_client::EXIT_CONFIG, "{}", untrusted.2);
    assert!(untrusted.2.contains("TLS") && untrusted.2.contains("SSL_CERT_FILE"), "{}", untrusted.2);
    assert_eq!((trusted.0, trusted.1.as_str()), (0, "over TLS"), "{}", trusted.2);
}

/// The usual one-liner: a self-signed certificate (`CA:TRUE`, as OpenSSL
/// makes it) and its key, as `server.pem` and `server.key` in `dir`.
fn make_self_signed(dir: &Path, subject_alt_name: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let output = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=localhost", "-addext"])
        .arg(format!("subjectAltName={subject_alt_name}"))
        .args(["-keyout", "server.key", "-out", "server.pem", "-days", "2"])
        .current_dir(dir)
        .output()
        .expect("openssl runs");
    assert!(output.status.success(), "openssl req -x509: {}", String::from_utf8_lossy(&output.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_self_signed_server_certificate_is_trusted_as_itself_or_pinned_and_its_names_still_count() {
    let dir = tempfile::tempdir().unwrap();
    let (ours, elsewhere) = (dir.path().join("ours"), dir.path().join("elsewhere"));
    make_self_signed(&ours, "IP:127.0.0.1,DNS:localhost");
    make_self_signed(&elsewhere, "DNS:pastebin.example");
    let data = dir.path().join("data");
    let args: Vec<String> =
        ["up", "--data-dir", data.to_str().unwrap(), "--http", "127.0.0.1:0", "--grpc", "127.0.0.1:0"]
            .into_iter()
            .chain(["--admin", "127.0.0.1:0"])
            .map(String::from)
            .collect();
    let up = Process::start(args, vec![], &["gateway-http"]).await;
    let server = https_in_front_of(up.address("gateway-http").to_owned(), &ours).await;
    let misnamed = https_in_front_of(up.address("gateway-http").to_owned(), &elsewhere).await;
    let file = dir.path().join("note.txt");
    std::fs::write(&file, "self-signed").unwrap();
    let (our_cert, other_cert) = (ours.join("server.pem"), elsewhere.join("server.pem"));

    let run = |server: &str, state: &str, ca: Option<&Path>, extra: &[&str]| {
        let (server, state) = (server.to_owned(), dir.path().join(state));
        let (file, ca, extra) = (file.clone(), ca.map(Path::to_owned), extra.iter().map(|a| a.to_string()).collect());
        tokio::task::spawn_blocking(move || {
            let extra: Vec<String> = extra;
            let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
            paste_with(&server, &file, &state, ca.as_deref(), &extra)
        })
    };
    // The certificate itself in SSL_CERT_FILE, as `curl --cacert` takes it.
    let (code, stdout, stderr) = run(&server, "trusted", Some(&our_cert), &[]).await.unwrap();
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.trim().starts_with("http"), "{stdout}");
    // Pinned, with no CA at all.
    let (code, stdout, stderr) =
        run(&server, "pinned", None, &["--server-cert", our_cert.to_str().unwrap()]).await.unwrap();
    assert_eq!(code, 0, "{stderr}");
    // `pastebin get` takes the same pin.
    let id = stdout.trim().rsplit('/').next().unwrap().to_owned();
    let (s, pin) = (server.clone(), our_cert.to_str().unwrap().to_owned());
    let (code, content, stderr) =
        tokio::task::spawn_blocking(move || get(&s, &id, None, &["--server-cert", &pin])).await.unwrap();
    assert_eq!((code, content.as_str()), (0, "self-signed"), "{stderr}");
    // A pin of another certificate refuses the server, before anything is sent.
    let (code, _, stderr) =
        run(&server, "wrong-pin", None, &["--server-cert", other_cert.to_str().unwrap()]).await.unwrap();
    assert_eq!(code, pastebin_client::EXIT_CONFIG, "{stderr}");
    assert!(stderr.contains("--server-cert"), "the error says what to do next: {stderr}");
    // Trusted, but it does not name 127.0.0.1: refused like any misnamed certificate.
    let (code, _, stderr) = run(&misnamed, "misnamed", Some(&other_cert), &[]).await.unwrap();
    assert_eq!(code, pastebin_client::EXIT_CONFIG, "{stderr}");
    assert!(stderr.contains("not valid for name"), "{stderr}");
}
