"""Readers for the weight formats zeroforge wrote before safetensors; nothing writes them now.

- ``ZFW1`` blobs, the old wire format (also what Redis of an older run still holds)::

      b"ZFW1" | header_len: uint32 LE | header: msgpack | zero padding | data

  header = {"format": 1, "data_sha256": hex digest of data, "data_len": int,
  "tensors": [[name, dtype, shape, offset, nbytes], ...]} in state-dict order; data
  starts at a multiple of 64 bytes, as does each tensor (offsets relative to it), each
  tensor its contiguous little-endian raw bytes (bfloat16 as its 2-byte pattern).
- ``torch.save`` zip files of a plain state dict, the old snapshot files
  (``weights-<seconds>s.pt``), read with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import hashlib
import struct
import sys
from typing import BinaryIO

import msgpack
import numpy as np
import torch

ZFW1_MAGIC = b"ZFW1"
ZIP_MAGIC = b"PK\x03\x04"
_PREFIX = struct.Struct("<4sI")  # magic, header length (little-endian uint32)
_ALIGN = 64
_MAX_HEADER = 16 << 20
_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "float64": torch.float64, "int64": torch.int64, "int32": torch.int32,
    "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}


def read_zfw1(blob: bytes | bytearray | memoryview) -> dict[str, torch.Tensor]:
    """Parse a ZFW1 blob into a state dict of fresh CPU tensors.

    Raises ValueError (saying what is wrong) on a bad magic, truncation, a malformed
    header, out-of-range tensors or a data checksum mismatch.
    """
    if sys.byteorder != "little":
        raise RuntimeError("read_zfw1 supports little-endian hosts only")
    buf = memoryview(blob).cast("B")
    if len(buf) < _PREFIX.size:
        raise ValueError(f"weights blob too short ({len(buf)} bytes)")
    magic, header_len = _PREFIX.unpack_from(buf)
    if magic != ZFW1_MAGIC:
        raise ValueError(f"not a ZFW1 weights blob (magic {bytes(magic)!r})")
    if header_len > _MAX_HEADER or _PREFIX.size + header_len > len(buf):
        raise ValueError(f"weights blob truncated or corrupt: header of {header_len} bytes "
                         f"does not fit in {len(buf)}")
    try:
        header = msgpack.unpackb(buf[_PREFIX.size:_PREFIX.size + header_len], raw=False)
    except Exception as err:  # msgpack raises several unrelated types
        raise ValueError(f"weights blob header is not valid msgpack: {err}") from None
    if (not isinstance(header, dict) or header.get("format") != 1
            or not isinstance(header.get("tensors"), list)
            or not isinstance(header.get("data_len"), int)
            or not isinstance(header.get("data_sha256"), str)):
        raise ValueError("weights blob header is malformed or of an unknown format")
    start = _PREFIX.size + header_len
    start += -start % _ALIGN
    data = buf[start:]
    if len(data) != header["data_len"]:
        raise ValueError(f"weights blob truncated or padded: {len(data)} data bytes, "
                         f"header says {header['data_len']}")
    if hashlib.sha256(data).hexdigest() != header["data_sha256"]:
        raise ValueError("weights blob data fails its sha256 check (corrupt)")
    array = np.frombuffer(data, dtype=np.uint8)
    out: dict[str, torch.Tensor] = {}
    for entry in header["tensors"]:
        try:
            name, dtype_name, shape, offset, nbytes = entry
            dtype = _DTYPES[dtype_name]
            shape = tuple(int(s) for s in shape)
            offset, nbytes = int(offset), int(nbytes)
        except (TypeError, ValueError, KeyError):
            raise ValueError(f"weights blob has a malformed tensor entry {entry!r}") from None
        itemsize = torch.empty((), dtype=dtype).element_size()
        if (not isinstance(name, str) or name in out or min(shape, default=0) < 0
                or nbytes != int(np.prod(shape, dtype=np.int64)) * itemsize
                or offset < 0 or offset + nbytes > len(data)):
            raise ValueError(f"weights blob has an inconsistent tensor entry {entry!r}")
        # copy(): the result owns its memory and is writable, independent of ``blob``.
        raw = torch.from_numpy(array[offset:offset + nbytes].copy())
        out[name] = raw.view(dtype).reshape(shape)
    return out


def read_torch_save(buffer: BinaryIO) -> dict[str, torch.Tensor]:
    """A ``torch.save``d plain state dict, read with ``weights_only=True`` to CPU.

    ValueError if torch cannot read it or it holds anything but name -> tensor.
    """
    try:
        sd = torch.load(buffer, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises many types for truncated or foreign files
        raise ValueError(f"corrupt torch.save file ({type(err).__name__}: "
                         f"{str(err).strip().splitlines()[0][:200]})") from None
    if not isinstance(sd, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                           for k, v in sd.items()):
        raise ValueError("weights file does not hold a plain state dict of tensors")
    return sd
