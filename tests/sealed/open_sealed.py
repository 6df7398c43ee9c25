#!/usr/bin/env python3
"""An independent reader of sealed pastes (docs/api.md#sealed-pastes).

Written from the format's description alone, with Python's `cryptography`
(PyPI), so that the format is not only ours to read. Run by
tests/tests/it/sealed.rs:

    open_sealed.py vectors FILE
        Opens every vector of FILE (crates/sealed/vectors.json) and seals its
        plaintext again with the vector's key, IV and salt: both must give
        exactly what the file says. Prints `opened N vectors`.

    open_sealed.py open ENVELOPE_FILE LINK [PASSWORD_FILE]
        Opens the envelope with the key after '#' in LINK (and the password
        on the first line of PASSWORD_FILE) and writes the plaintext to
        standard output.

Exits 1 with the reason on standard error when anything does not check out.
"""

import base64
import json
import sys

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

MIN_ITERATIONS = 100_000
MAX_ITERATIONS = 2_000_000


def b64url(text):
    if not isinstance(text, str) or "=" in text:
        raise ValueError("not unpadded base64url")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def b64url_encode(raw):
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def aes_key(fragment_key, password, params):
    if params is None:
        return fragment_key
    kdf = PBKDF2HMAC(algorithm=hashes.SHA256(), length=32, salt=params["salt"], iterations=params["iterations"])
    return kdf.derive(fragment_key + password.encode("utf-8"))


def parse(envelope_bytes):
    wire = json.loads(envelope_bytes.decode("utf-8"))
    known = {"version", "algorithm", "iv", "ciphertext", "password"}
    if set(wire) - known or wire.get("version") != 1 or wire.get("algorithm") != "AES-256-GCM":
        raise ValueError(f"not a version 1 AES-256-GCM envelope: {sorted(wire)}")
    iv, ciphertext = b64url(wire["iv"]), b64url(wire["ciphertext"])
    if len(iv) != 12 or len(ciphertext) < 16:
        raise ValueError("bad iv or ciphertext length")
    params = None
    if "password" in wire:
        p = wire["password"]
        if p.get("kdf") != "PBKDF2-SHA-256" or not MIN_ITERATIONS <= p.get("iterations", 0) <= MAX_ITERATIONS:
            raise ValueError("bad password parameters")
        params = {"salt": b64url(p["salt"]), "iterations": p["iterations"]}
        if len(params["salt"]) != 16:
            raise ValueError("bad salt length")
    return iv, ciphertext, params


def open_envelope(envelope_bytes, fragment, password):
    iv, ciphertext, params = parse(envelope_bytes)
    key = b64url(fragment)
    if len(key) != 32:
        raise ValueError("the fragment is not a 32-byte key")
    if params is not None and password is None:
        raise ValueError("this envelope needs a password")
    return AESGCM(aes_key(key, password, params)).decrypt(iv, ciphertext, None)


def seal_like(vector):
    """The envelope a writer makes from the vector's key, IV and salt."""
    key, iv = b64url(vector["key"]), b64url(vector["iv"])
    params = None
    if "salt" in vector:
        params = {"salt": b64url(vector["salt"]), "iterations": vector["iterations"]}
    ciphertext = AESGCM(aes_key(key, vector.get("password"), params)).encrypt(iv, vector["plaintext"].encode("utf-8"), None)
    wire = {"version": 1, "algorithm": "AES-256-GCM", "iv": b64url_encode(iv), "ciphertext": b64url_encode(ciphertext)}
    if params is not None:
        wire["password"] = {"kdf": "PBKDF2-SHA-256", "salt": vector["salt"], "iterations": vector["iterations"]}
    return json.dumps(wire, separators=(",", ":"))


def check_vectors(path):
    with open(path, encoding="utf-8") as file:
        vectors = json.load(file)
    for vector in vectors:
        opened = open_envelope(vector["envelope"].encode("utf-8"), vector["key"], vector.get("password"))
        if opened != vector["plaintext"].encode("utf-8"):
            raise ValueError(f"vector {vector['name']!r} opens to {opened!r}")
        if seal_like(vector) != vector["envelope"]:
            raise ValueError(f"vector {vector['name']!r}: sealing again gives another envelope")
        if vector.get("password") is not None:
            try:
                open_envelope(vector["envelope"].encode("utf-8"), vector["key"], vector["password"] + "x")
            except Exception:  # noqa: BLE001 - any failure is the expected refusal
                pass
            else:
                raise ValueError(f"vector {vector['name']!r} opens with a wrong password")
    print(f"opened {len(vectors)} vectors")


def main(argv):
    if len(argv) == 3 and argv[1] == "vectors":
        check_vectors(argv[2])
    elif len(argv) in (4, 5) and argv[1] == "open":
        with open(argv[2], "rb") as file:
            envelope = file.read()
        fragment = argv[3].split("#", 1)[1] if "#" in argv[3] else ""
        password = None
        if len(argv) == 5:
            with open(argv[4], encoding="utf-8") as file:
                password = file.read().splitlines()[0]
        sys.stdout.buffer.write(open_envelope(envelope, fragment, password))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except Exception as error:  # noqa: BLE001 - the reason goes to the test's failure message
        print(f"open_sealed: {type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
