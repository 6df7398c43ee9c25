//! Telling a TLS mismatch from a shard that is down
//! (docs/operations.md#refusals-you-will-see). A client without TLS files
//! calling a shard that serves TLS gets only `h2 protocol error`; a client
//! with them calling a plaintext shard, a TLS `corrupt message`. When a
//! first call fails, the client looks at the first bytes the shard sends
//! and, if they show the other protocol, says which flags to add.

use std::time::Duration;

use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpStream,
};

/// How long the probe waits to connect, and then for the first bytes.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// A minimal TLS 1.2 ClientHello (one cipher suite, no extensions). A TLS
/// server answers it with a TLS record, a handshake or an alert; a
/// plaintext HTTP/2 server has already sent its SETTINGS frame.
const CLIENT_HELLO: [u8; 52] = [
    0x16, 0x03, 0x01, 0x00, 0x2f, // record: handshake, TLS 1.0 framing, 47 bytes
    0x01, 0x00, 0x00, 0x2b, // ClientHello, 43 bytes
    0x03, 0x03, // TLS 1.2
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f, // random
    0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
    0x00, // no session id
    0x00, 0x02, 0xc0, 0x2b, // TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
    0x01, 0x00, // null compression
    0x00, 0x00, // no extensions
];

/// What a listener speaks, from the first bytes it sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Speaks {
    Tls,
    PlaintextHttp2,
}

async fn what_it_speaks(authority: &str) -> Option<Speaks> {
    let mut stream = tokio::time::timeout(PROBE_TIMEOUT, TcpStream::connect(authority)).await.ok()?.ok()?;
    stream.write_all(&CLIENT_HELLO).await.ok()?;
    let mut head = [0u8; 5];
    tokio::time::timeout(PROBE_TIMEOUT, stream.read_exact(&mut head)).await.ok()?.ok()?;
    match head {
        // A TLS record: content type handshake (22) or alert (21), version 3.x.
        [0x15 | 0x16, 0x03, ..] => Some(Speaks::Tls),
        // An HTTP/2 frame header whose type is SETTINGS (4): the server preface.
        [0x00, _, _, 0x04, _] => Some(Speaks::PlaintextHttp2),
        _ => None,
    }
}

/// The sentence for a `kind` shard at `address` (a URL as
/// [`pastebin_runtime::grpc::shard_url`] makes it) that failed a call, when
/// the failure is a TLS mismatch; `None` when it is anything else.
pub(crate) async fn mismatch(kind: &str, address: &str, url: &str, client_tls: bool) -> Option<String> {
    let authority = url.split_once("://")?.1.split('/').next()?;
    let speaks = what_it_speaks(authority).await?;
    match (speaks, client_tls) {
        (Speaks::Tls, false) => Some(format!(
            "{kind} shard {address} serves TLS, but this part has no TLS files: add --tls-ca CA.pem \
             --tls-cert CERT.pem --tls-key KEY.pem (a certificate of its own, signed by the shards' CA; \
             `pastebin ctl certs` makes a development set)"
        )),
        (Speaks::PlaintextHttp2, true) => Some(format!(
            "{kind} shard {address} serves plaintext, but this part uses TLS (--tls-cert is set): start the \
             shard with --tls-ca, --tls-cert and --tls-key, or drop this part's --tls-* flags"
        )),
        _ => None,
    }
}
