"""The learner's weights signature (``shared.transport.signing``): what verifies, what does
not, and the key file's creation and refusals."""

from __future__ import annotations

import hashlib
import os
import stat
import threading

import pytest

from zeroforge.shared.transport import (
    SigningKeyError,
    WeightSigner,
    WeightVerifier,
    signer_for_run,
    signing_key_path,
    verifier_for,
)

SHA = hashlib.sha256(b"weights").hexdigest()


@pytest.fixture(scope="module")
def signer() -> WeightSigner:
    return WeightSigner.generate()


def test_a_signature_verifies_for_its_run_version_and_sha_only(signer):
    verifier = WeightVerifier(signer.public_key)
    sig = signer.sign("run-a", 7, SHA)
    assert verifier.verify("run-a", 7, SHA, sig)
    assert not verifier.verify("run-b", 7, SHA, sig)  # replayed into another run
    assert not verifier.verify("run-a", 8, SHA, sig)  # relabelled as a newer version
    other_sha = hashlib.sha256(b"other weights").hexdigest()
    assert not verifier.verify("run-a", 7, other_sha, sig)  # another blob
    flipped = sig[:-1] + ("0" if sig[-1] != "0" else "1")
    assert not verifier.verify("run-a", 7, SHA, flipped)


def test_another_key_or_no_signature_does_not_verify(signer):
    forger = WeightSigner.generate()
    verifier = WeightVerifier(signer.public_key)
    assert not verifier.verify("run-a", 1, SHA, forger.sign("run-a", 1, SHA))
    assert not verifier.verify("run-a", 1, SHA, "")
    assert not verifier.verify("run-a", 1, SHA, "not hex")
    assert not verifier.verify("run-a", 1, SHA, "ab" * 10)  # hex, wrong length


def test_fields_cannot_be_shifted_across_the_separators(signer):
    """run "a" version 12 and run "a\\x001" version 2 sign different messages."""
    verifier = WeightVerifier(signer.public_key)
    assert not verifier.verify("a\x001", 2, SHA, signer.sign("a", 12, SHA))


def test_a_malformed_public_key_is_one_line():
    for bad in ("zz", "ab" * 31, ""):
        with pytest.raises(ValueError, match="not the hex of a 32-byte Ed25519") as err:
            WeightVerifier(bad)
        assert "\n" not in str(err.value)
    assert verifier_for("") is None
    assert isinstance(verifier_for(WeightSigner.generate().public_key), WeightVerifier)


def test_the_key_file_is_created_private_and_loaded_again(tmp_path):
    path = signing_key_path(tmp_path / "run")
    first = WeightSigner.load_or_create(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    again = WeightSigner.load_or_create(path)  # a --resume: the same key
    assert again.public_key == first.public_key
    assert WeightVerifier(first.public_key).verify("r", 0, SHA, again.sign("r", 0, SHA))
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temp file left


def test_racing_creators_end_with_one_key(tmp_path):
    path = signing_key_path(tmp_path)
    keys: list[str] = []
    threads = [threading.Thread(target=lambda: keys.append(
        WeightSigner.load_or_create(path).public_key)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(keys) == 8 and len(set(keys)) == 1


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660])
def test_a_key_file_others_can_read_is_refused(tmp_path, mode):
    path = signing_key_path(tmp_path)
    WeightSigner.load_or_create(path)
    os.chmod(path, mode)
    with pytest.raises(SigningKeyError, match=f"mode {mode:o} lets group or others") as err:
        WeightSigner.load_or_create(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)


def test_a_bad_key_file_is_refused_in_one_line_naming_it(tmp_path):
    path = signing_key_path(tmp_path)
    path.parent.mkdir(mode=0o700)
    path.write_bytes(b"-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    os.chmod(path, 0o600)
    with pytest.raises(SigningKeyError, match="not a PEM private key") as err:
        WeightSigner.load_or_create(path)
    assert str(path) in str(err.value) and "\n" not in str(err.value)
    path.write_bytes(b"")
    with pytest.raises(SigningKeyError, match="not a PEM private key"):
        WeightSigner.load(path)


def test_another_kind_of_key_is_refused(tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    path = signing_key_path(tmp_path)
    path.parent.mkdir(mode=0o700)
    path.write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    os.chmod(path, 0o600)
    with pytest.raises(SigningKeyError, match="not an Ed25519 key"):
        WeightSigner.load(path)


def test_the_learner_loads_only_the_run_s_own_key(tmp_path):
    run_dir = tmp_path / "run"
    public = WeightSigner.load_or_create(signing_key_path(run_dir)).public_key
    assert signer_for_run(run_dir, "") is None  # an unsigned run
    assert signer_for_run(run_dir, public).public_key == public
    with pytest.raises(SigningKeyError, match="is not the run's") as err:
        signer_for_run(run_dir, WeightSigner.generate().public_key)
    assert "\n" not in str(err.value)
    # a learner away from the run directory finds no key: it says so, and makes none
    with pytest.raises(SigningKeyError, match="cannot read it"):
        signer_for_run(tmp_path / "elsewhere", public)
    assert not (tmp_path / "elsewhere").exists()
