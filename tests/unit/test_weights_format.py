"""The weights format (shared/formats/weight_blob.py): safetensors bytes and files with a checksum,
and the older formats it still reads (ZFW1 blobs, torch.save snapshot files)."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch

from zeroforge.shared.formats import (
    load_weights,
    save_weights,
    weights_from_bytes,
    weights_sha256,
    weights_to_bytes,
)
from zeroforge.shared.games import make_game
from zeroforge.shared.nets import build_net

SPEC = make_game("gomoku6").spec
DATA = Path(__file__).parent / "data"


def _net(seed: int = 0) -> torch.nn.Module:
    """A tiny net with non-trivial batch-norm statistics, as training leaves them."""
    torch.manual_seed(seed)
    net = build_net("tiny", SPEC).train()
    rng = np.random.default_rng(seed)
    with torch.no_grad():
        for _ in range(2):
            net(torch.from_numpy(rng.random((8, *SPEC.obs_shape), np.float32)))
    return net.eval()


def _same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return list(a) == list(b) and all(
        a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and torch.equal(a[k], b[k])
        for k in a)


def _metadata(blob: bytes) -> dict:
    (n,) = struct.unpack_from("<Q", blob)
    return json.loads(blob[8:8 + n])["__metadata__"]


def test_bytes_round_trip_exactly_in_order_and_deterministic() -> None:
    net = _net(1)
    sd = net.state_dict()
    sd["extra.bf16"] = torch.randn(3, 4).to(torch.bfloat16)
    sd["extra.bool"] = torch.tensor([True, False, True])
    sd["extra.scalar"] = torch.tensor(7, dtype=torch.int64)
    sd["extra.strided"] = torch.arange(12.0).reshape(3, 4).t()  # non-contiguous view
    sd["extra.empty"] = torch.zeros(0, 5)
    blob = weights_to_bytes(sd)
    back = weights_from_bytes(blob)
    assert _same(back, sd)
    assert weights_to_bytes(back) == blob  # deterministic
    assert weights_sha256(back) == weights_sha256(blob) == weights_sha256(sd)
    assert weights_sha256(dict(sd, **{"extra.scalar": torch.tensor(8)})) != weights_sha256(sd)
    # The result loads into a fresh net and reproduces its outputs.
    fresh = build_net("tiny", SPEC).eval()
    fresh.load_state_dict({k: v for k, v in back.items() if not k.startswith("extra.")})
    x = torch.rand(4, *SPEC.obs_shape)
    with torch.no_grad():
        assert all(torch.equal(a, b) for a, b in zip(fresh(x), net(x), strict=True))


def test_blob_is_plain_safetensors_that_other_readers_open() -> None:
    sd = _net().state_dict()
    blob = weights_to_bytes(sd)
    other = safetensors.torch.load(blob)  # the library alone, no zeroforge code
    assert set(other) == set(sd) and all(torch.equal(other[k], sd[k]) for k in sd)
    meta = json.loads(_metadata(blob)["zeroforge"])
    assert meta["format"] == 1 and meta["order"] == list(sd) and len(meta["sha256"]) == 64


def test_tied_tensors_are_stored_twice() -> None:
    shared = torch.randn(4)
    back = weights_from_bytes(weights_to_bytes({"a": shared, "b": shared, "c": shared[:2]}))
    assert torch.equal(back["a"], shared) and torch.equal(back["b"], shared)
    assert torch.equal(back["c"], shared[:2])


def test_corrupt_or_truncated_bytes_raise_a_clear_error() -> None:
    blob = weights_to_bytes(build_net("tiny", make_game("tictactoe").spec))
    flipped = bytearray(blob)
    flipped[-5] ^= 0xFF
    digest = json.loads(_metadata(blob)["zeroforge"])["sha256"].encode()
    assert blob.count(digest) == 1
    plain = safetensors.torch.save({"w": torch.ones(2)})
    cases = {
        "short": (blob[:3], "not valid safetensors"),
        "header length": (b"XXXX" + blob[4:], "not valid safetensors"),
        "truncated": (blob[:-1], "not valid safetensors"),
        "truncated header": (blob[:20], "not valid safetensors"),
        "padded": (blob + b"\0", "not valid safetensors"),
        "huge header length": (struct.pack("<Q", 2**40) + blob[8:], "not valid safetensors"),
        "bit flip in data": (bytes(flipped), "sha256 check"),
        "wrong checksum": (blob.replace(digest, b"0" * 64), "sha256 check"),
        "no zeroforge metadata": (plain, "no zeroforge checksum"),
        "empty": (b"", "not valid safetensors"),
    }
    for why, (bad, message) in cases.items():
        with pytest.raises(ValueError, match=message):
            weights_from_bytes(bad)
            pytest.fail(f"accepted {why}")


def test_save_and_load_weights_file(tmp_path: Path) -> None:
    net = _net(2)
    path = tmp_path / "w.safetensors"
    save_weights(net, path)
    assert path.read_bytes() == weights_to_bytes(net)
    other = build_net("tiny", SPEC).eval()
    sd = load_weights(path, other)
    assert _same(sd, net.state_dict())
    x = torch.rand(3, *SPEC.obs_shape)
    with torch.no_grad():
        assert torch.equal(other(x)[0], net(x)[0])
    buf = io.BytesIO()
    save_weights(net.state_dict(), buf)
    buf.seek(0)
    assert torch.equal(load_weights(buf)["trunk.0.conv.weight"], net.trunk[0].conv.weight)


# The ZFW1 fixture was written by the old shared.nets.weights_to_bytes (before safetensors).
OLD_TENSORS = {"w": torch.arange(6.0).reshape(2, 3) / 4,
               "h": torch.tensor([1.5, -2.0], dtype=torch.bfloat16),
               "m": torch.tensor([True, False, True]), "n": torch.tensor(7)}


def test_old_zfw1_blobs_still_load() -> None:
    old = (DATA / "weights-zfw1.bin").read_bytes()
    assert old[:4] == b"ZFW1"
    assert _same(weights_from_bytes(old), OLD_TENSORS)
    assert _same(load_weights(io.BytesIO(old)), OLD_TENSORS)
    broken = bytearray(old)
    broken[-3] ^= 0x01
    with pytest.raises(ValueError, match="sha256 check"):
        weights_from_bytes(bytes(broken))


def test_old_torch_save_snapshots_still_load(tmp_path: Path) -> None:
    net = _net(3)
    old = tmp_path / "weights-000060s.pt"
    # exactly what the old save_weights wrote: torch.save of plain CPU tensors
    torch.save({k: v.detach().cpu().contiguous() for k, v in net.state_dict().items()}, old)
    other = build_net("tiny", SPEC).eval()
    assert _same(load_weights(old, other), net.state_dict())
    assert torch.equal(other.trunk[0].conv.weight, net.trunk[0].conv.weight)
    cut = _write(tmp_path / "weights-000120s.pt", old.read_bytes()[:200])
    with pytest.raises(ValueError, match="weights-000120s.pt: corrupt torch.save file"):
        load_weights(cut)
    checkpoint_like = tmp_path / "checkpoint.pt"
    torch.save({"format": "x", "model": net.state_dict()}, checkpoint_like)
    with pytest.raises(ValueError, match="not hold a plain state dict"):
        load_weights(checkpoint_like)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_files_of_other_tools_and_foreign_files(tmp_path: Path) -> None:
    # a plain safetensors file written by another tool: read (no checksum to check)
    foreign = _write(tmp_path / "model.safetensors",
                     safetensors.torch.save({"b": torch.ones(2), "a": torch.zeros(3)}))
    assert list(load_weights(foreign)) == ["a", "b"]
    for name, data in {"notes.txt": b"hello, these are no weights",
                       "empty.bin": b""}.items():
        with pytest.raises(ValueError, match=f"{name}: not a weights file"):
            load_weights(_write(tmp_path / name, data))
    with pytest.raises(ValueError, match="cut.safetensors: weights blob is not valid"):
        load_weights(_write(tmp_path / "cut.safetensors", weights_to_bytes(_net())[:-7]))
