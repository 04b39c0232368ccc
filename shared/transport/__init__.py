"""The data plane: sample stream, weight store, results, pace; over Redis or in memory.

The seams are Protocols (``base.py``); Redis implements them between processes, the
in-memory twin (``memory.py``) inside one. All Redis code of zeroforge lives in this
package. Importing it connects to nothing;
``connect`` (or a ``RedisServer``'s ``url``) is where a connection starts.
"""

from __future__ import annotations

import importlib
from typing import Any

from zeroforge.shared.transport.base import (
    PaceSignal,
    ResultsStore,
    SampleSink,
    SampleSource,
    Transport,
    WeightSink,
    WeightSource,
)
from zeroforge.shared.transport.connection import (
    CA_ENV,
    PASSWORD_ENV,
    RedisConfig,
    TransportError,
    connect,
)
from zeroforge.shared.transport.opener import open_transport
from zeroforge.shared.transport.server import (
    BINARY_ENV,
    RedisServer,
    RedisServerConfig,
    RedisServerError,
)
from zeroforge.shared.transport.shards import ShardedSampleStream, advance_cursor
from zeroforge.shared.transport.stream import (
    BackpressureTimeout,
    SampleStream,
    StreamConfig,
    StreamInfo,
    stream_key,
)

# The weight store needs torch (~2 s to import); a self-play worker that only appends
# samples should not pay for it, so these names are imported on first use.
_LAZY = {name: "zeroforge.shared.transport.weight_store" for name in (
    "StaleVersionError", "WeightInfo", "WeightsIntegrityError", "WeightStore",
    "WeightSubscription")}

__all__ = [
    "BINARY_ENV", "CA_ENV", "PASSWORD_ENV", "BackpressureTimeout", "RedisConfig", "RedisServer",
    "RedisServerConfig", "RedisServerError", "SampleStream", "ShardedSampleStream",
    "StaleVersionError", "advance_cursor",
    "StreamConfig", "StreamInfo", "TransportError", "WeightInfo", "WeightStore",
    "WeightSubscription", "WeightsIntegrityError", "connect", "stream_key",
    "PaceSignal", "ResultsStore", "SampleSink", "SampleSource", "Transport", "WeightSink",
    "WeightSource",
    "open_transport",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
