"""File and wire formats: SGF game records (``sgf``) and network weights (``weight_blob``,
with the formats before it in ``weight_blob_legacy``).

Nothing here depends on the networks or the transport; both depend on this package.
Every name is imported on first use (``__getattr__``): the weight formats need torch and
SGF needs the games, and a caller of one should not pay for the other.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeroforge.shared.lazy import lazy_getattr

if TYPE_CHECKING:
    from zeroforge.shared.formats.sgf import (
        GameRecord,
        SgfDirStats,
        SgfError,
        iter_sgf_dir,
        parse_result,
        read_sgf,
        read_sgf_file,
        record_from_session,
        replay,
        write_sgf,
    )
    from zeroforge.shared.formats.weight_blob import (
        WEIGHTS_FORMAT,
        StateDict,
        load_weights,
        plain_state_dict,
        save_weights,
        weights_from_bytes,
        weights_sha256,
        weights_to_bytes,
    )
    from zeroforge.shared.formats.weight_blob_legacy import ZIP_MAGIC

_MODULES = {
    "sgf": ("GameRecord", "SgfDirStats", "SgfError", "iter_sgf_dir", "parse_result",
            "read_sgf", "read_sgf_file", "record_from_session", "replay", "write_sgf"),
    "weight_blob": ("WEIGHTS_FORMAT", "StateDict", "load_weights", "plain_state_dict",
                    "save_weights", "weights_from_bytes", "weights_sha256",
                    "weights_to_bytes"),
    "weight_blob_legacy": ("ZIP_MAGIC",),
}

__all__ = [
    "GameRecord", "SgfDirStats", "SgfError", "StateDict", "WEIGHTS_FORMAT", "ZIP_MAGIC",
    "iter_sgf_dir", "load_weights", "parse_result", "plain_state_dict", "read_sgf",
    "read_sgf_file", "record_from_session", "replay", "save_weights", "weights_from_bytes",
    "weights_sha256", "weights_to_bytes", "write_sgf"
]


__getattr__ = lazy_getattr(__name__, _MODULES)
