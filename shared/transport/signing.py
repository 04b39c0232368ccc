"""Weights signed by the learner: an Ed25519 key only the learner holds signs each
published version; every reader verifies before it loads.

Why a signature and not the sha256 alone: the sha256 recorded at publish time catches
corruption, but anyone with write access to the run's Redis (a compromised worker holding
an old shared password, a Redis administrator) can store a blob *and* its matching sha256.
Why not an HMAC: every reader would then hold the key that makes a valid tag, so any
reader could forge. With Ed25519 readers hold only the public key.

The signed message binds the run id, the version and the blob's sha256, so a signature
cannot be replayed for another run, another version or another blob. The private key lives
in the run directory (``RUN_DIR/keys/weights-signing.key``, 0600 in a 0700 folder): the
driver creates it at a run's first start (a ``--resume`` loads the same key) and hands the
public key to every actor in the run's context; the learner loads the private key from the
run directory it runs beside. Nothing here imports torch.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

SIGNING_KEY_FILE = "keys/weights-signing.key"
"""The learner's private key, relative to the run directory (PEM, PKCS#8)."""
_DOMAIN = b"zeroforge-weights-v1\0"
"""Prefix of every signed message: a signature made for something else never verifies."""


class SigningKeyError(ValueError):
    """The signing key file is unusable (readable by others, not a key, not ours)."""


def signing_key_path(run_dir: str | os.PathLike[str]) -> Path:
    """Where the learner's signing key of the run in ``run_dir`` lives."""
    return Path(run_dir) / SIGNING_KEY_FILE


def signed_message(run_id: str, version: int, sha256_hex: str) -> bytes:
    """The bytes signed for ``version`` of ``run_id`` whose blob has ``sha256_hex``."""
    return _DOMAIN + f"{run_id}\0{int(version)}\0{sha256_hex}".encode()


class WeightSigner:
    """The learner's private key: signs each version it publishes."""

    def __init__(self, key: Ed25519PrivateKey) -> None:
        self._key = key
        self.public_key: str = key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()
        """Hex of the raw 32-byte public key: what readers verify with (not secret)."""

    @classmethod
    def generate(cls) -> WeightSigner:
        """A fresh key, held in memory only (tests; a run keeps its key in a file)."""
        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> WeightSigner:
        """The key in ``path``; SigningKeyError if it is missing, readable by group or
        others, or not an Ed25519 key."""
        path = Path(path)
        try:
            mode = path.stat().st_mode
            data = path.read_bytes()
        except OSError as err:
            raise SigningKeyError(f"weights signing key {path}: cannot read it "
                                  f"({err.strerror or err})") from None
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise SigningKeyError(f"weights signing key {path}: mode {stat.S_IMODE(mode):o} "
                                  f"lets group or others at it; chmod 600 it")
        try:
            key = serialization.load_pem_private_key(data, password=None)
        except (ValueError, TypeError):
            raise SigningKeyError(f"weights signing key {path}: not a PEM private key "
                                  f"(unparsable, or protected by a password)") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise SigningKeyError(f"weights signing key {path}: a {type(key).__name__}, "
                                  f"not an Ed25519 key")
        return cls(key)

    @classmethod
    def load_or_create(cls, path: str | os.PathLike[str]) -> WeightSigner:
        """The key in ``path``, created first (0600, its folder 0700) if there is none."""
        path = Path(path)
        if not path.exists():
            with contextlib.suppress(FileExistsError):
                _create(path)  # another process creating it at once: theirs is loaded
        return cls.load(path)

    def sign(self, run_id: str, version: int, sha256_hex: str) -> str:
        """Hex signature of ``version`` of ``run_id`` whose blob has ``sha256_hex``."""
        return self._key.sign(signed_message(run_id, version, sha256_hex)).hex()


class WeightVerifier:
    """A reader's check that a version was signed by the run's learner."""

    def __init__(self, public_key_hex: str) -> None:
        try:
            raw = bytes.fromhex(public_key_hex)
            self._key = Ed25519PublicKey.from_public_bytes(raw)
        except (ValueError, TypeError):
            raise ValueError(f"weights public key {public_key_hex[:16]!r}...: not the hex "
                             f"of a 32-byte Ed25519 public key") from None
        self.public_key = public_key_hex
        """The hex public key verified against."""

    def verify(self, run_id: str, version: int, sha256_hex: str, signature_hex: str) -> bool:
        """Whether ``signature_hex`` is this key's signature of ``version`` of ``run_id``
        with blob ``sha256_hex`` (False for a malformed or empty signature too)."""
        try:
            self._key.verify(bytes.fromhex(signature_hex),
                             signed_message(run_id, version, sha256_hex))
        except (InvalidSignature, ValueError):
            return False
        return True


def verifier_for(public_key_hex: str) -> WeightVerifier | None:
    """The verifier of a run whose learner has ``public_key_hex``; None for "" (an
    unsigned run: a local run in one process)."""
    return WeightVerifier(public_key_hex) if public_key_hex else None


def signer_for_run(run_dir: str | os.PathLike[str], public_key_hex: str) -> WeightSigner | None:
    """The learner's signer: the key in ``run_dir``, which must be the one the driver put in
    the run's context (``public_key_hex``); None for an unsigned run (""). A missing or
    different key is a SigningKeyError: a learner away from the run directory would
    otherwise publish weights every reader refuses."""
    if not public_key_hex:
        return None
    path = signing_key_path(run_dir)
    signer = WeightSigner.load(path)
    if signer.public_key != public_key_hex:
        raise SigningKeyError(f"weights signing key {path}: public key "
                              f"{signer.public_key[:16]}... is not the run's "
                              f"{public_key_hex[:16]}...; is this the run's directory?")
    return signer


def _create(path: Path) -> None:
    """Write a new key to ``path`` whole or not at all (FileExistsError if it appeared)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption())
    temp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(pem)
            handle.flush()
            os.fsync(handle.fileno())
        # A link, not a rename: it fails if the key appeared meanwhile, so two starts
        # racing keep one key, and a reader never sees a half-written file.
        os.link(temp, path)
    finally:
        temp.unlink(missing_ok=True)
