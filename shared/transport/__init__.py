"""The data plane: sample stream, weight store, results, pace; over Redis or in memory.

The seams are Protocols (``base.py``); Redis implements them between processes, the
in-memory twin (``memory.py``) inside one. All Redis code of zeroforge lives in this
package. Importing it connects to nothing;
``connect`` (or a ``RedisServer``'s ``url``) is where a connection starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from zeroforge.shared.lazy import lazy_getattr
from zeroforge.shared.transport import acl
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
    PartialAckError,
    RedisConfig,
    RedisFull,
    RoleRefused,
    TransportError,
    connect,
    patiently,
)
from zeroforge.shared.transport.fencing import FencedError, take_epoch_patiently
from zeroforge.shared.transport.opener import open_transport
from zeroforge.shared.transport.server import (
    BINARY_ENV,
    RedisServer,
    RedisServerConfig,
    RedisServerError,
)
from zeroforge.shared.transport.shards import ShardedSampleStream, advance_cursor
from zeroforge.shared.transport.sizing import (
    CONNECTIONS_PER_PROCESS,
    ProcessConnections,
    RedisSizing,
    RunShape,
    conf_bytes,
    expected_connections,
    largest_sizing,
    size_servers,
)
from zeroforge.shared.transport.stream import (
    BackpressureTimeout,
    SampleStream,
    StreamConfig,
    StreamInfo,
    stream_key,
)
from zeroforge.shared.transport.stream_room import room_blockers

if TYPE_CHECKING:
    from zeroforge.shared.transport.connection import redis_errors
    from zeroforge.shared.transport.control_state import SavedControlState, encode_control_state
    from zeroforge.shared.transport.memory import MemoryTransport
    from zeroforge.shared.transport.node_cache import (
        NodeCachedWeights,
        default_cache_root,
        node_cache_dir,
    )
    from zeroforge.shared.transport.recent_appends import RecentAppends
    from zeroforge.shared.transport.redis_transport import (
        HOST_CONNECTIONS,
        RedisTransport,
        host_connection_bounds,
    )
    from zeroforge.shared.transport.results import EvalResultsStore, ResultsFormatError
    from zeroforge.shared.transport.server import find_binary, free_port
    from zeroforge.shared.transport.shards import parse_cursor, shard_of, split_id
    from zeroforge.shared.transport.signing import (
        SigningKeyError,
        WeightSigner,
        WeightVerifier,
        signer_for_run,
        signing_key_path,
        verifier_for,
    )
    from zeroforge.shared.transport.stream import FIELD, check_run_id, parse_id
    from zeroforge.shared.transport.weight_store import (
        AVERAGE_CHANNEL,
        RefusedVersions,
        StaleVersionError,
        WeightInfo,
        WeightsIntegrityError,
        WeightsSignatureError,
        WeightStore,
        WeightSubscription,
        decoded_blob,
        publish_age_s,
    )
    from zeroforge.shared.transport.writer_counts import ThreadTallies, WriterCounts

# The weight store, the in-memory twin and the node cache need torch (~2 s to import); a
# self-play worker that only appends samples should not pay for it, so their names (and
# the rest of what only some callers need) are imported on first use.
_MODULES = {
    "connection": ("redis_errors",),
    "control_state": ("SavedControlState", "encode_control_state"),
    "memory": ("MemoryTransport",),
    "node_cache": ("NodeCachedWeights", "default_cache_root", "node_cache_dir"),
    "recent_appends": ("RecentAppends",),
    "redis_transport": ("HOST_CONNECTIONS", "RedisTransport", "host_connection_bounds"),
    "results": ("EvalResultsStore", "ResultsFormatError"),
    "server": ("find_binary", "free_port"),
    "shards": ("parse_cursor", "shard_of", "split_id"),
    "stream": ("FIELD", "check_run_id", "parse_id"),
    "signing": ("SigningKeyError", "WeightSigner", "WeightVerifier", "signer_for_run",
                "signing_key_path", "verifier_for"),
    "weight_store": ("AVERAGE_CHANNEL", "RefusedVersions", "StaleVersionError", "WeightInfo",
                     "WeightsIntegrityError", "WeightsSignatureError", "WeightStore",
                     "WeightSubscription", "decoded_blob", "publish_age_s"),
    "writer_counts": ("ThreadTallies", "WriterCounts"),
}

__all__ = [
    "AVERAGE_CHANNEL",
    "CONNECTIONS_PER_PROCESS", "ProcessConnections", "RedisFull", "RedisSizing", "RunShape",
    "conf_bytes", "expected_connections", "largest_sizing", "size_servers",
    "BINARY_ENV", "BackpressureTimeout", "CA_ENV", "EvalResultsStore", "FIELD", "FencedError",
    "MemoryTransport",
    "NodeCachedWeights", "PASSWORD_ENV", "PaceSignal", "RecentAppends", "RedisConfig",
    "RedisServer",
    "RedisServerConfig", "RedisServerError", "RedisTransport", "ResultsFormatError",
    "RefusedVersions", "ResultsStore", "RoleRefused", "SampleSink", "SampleSource", "SampleStream",
    "SavedControlState", "ShardedSampleStream", "SigningKeyError", "StaleVersionError",
    "StreamConfig", "StreamInfo", "ThreadTallies", "Transport",
    "TransportError", "PartialAckError", "patiently", "WeightInfo", "WeightSigner",
    "WeightSink", "WeightSource", "WeightStore", "WeightVerifier", "WriterCounts",
    "WeightSubscription", "WeightsIntegrityError", "WeightsSignatureError", "acl",
    "advance_cursor",
    "check_run_id", "connect", "decoded_blob", "HOST_CONNECTIONS", "host_connection_bounds",
    "default_cache_root", "encode_control_state", "find_binary", "free_port", "node_cache_dir",
    "open_transport", "parse_cursor",
    "parse_id", "publish_age_s", "redis_errors", "room_blockers", "shard_of", "signer_for_run",
    "signing_key_path", "split_id", "stream_key", "take_epoch_patiently", "verifier_for",
]


__getattr__ = lazy_getattr(__name__, _MODULES)
