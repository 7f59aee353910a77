#!/usr/bin/env bash
# Makes a throw-away CA and certificates for mutual-TLS tests in DIR (arguments: DIR NAME...):
# ca.pem/ca.key, NAME.pem/NAME.key signed by the CA for each NAME (subjectAltName DNS:NAME, usable
# as server and client), and rogue.pem/rogue.key, self-signed, which the CA never vouched for.
# EC P-256 keys valid one day: generated in a few milliseconds.
set -euo pipefail
dir=$1
shift
cd "$dir"
newkey=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
openssl req -x509 "${newkey[@]}" -keyout ca.key -out ca.pem -days 1 -subj /CN=hvd-test-ca \
  2>/dev/null
for name in "$@"; do
  openssl req "${newkey[@]}" -keyout "$name.key" -out "$name.csr" -subj "/CN=$name" 2>/dev/null
  printf 'subjectAltName=DNS:%s\nextendedKeyUsage=serverAuth,clientAuth\n' "$name" >"$name.ext"
  openssl x509 -req -in "$name.csr" -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 \
    -extfile "$name.ext" -out "$name.pem" 2>/dev/null
done
openssl req -x509 "${newkey[@]}" -keyout rogue.key -out rogue.pem -days 1 -subj /CN=rogue \
  2>/dev/null
chmod 600 ./*.key
