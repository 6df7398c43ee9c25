//! Who made an operator-only call (docs/security.md#operator-calls): a
//! takedown or a report's dismissal on P is accepted from an operator's
//! identity only, and the audit line names the identity the connection
//! proved, never a name the caller wrote in its request.
//!
//! - Over mutual TLS: a client certificate that carries the operator role,
//!   the subjectAltName URI [`OPERATOR_ROLE`] (`pastebin ctl certs` puts it
//!   on ctl's certificate only). The gateway's or the sweeper's, signed by
//!   the same CA, are refused.
//! - Over `pastebin up`'s Unix socket: its 0600 mode in the 0700 data
//!   directory admits the owner's account (or root) only, so the peer is
//!   the operator; named by its uid.
//! - Over plaintext TCP nothing is proved: a P without TLS trusts whoever
//!   reaches its port with everything (docs/operations.md#certificates-mutual-tls),
//!   and the audit line says the caller is unverified.
//! - In process (the gateway and sweeper inside `up`): refused. Nothing
//!   there makes operator calls, and no connection vouches for one.

use pastebin_edge::grpc::ConnectionInfo;
use tonic::transport::server::{TcpConnectInfo, TlsConnectInfo, UdsConnectInfo};

/// The subjectAltName URI that makes a client certificate an operator's.
pub const OPERATOR_ROLE: &str = "pastebin:role:operator";

/// The identity an operator-only call was accepted from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operator {
    /// A client certificate with the operator role.
    Certificate { subject: String, serial: String },
    /// A process of the local account that owns `pastebin up`'s socket.
    LocalAccount { uid: Option<u32> },
    /// A plaintext TCP peer: no identity could be checked.
    Unverified { peer: String },
}

impl std::fmt::Display for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Certificate { subject, serial } => write!(f, "certificate {subject} (serial {serial})"),
            Self::LocalAccount { uid: Some(uid) } => write!(f, "local uid {uid} (owner-only socket)"),
            Self::LocalAccount { uid: None } => write!(f, "local account (owner-only socket)"),
            Self::Unverified { peer } => write!(f, "unverified plaintext peer {peer}"),
        }
    }
}

/// The operator behind `request`, as its connection proves it, or
/// PERMISSION_DENIED with a sentence that says what `call` needs.
pub fn operator_of<T>(request: &tonic::Request<T>, call: &str) -> Result<Operator, tonic::Status> {
    let extensions = request.extensions();
    if let Some(tls) = extensions.get::<TlsConnectInfo<ConnectionInfo<TcpConnectInfo>>>() {
        let certificate = tls.peer_certs().and_then(|chain| chain.first().cloned());
        return from_certificate(certificate.as_deref().map(AsRef::as_ref), call);
    }
    if let Some(socket) = extensions.get::<ConnectionInfo<UdsConnectInfo>>() {
        return Ok(Operator::LocalAccount { uid: socket.inner.peer_cred.map(|cred| cred.uid()) });
    }
    if let Some(tcp) = extensions.get::<ConnectionInfo<TcpConnectInfo>>() {
        let peer = tcp.inner.remote_addr().map_or_else(|| "unknown".to_owned(), |peer| peer.to_string());
        return Ok(Operator::Unverified { peer });
    }
    Err(tonic::Status::permission_denied(format!(
        "{call} is an operator's call: make it with `pastebin ctl`, through a certificate with the operator \
         role or `pastebin up`'s socket; an in-process caller has no operator identity"
    )))
}

/// The operator a leaf certificate (DER) names, if it carries the role.
fn from_certificate(der: Option<&[u8]>, call: &str) -> Result<Operator, tonic::Status> {
    let needed = format!(
        "{call} is an operator's call: present a client certificate whose subjectAltName has the URI \
         {OPERATOR_ROLE} (`pastebin ctl certs` issues one for ctl)"
    );
    let Some(der) = der else { return Err(tonic::Status::permission_denied(needed)) };
    let Ok((_, certificate)) = x509_parser::parse_x509_certificate(der) else {
        return Err(tonic::Status::permission_denied(needed));
    };
    let subject = certificate.subject().to_string();
    let operator = certificate.subject_alternative_name().ok().flatten().is_some_and(|names| {
        names
            .value
            .general_names
            .iter()
            .any(|name| matches!(name, x509_parser::extensions::GeneralName::URI(uri) if *uri == OPERATOR_ROLE))
    });
    if !operator {
        return Err(tonic::Status::permission_denied(format!(
            "{needed}; this caller's certificate ({subject}) has none"
        )));
    }
    Ok(Operator::Certificate { subject, serial: certificate.raw_serial_as_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn certificate(role: bool) -> Vec<u8> {
        let mut params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        params.distinguished_name.push(rcgen::DnType::CommonName, "ctl");
        if role {
            params.subject_alt_names.push(rcgen::SanType::URI(OPERATOR_ROLE.try_into().unwrap()));
        }
        let key = rcgen::KeyPair::generate().unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    #[test]
    fn only_a_certificate_with_the_operator_role_is_an_operator() {
        let operator = from_certificate(Some(&certificate(true)), "TakeDown").unwrap();
        assert!(matches!(&operator, Operator::Certificate { subject, .. } if subject == "CN=ctl"), "{operator:?}");
        let refused = from_certificate(Some(&certificate(false)), "TakeDown").unwrap_err();
        assert_eq!(refused.code(), tonic::Code::PermissionDenied);
        assert!(refused.message().contains(OPERATOR_ROLE) && refused.message().contains("CN=ctl"), "{refused:?}");
        assert_eq!(from_certificate(None, "TakeDown").unwrap_err().code(), tonic::Code::PermissionDenied);
        assert_eq!(from_certificate(Some(b"junk"), "TakeDown").unwrap_err().code(), tonic::Code::PermissionDenied);
    }

    #[test]
    fn an_in_process_call_is_no_operator() {
        let refused = operator_of(&tonic::Request::new(()), "TakeDown").unwrap_err();
        assert_eq!(refused.code(), tonic::Code::PermissionDenied);
    }
}
