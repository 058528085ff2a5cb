#!/bin/sh
# Start the registry with basic auth over TLS.
#   REGISTRY_ADDRESS  the IP address clients reach it at (the certificate's name)
#   REGISTRY_USER     the one user
#   /run/secrets/registry-password   its password (a mounted file, never argv)
#   /certs            a folder for the CA and server certificate: made at the
#                     first start (a self-signed CA, 30 days), kept after, so
#                     that the caller can give /certs/ca.crt to the clients.
set -eu
: "${REGISTRY_ADDRESS:?set REGISTRY_ADDRESS}" "${REGISTRY_USER:?set REGISTRY_USER}"
if [ ! -s /certs/server.crt ]; then
  umask 077
  openssl req -x509 -newkey rsa:2048 -nodes -days 30 -subj "/CN=dgx-spark-vllm-test registry CA" \
    -keyout /certs/ca.key -out /certs/ca.crt 2>/dev/null
  openssl req -newkey rsa:2048 -nodes -subj "/CN=$REGISTRY_ADDRESS" \
    -keyout /certs/server.key -out /tmp/server.csr 2>/dev/null
  printf 'subjectAltName=IP:%s,IP:127.0.0.1\n' "$REGISTRY_ADDRESS" >/tmp/san
  openssl x509 -req -in /tmp/server.csr -CA /certs/ca.crt -CAkey /certs/ca.key -CAcreateserial -days 30 \
    -extfile /tmp/san -out /certs/server.crt 2>/dev/null
  chmod 0644 /certs/ca.crt /certs/server.crt
fi
mkdir -p /run/registry
# -i: the password from stdin, not the command line; -B: bcrypt (the registry wants it)
htpasswd -iBc /run/registry/htpasswd "$REGISTRY_USER" </run/secrets/registry-password 2>/dev/null
exec docker-registry serve /etc/docker/registry/config.yml
