"""Network weights as bytes (the wire) and files (snapshots): safetensors with a checksum.

One format for both: a standard safetensors blob (``u64 LE header length | JSON header |
raw little-endian tensor data``), so any safetensors reader (Python, Rust, the Hugging
Face tools) opens our weights, and parsing untrusted bytes never runs pickle. Its one
metadata entry, ``"zeroforge"``, is a JSON object::

    {"format": 1, "order": [names in state-dict order], "sha256": hex digest}

where the digest covers, for each tensor in ``order``, ``name \\0 dtype \\0 shape \\0``
and its raw bytes. safetensors itself checks the header and that the tensors exactly
cover the data; the digest adds what it does not check (flipped data bits, a swapped
shape). One metadata key keeps the bytes deterministic (safetensors writes several in
hash-map order). Why safetensors: docs/architecture.md, "Formats".

Still read, never written: ``ZFW1`` blobs (the wire format before safetensors) and
``torch.save`` files (snapshots before it); see ``zeroforge.shared.formats.weight_blob_legacy``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import struct
import sys
from pathlib import Path
from typing import BinaryIO

import safetensors.torch
import torch
from torch import nn

from zeroforge.shared.formats import weight_blob_legacy as weights_legacy

__all__ = [
    "StateDict", "WEIGHTS_FORMAT", "plain_state_dict", "weights_to_bytes",
    "weights_from_bytes", "save_weights", "load_weights", "weights_sha256",
]

StateDict = dict[str, torch.Tensor]
"""Parameter and buffer name -> tensor, as ``nn.Module.state_dict()`` returns."""

WEIGHTS_FORMAT = 1
"""Version of the ``"zeroforge"`` metadata entry."""

_META_KEY = "zeroforge"
_HEADER_LEN = struct.Struct("<Q")


def plain_state_dict(weights: nn.Module | StateDict) -> StateDict:
    """Detached, contiguous CPU tensors of a net or state dict; tensors that share memory
    with an earlier one (tied weights) are copied, as safetensors stores each on its own."""
    sd = weights.state_dict() if isinstance(weights, nn.Module) else weights
    out: StateDict = {}
    seen: set[int] = set()
    for name, t in sd.items():
        t = t.detach().cpu().contiguous()
        ptr = t.untyped_storage().data_ptr()
        if t.numel() and ptr in seen:
            t = t.clone()
        seen.add(t.untyped_storage().data_ptr())
        out[name] = t
    return out


def _digest(sd: StateDict, order: list[str]) -> str:
    h = hashlib.sha256()
    for name in order:
        t = sd[name]
        h.update(f"{name}\0{t.dtype}\0{list(t.shape)}\0".encode())
        # reshape(-1) first: a 0-dim tensor cannot be viewed as another element size.
        # .data: the array's buffer as a memoryview, which the stubs for 3.11 type as one.
        h.update(t.reshape(-1).view(torch.uint8).numpy().data)
    return h.hexdigest()


def weights_to_bytes(weights: nn.Module | StateDict) -> bytes:
    """Serialise a net's or state dict's tensors to safetensors bytes (module doc).

    Deterministic: equal state dicts (names, order, dtypes, shapes, values) give equal bytes.
    """
    if sys.byteorder != "little":
        raise RuntimeError("weights_to_bytes supports little-endian hosts only")
    sd = plain_state_dict(weights)
    order = list(sd)
    meta = json.dumps({"format": WEIGHTS_FORMAT, "order": order, "sha256": _digest(sd, order)},
                      sort_keys=True, separators=(",", ":"))
    try:
        return safetensors.torch.save(sd, metadata={_META_KEY: meta})
    except (ValueError, TypeError, RuntimeError) as err:  # e.g. a dtype it cannot store
        raise ValueError(f"weights_to_bytes: {str(err).strip().splitlines()[0]}") from None


def weights_from_bytes(blob: bytes | bytearray | memoryview) -> StateDict:
    """Parse ``weights_to_bytes`` output (or an older ZFW1 blob) into fresh CPU tensors,
    in the original state-dict order.

    Raises ValueError saying what is wrong: not safetensors, truncated or padded, a
    malformed header, no zeroforge checksum, or a checksum mismatch (corrupt data).
    """
    data = bytes(blob)
    if data.startswith(weights_legacy.ZFW1_MAGIC):
        return weights_legacy.read_zfw1(data)
    return _read_safetensors(data, require_checksum=True)


def _read_safetensors(data: bytes, require_checksum: bool) -> StateDict:
    if sys.byteorder != "little":
        raise RuntimeError("weights_from_bytes supports little-endian hosts only")
    try:
        sd = safetensors.torch.load(data)
    except Exception as err:  # SafetensorError and others: the bytes are not usable
        raise ValueError(f"weights blob is not valid safetensors ({len(data)} bytes): "
                         f"{str(err).strip().splitlines()[0]}") from None
    # load() succeeded, so the header length and the JSON header are valid.
    (header_len,) = _HEADER_LEN.unpack_from(data)
    meta_text = json.loads(data[8:8 + header_len]).get("__metadata__", {}).get(_META_KEY)
    if meta_text is None:
        if require_checksum:
            raise ValueError("weights blob has no zeroforge checksum (metadata "
                             f"{_META_KEY!r} missing): not written by weights_to_bytes")
        return dict(sorted(sd.items()))
    try:
        meta = json.loads(meta_text)
        order, digest = list(meta["order"]), str(meta["sha256"])
        if meta["format"] != WEIGHTS_FORMAT:
            raise ValueError
    except (ValueError, TypeError, KeyError):
        raise ValueError(f"weights blob has a malformed {_META_KEY!r} metadata entry "
                         f"(or one of an unknown format): {meta_text[:200]!r}") from None
    if sorted(order) != sorted(sd) or len(set(order)) != len(order):
        raise ValueError("weights blob metadata names other tensors than the blob holds")
    if _digest(sd, order) != digest:
        raise ValueError("weights blob fails its sha256 check (corrupt)")
    return {name: sd[name] for name in order}


def save_weights(weights: nn.Module | StateDict,
                 path_or_buffer: str | os.PathLike | BinaryIO) -> None:
    """Write ``weights_to_bytes(weights)`` to a file path or a binary buffer."""
    blob = weights_to_bytes(weights)
    if isinstance(path_or_buffer, str | os.PathLike):
        Path(path_or_buffer).write_bytes(blob)
    else:
        path_or_buffer.write(blob)


def load_weights(path_or_buffer: str | os.PathLike | BinaryIO,
                 net: nn.Module | None = None, strict: bool = True) -> StateDict:
    """Read a weights file (or buffer) to CPU tensors, the format found from its first bytes:
    safetensors (``save_weights``; also a plain one written by another tool), an older
    ZFW1 blob, or an older ``torch.save`` state dict (read with ``weights_only=True``).

    If ``net`` is given the weights are also loaded into it. Returns the state dict.
    Raises ValueError for a file in none of these formats or a corrupt one.
    """
    if isinstance(path_or_buffer, str | os.PathLike):
        data = Path(path_or_buffer).read_bytes()
        where = str(path_or_buffer)
    else:
        data = path_or_buffer.read()
        where = "weights buffer"
    try:
        if data.startswith(weights_legacy.ZFW1_MAGIC):
            sd = weights_legacy.read_zfw1(data)
        elif data.startswith(weights_legacy.ZIP_MAGIC):
            sd = weights_legacy.read_torch_save(io.BytesIO(data))
        elif len(data) > 8 and data[8:9] == b"{":
            sd = _read_safetensors(data, require_checksum=False)
        else:
            raise ValueError("not a weights file (neither safetensors, ZFW1 nor torch.save)")
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None
    if net is not None:
        net.load_state_dict(sd, strict=strict)
    return sd


def weights_sha256(weights: nn.Module | StateDict | bytes) -> str:
    """Hex sha256 of the ``weights_to_bytes`` form: equal weights give equal hashes."""
    blob = weights if isinstance(weights, bytes | bytearray) else weights_to_bytes(weights)
    return hashlib.sha256(blob).hexdigest()
