use super::*;

/// The published test vectors (docs/api.md#test-vectors), which the suite
/// also decrypts with an implementation of its own (Python's `cryptography`).
const VECTORS: &str = include_str!("../vectors.json");
const API_DOC: &str = include_str!("../../../docs/api.md");

#[derive(serde::Deserialize)]
struct Vector {
    name: String,
    key: String,
    iv: String,
    salt: Option<String>,
    iterations: Option<u32>,
    password: Option<String>,
    plaintext: String,
    envelope: String,
}

fn bytes<const N: usize>(text: &str) -> [u8; N] {
    URL_SAFE_NO_PAD.decode(text).unwrap().try_into().unwrap()
}

#[test]
fn the_published_vectors_are_what_seal_makes_and_open_reads() {
    let vectors: Vec<Vector> = serde_json::from_str(VECTORS).unwrap();
    assert!(vectors.len() >= 3);
    for vector in vectors {
        let randomness = Randomness {
            key: bytes(&vector.key),
            iv: bytes(&vector.iv),
            salt: vector.salt.as_deref().map_or([0; SALT_BYTES], bytes),
        };
        let password = vector.password.as_deref();
        let sealed =
            seal_with(vector.plaintext.as_bytes(), password, vector.iterations.unwrap_or(ITERATIONS), &randomness);
        assert_eq!(String::from_utf8(sealed.envelope.clone()).unwrap(), vector.envelope, "{}", vector.name);
        assert_eq!(sealed.key.to_fragment(), vector.key);
        let opened = open(vector.envelope.as_bytes(), &format!("#{}", vector.key), password).unwrap();
        assert_eq!(opened, vector.plaintext.as_bytes(), "{}", vector.name);
        assert!(API_DOC.contains(&vector.envelope), "docs/api.md shows the vector {}", vector.name);
    }
}

#[test]
fn a_sealed_paste_opens_with_its_key_and_password_only() {
    let plain = seal(b"no password", None).unwrap();
    assert_eq!(open(&plain.envelope, &plain.key.to_fragment(), None).unwrap(), b"no password");
    // A password given for an envelope without one changes nothing.
    assert_eq!(open(&plain.envelope, &plain.key.to_fragment(), Some("x")).unwrap(), b"no password");
    let other = seal(b"no password", None).unwrap();
    assert_ne!(plain.envelope, other.envelope, "a new seal has a new key and IV");
    assert!(matches!(open(&plain.envelope, &other.key.to_fragment(), None), Err(SealedError::WrongKey)));
    assert!(matches!(open(&plain.envelope, "", None), Err(SealedError::MissingKey)));
    assert!(matches!(open(&plain.envelope, "#", None), Err(SealedError::MissingKey)));
    assert!(matches!(open(&plain.envelope, "#abc", None), Err(SealedError::MalformedKey)));

    let locked = seal("with a password".as_bytes(), Some("correct horse")).unwrap();
    let fragment = locked.key.to_fragment();
    assert!(matches!(open(&locked.envelope, &fragment, None), Err(SealedError::PasswordNeeded)));
    assert!(matches!(open(&locked.envelope, &fragment, Some("wrong horse")), Err(SealedError::WrongKey)));
    assert_eq!(open(&locked.envelope, &fragment, Some("correct horse")).unwrap(), b"with a password");
}

#[test]
fn a_changed_envelope_does_not_open() {
    let sealed = seal(b"tamper with me", None).unwrap();
    let mut envelope = Envelope::parse(&sealed.envelope).unwrap();
    envelope.ciphertext[0] ^= 1;
    assert!(matches!(open(&envelope.to_bytes(), &sealed.key.to_fragment(), None), Err(SealedError::WrongKey)));
}

#[test]
fn the_key_never_prints() {
    let sealed = seal(b"x", None).unwrap();
    assert!(!format!("{sealed:?}").contains(&sealed.key.to_fragment()));
}
