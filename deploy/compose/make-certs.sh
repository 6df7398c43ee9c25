#!/bin/sh
# Makes, once, a private CA and the certificates for mutual TLS inside the Compose network,
# each for one purpose only (docs/security.md#certificates): server.crt (serverAuth) for K
# and P, client.crt (clientAuth) for the gateways and the sweeper, so a key taken from a
# gateway cannot pose as a shard; and etcd.crt for the three etcd members, which both
# serve (clients and peers) and call (each other, and etcd's own HTTP gateway calls its
# member), so it is serverAuth and clientAuth (docs/deployment.md#etcd). Replace them with
# your own CA's for anything but a trial (docs/deployment.md#tls).
set -eu
dir="$1"
[ -s "$dir/server.crt" ] && [ -s "$dir/client.crt" ] && [ -s "$dir/etcd.crt" ] && exit 0
cd "$dir"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 825 \
    -subj "/CN=pastebin compose CA" -keyout ca.key -out ca.crt
issue() { # NAME PURPOSE SUBJECT_ALT_NAMES
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -subj "/CN=pastebin $1" -keyout "$1.key" -out "$1.csr"
    printf '%s\n' "basicConstraints=CA:FALSE" "subjectAltName=$3" "extendedKeyUsage=$2" > "$1.ext"
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 825 \
        -extfile "$1.ext" -out "$1.crt"
    rm -f "$1.csr" "$1.ext"
}
issue server serverAuth "DNS:key-0,DNS:key-1,DNS:paste-0,DNS:paste-1,DNS:localhost,IP:127.0.0.1"
issue client clientAuth "DNS:gateway-1,DNS:gateway-2,DNS:sweeper"
issue etcd serverAuth,clientAuth "DNS:etcd-0,DNS:etcd-1,DNS:etcd-2,DNS:localhost,IP:127.0.0.1"
rm -f ca.srl ca.key pastebin.crt pastebin.key
# The image runs as uid 10001; the keys are for its eyes only. etcd's image runs as root.
if [ "$(id -u)" = 0 ]; then chown 10001:10001 server.key client.key; fi
chmod 0600 server.key client.key etcd.key
chmod 0644 ca.crt server.crt client.crt etcd.crt
