#!/bin/sh
# Makes, once, a private CA and the certificates for mutual TLS inside the Compose network,
# each for one purpose only (docs/security.md#certificates): server.crt (serverAuth) for K
# and P, client.crt (clientAuth) for the gateways and the sweeper, so a key taken from a
# gateway cannot pose as a shard; and etcd.crt for the three etcd members, which both
# serve (clients and peers) and call (each other, and etcd's own HTTP gateway calls its
# member), so it is serverAuth and clientAuth (docs/deployment.md#etcd). etcd has a CA of its
# own, etcd-ca.crt, which also signs etcd-client.crt, every part's identity towards etcd
# (--topology-tls-*): no certificate etcd accepts is accepted by K or P, and the reverse, so
# a shard calls etcd without a certificate that could call another shard. operator.crt
# (clientAuth, with the operator role pastebin:role:operator) is ctl's for takedowns and
# dismissals, which P takes from no other certificate; its key is root's alone, so the parts
# (uid 10001) cannot read it (docs/security.md#operator-calls). Replace them with
# your own CAs' for anything but a trial (docs/deployment.md#tls).
set -eu
dir="$1"
for made in server client etcd etcd-client operator; do [ -s "$dir/$made.crt" ] || missing=1; done
[ -z "${missing:-}" ] && exit 0
cd "$dir"
authority() { # NAME SUBJECT
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 825 \
        -subj "/CN=$2" -keyout "$1.key" -out "$1.crt"
}
authority ca "pastebin compose CA"
authority etcd-ca "pastebin compose etcd CA"
issue() { # NAME PURPOSE SUBJECT_ALT_NAMES CA
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -subj "/CN=pastebin $1" -keyout "$1.key" -out "$1.csr"
    printf '%s\n' "basicConstraints=CA:FALSE" "subjectAltName=$3" "extendedKeyUsage=$2" > "$1.ext"
    openssl x509 -req -in "$1.csr" -CA "$4.crt" -CAkey "$4.key" -CAcreateserial -days 825 \
        -extfile "$1.ext" -out "$1.crt"
    rm -f "$1.csr" "$1.ext"
}
issue server serverAuth "DNS:key-0,DNS:key-1,DNS:paste-0,DNS:paste-1,DNS:localhost,IP:127.0.0.1" ca
issue client clientAuth "DNS:gateway-1,DNS:gateway-2,DNS:sweeper" ca
issue operator clientAuth "URI:pastebin:role:operator" ca
issue etcd serverAuth,clientAuth "DNS:etcd-0,DNS:etcd-1,DNS:etcd-2,DNS:localhost,IP:127.0.0.1" etcd-ca
issue etcd-client clientAuth "DNS:pastebin-etcd-client" etcd-ca
rm -f ca.srl etcd-ca.srl ca.key etcd-ca.key
# The image runs as uid 10001; the keys are for its eyes only. etcd's image runs as root.
if [ "$(id -u)" = 0 ]; then chown 10001:10001 server.key client.key etcd-client.key; fi
chmod 0600 server.key client.key etcd.key etcd-client.key operator.key
chmod 0644 ca.crt etcd-ca.crt server.crt client.crt etcd.crt etcd-client.crt operator.crt
