"""Throwaway certificates for TLS tests, made with the openssl command.

make_certs(d) writes into directory d:
  ca.crt, ca.key          a self-signed CA;
  server.crt, server.key  a server certificate for localhost and 127.0.0.1;
  client.crt, client.key  a client certificate (extendedKeyUsage clientAuth);
  serveronly.crt, .key    signed by the CA, but for servers only (extendedKeyUsage
                          serverAuth): no client may present it;
  other-ca.crt            a second CA that signed neither (for refusals).
Keys are mode 0600, as the server requires of key files.
"""
import os
import subprocess


def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def make_certs(d):
    d = str(d)
    for ca in ("ca", "other-ca"):
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN=test-{ca}",
                "-keyout", f"{d}/{ca}.key", "-out", f"{d}/{ca}.crt")
    for name, ext in (("server", "subjectAltName=DNS:localhost,IP:127.0.0.1"), ("client", "extendedKeyUsage=clientAuth"),
                      ("serveronly", "extendedKeyUsage=serverAuth")):
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", f"{d}/{name}.key",
                "-out", f"{d}/{name}.csr")
        with open(f"{d}/{name}.ext", "w") as f:
            f.write(ext + "\n")
        openssl("x509", "-req", "-in", f"{d}/{name}.csr", "-CA", f"{d}/ca.crt", "-CAkey", f"{d}/ca.key",
                "-CAcreateserial", "-days", "2", "-extfile", f"{d}/{name}.ext", "-out", f"{d}/{name}.crt")
        os.chmod(f"{d}/{name}.key", 0o600)
