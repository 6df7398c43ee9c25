#!/bin/sh
# Makes, once, a private CA and one certificate every part presents, as server (K, P)
# and as client (gateway, sweeper, ctl): mutual TLS inside the Compose network. Replace
# them with your own CA's for anything but a trial (docs/deployment.md#tls).
set -eu
dir="$1"
[ -s "$dir/pastebin.crt" ] && exit 0
cd "$dir"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 825 \
    -subj "/CN=pastebin compose CA" -keyout ca.key -out ca.crt
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
    -subj "/CN=pastebin" -keyout pastebin.key -out pastebin.csr
printf '%s\n' \
    "subjectAltName=DNS:key-0,DNS:key-1,DNS:paste-0,DNS:paste-1,DNS:gateway-1,DNS:gateway-2,DNS:sweeper,DNS:localhost,IP:127.0.0.1" \
    "extendedKeyUsage=serverAuth,clientAuth" > pastebin.ext
openssl x509 -req -in pastebin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 825 \
    -extfile pastebin.ext -out pastebin.crt
rm -f pastebin.csr pastebin.ext ca.srl ca.key
# The image runs as uid 10001; the key is for its eyes only.
if [ "$(id -u)" = 0 ]; then chown 10001:10001 pastebin.key; fi
chmod 0600 pastebin.key
chmod 0644 ca.crt pastebin.crt
