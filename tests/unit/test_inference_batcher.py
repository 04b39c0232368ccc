"""InferenceServer's batching and weight swaps, on one asyncio loop, without Ray or Redis."""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest
import torch

from zeroforge.actors.inference import InferenceServer, InferenceServerConfig
from zeroforge.shared.formats import weights_to_bytes
from zeroforge.shared.games import make_game
from zeroforge.shared.metrics import CATALOGUE
from zeroforge.shared.nets import NetConfig, TorchEvaluator, build_net, native_bfloat16

GAME = "tictactoe"
SPEC = make_game(GAME).spec
NET = NetConfig.preset("tiny")
# Server and reference run on the same device ("auto"); on a GPU both compute in bfloat16,
# where a row's rounding depends on the batch it was computed in.
TOLERANCE = ({"rtol": 3e-2, "atol": 3e-2} if torch.cuda.is_available()
             else {"rtol": 1e-4, "atol": 1e-5})


def make_server(**config: object) -> InferenceServer:
    return InferenceServer(GAME, NET, InferenceServerConfig(**config), None, "unit")


def make_net(seed: int) -> torch.nn.Module:
    torch.manual_seed(seed)
    return build_net(NET, SPEC)


def request(batch: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random 0/1 planes [batch, C, H, W] uint8 and random legal masks [batch, A]."""
    rng = np.random.default_rng(seed)
    obs = (rng.random((batch, *SPEC.obs_shape)) < 0.3).astype(np.uint8)
    return obs, rng.random((batch, SPEC.num_actions)) < 0.7


def assert_matches(answer: tuple, reference: TorchEvaluator, obs: np.ndarray,
                   legal: np.ndarray) -> None:
    """``answer`` holds exactly the rows ``reference`` computes for this request alone."""
    logits, value, _ = answer
    want = reference.evaluate(obs, legal)
    assert logits.shape == (len(obs), SPEC.num_actions) and logits.dtype == np.float32
    assert value.shape == (len(obs),) and value.dtype == np.float32
    np.testing.assert_allclose(logits, want.policy_logits, **TOLERANCE)
    np.testing.assert_allclose(value, want.value, **TOLERANCE)


def network_calls(server: InferenceServer) -> list[float]:
    """Per-bucket counts of the batch-size histogram (buckets of CATALOGUE, then +Inf)."""
    [[_, hist]] = server.stats()["hists"]["inference_batch_size"]
    return hist[:-1]


def counter(server: InferenceServer, name: str) -> float:
    [[_, value]] = server.stats()["values"][name]
    return value


def test_concurrent_requests_share_network_calls_and_each_gets_its_rows() -> None:
    net = make_net(1)
    reference = TorchEvaluator(net)
    sizes = [1, 4, 7, 2, 5, 3, 6, 1, 2, 8, 3, 4, 1, 5, 2, 7]
    requests = [request(b, seed) for seed, b in enumerate(sizes)]

    async def main() -> list:
        server = make_server(max_wait_ms=50)
        assert await server.load_weights(weights_to_bytes(net), 3) == 3
        answers = await asyncio.gather(*(server.evaluate(o, m) for o, m in requests))
        server.close()
        return [answers, server]

    answers, server = asyncio.run(main())
    for answer, (obs, legal) in zip(answers, requests, strict=True):
        assert_matches(answer, reference, obs, legal)
        assert answer[2] == 3
    calls = sum(network_calls(server))
    assert calls < len(requests) / 4, f"{calls} network calls for {len(requests)} requests"
    assert counter(server, "nn_evaluations_total") == sum(sizes)
    assert counter(server, "inference_requests_total") == len(requests)
    assert set(server.stats()["values"]) >= {"nn_evaluations_total", "weights_version"}
    [[labels, version]] = server.stats()["values"]["weights_version"]
    assert labels == [["component", "inference"]] and version == 3


def test_max_batch_is_respected_and_an_oversize_request_runs_alone() -> None:
    net = make_net(2)
    reference = TorchEvaluator(net)
    requests = [request(3, seed) for seed in range(12)] + [request(20, 99)]

    async def main() -> tuple[list, InferenceServer]:
        server = make_server(max_batch=8, max_wait_ms=20)
        await server.load_weights(weights_to_bytes(net), 1)
        answers = await asyncio.gather(*(server.evaluate(o, m) for o, m in requests))
        server.close()
        return answers, server

    answers, server = asyncio.run(main())
    for answer, (obs, legal) in zip(answers, requests, strict=True):
        assert_matches(answer, reference, obs, legal)
    buckets = CATALOGUE["inference_batch_size"].buckets
    hist = network_calls(server)
    # Two requests of 3 fit in 8 positions, a third does not: six calls of 6 positions,
    # then the request of 20 alone.
    assert hist[buckets.index(8)] == 6
    assert hist[buckets.index(32)] == 1
    assert sum(hist) == 7


def test_lone_request_waits_max_wait_for_company() -> None:
    obs, legal = request(2, 0)

    async def lone(max_wait_ms: float) -> float:
        server = make_server(max_wait_ms=max_wait_ms)
        await server.evaluate(obs, legal)  # warm-up: the first forward pass is slow
        start = time.perf_counter()
        await server.evaluate(obs, legal)
        server.close()
        return time.perf_counter() - start

    assert 0.095 <= asyncio.run(lone(100)) < 1.0
    assert asyncio.run(lone(0)) < 0.08


def test_requests_queued_behind_a_network_call_go_at_once_together() -> None:
    """The wait policy: a request that meets an idle server waits ``max_wait_ms`` for
    company; requests that queue while a network call runs go out together as soon as
    it ends, with no wait of their own."""
    call_s, wait_s = 0.3, 0.6

    async def main() -> tuple[float, float, InferenceServer]:
        server = make_server(max_wait_ms=wait_s * 1000)
        await server.evaluate(*request(1, 9))  # warm-up: the first forward pass is slow
        forward = server._forward

        def slow_forward(obs: list, legal: list):  # a network call that takes a while
            time.sleep(call_s)
            return forward(obs, legal)

        server._forward = slow_forward  # type: ignore[method-assign]
        start = time.perf_counter()
        first = asyncio.ensure_future(server.evaluate(*request(2, 0)))
        await asyncio.sleep(wait_s + call_s / 3)  # the first one's call is running now
        queued = time.perf_counter()
        await asyncio.gather(server.evaluate(*request(3, 1)), server.evaluate(*request(1, 2)))
        behind = time.perf_counter() - queued
        await first
        server.close()
        return queued - start, behind, server

    lone, behind, server = asyncio.run(main())
    assert lone >= wait_s  # the lone request waited for company
    # queued at 1/3 of the call: out when it ends, answered one call later; a fixed wait
    # of their own would add max_wait_ms - 2/3 of a call
    assert behind < call_s * 2 / 3 + call_s + (wait_s - call_s * 2 / 3) / 2
    buckets = list(CATALOGUE["inference_batch_size"].buckets)
    hist = network_calls(server)
    assert hist[buckets.index(4)] == 1  # the two queued requests (3 + 1) in one call
    [[_, depth]] = server.stats()["hists"]["inference_queue_depth"]
    depth_buckets = list(CATALOGUE["inference_queue_depth"].buckets)
    assert depth[depth_buckets.index(2)] == 1 and depth[depth_buckets.index(1)] == 2


def test_a_later_request_joins_the_waiting_batch() -> None:
    async def main() -> tuple[list, float, InferenceServer]:
        server = make_server(max_wait_ms=200)
        start = time.perf_counter()
        first = asyncio.ensure_future(server.evaluate(*request(2, 0)))
        await asyncio.sleep(0.05)
        second = await server.evaluate(*request(3, 1))
        answers = [await first, second]
        elapsed = time.perf_counter() - start
        server.close()
        return answers, elapsed, server

    answers, elapsed, server = asyncio.run(main())
    assert [len(a[0]) for a in answers] == [2, 3]
    assert sum(network_calls(server)) == 1
    assert 0.19 <= elapsed < 1.5


def test_weight_swaps_fall_between_batches_never_inside_one() -> None:
    nets = {1: make_net(10), 2: make_net(11)}
    references = {v: TorchEvaluator(net) for v, net in nets.items()}
    requests = [request(1 + seed % 5, seed) for seed in range(60)]

    async def main() -> tuple[list, list]:
        server = make_server(max_wait_ms=1, max_batch=16)
        await server.load_weights(weights_to_bytes(nets[1]), 1)
        pending, swap = [], None
        for i, (obs, legal) in enumerate(requests):
            pending.append(asyncio.ensure_future(server.evaluate(obs, legal)))
            if i == 30:
                # Mid-stream, with requests queued and a batch possibly on the network thread.
                swap = asyncio.ensure_future(
                    server.load_weights(weights_to_bytes(nets[2]), 2))
            await asyncio.sleep(0.0005 if i % 3 else 0.003)
        answers = await asyncio.gather(*pending)
        assert swap is not None and await swap == 2
        after = await server.evaluate(*requests[0])
        server.close()
        return answers, [after]

    answers, [after] = asyncio.run(main())
    versions = [a[2] for a in answers]
    assert set(versions) == {1, 2}
    assert versions == sorted(versions), "a request got older weights than an earlier one"
    for answer, (obs, legal) in zip(answers, requests, strict=True):
        assert_matches(answer, references[answer[2]], obs, legal)
    assert after[2] == 2
    assert_matches(after, references[2], *requests[0])


def test_a_malformed_request_fails_alone() -> None:
    net = make_net(3)
    reference = TorchEvaluator(net)
    good = [request(2, seed) for seed in range(5)]
    obs, legal = request(2, 50)
    bad_obs = (np.zeros((2, SPEC.obs_shape[0] + 1, *SPEC.obs_shape[1:]), np.uint8), legal)
    bad_legal = (obs, legal[:, :-1])
    bad_count = (obs, legal[:1])

    async def main() -> list:
        server = make_server(max_wait_ms=20)
        await server.load_weights(weights_to_bytes(net), 1)
        calls = [server.evaluate(o, m) for o, m in [good[0], bad_obs, *good[1:3], bad_legal,
                                                    *good[3:], bad_count]]
        answers = await asyncio.gather(*calls, return_exceptions=True)
        server.close()
        return answers

    answers = asyncio.run(main())
    errors = [answers[1], answers[4], answers[7]]
    for err in errors:
        assert isinstance(err, ValueError), err
    assert "observations of shape (2, 5, 3, 3), expected [b, 4, 3, 3]" in str(errors[0])
    assert "legal masks of shape" in str(errors[1]) and "legal masks of shape" in str(errors[2])
    for answer, (o, m) in zip([answers[0], *answers[2:4], *answers[5:7]], good, strict=True):
        assert_matches(answer, reference, o, m)


def test_a_failure_inside_a_merged_call_reaches_only_its_request(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """If the merged network call fails, each request is retried alone."""
    marker = 7  # a plane value no real observation has

    async def main() -> list:
        server = make_server(max_wait_ms=20)
        real = server._evaluator.evaluate

        def picky(obs: np.ndarray, legal: np.ndarray):
            if (obs == marker).any():
                raise RuntimeError("poisoned observation")
            return real(obs, legal)

        monkeypatch.setattr(server._evaluator, "evaluate", picky)
        poisoned = request(2, 0)[0].copy()
        poisoned[0, 0, 0, 0] = marker
        calls = [server.evaluate(*request(2, 1)), server.evaluate(poisoned, request(2, 0)[1]),
                 server.evaluate(*request(3, 2))]
        answers = await asyncio.gather(*calls, return_exceptions=True)
        server.close()
        return answers

    answers = asyncio.run(main())
    assert isinstance(answers[1], RuntimeError) and "poisoned" in str(answers[1])
    assert answers[0][0].shape == (2, SPEC.num_actions)
    assert answers[2][0].shape == (3, SPEC.num_actions)


def test_a_cancelled_caller_does_not_disturb_the_others() -> None:
    async def main() -> tuple[tuple, InferenceServer]:
        server = make_server(max_wait_ms=50)
        doomed = asyncio.ensure_future(server.evaluate(*request(4, 0)))
        kept = asyncio.ensure_future(server.evaluate(*request(2, 1)))
        await asyncio.sleep(0.01)
        doomed.cancel()
        answer = await kept
        server.close()
        return answer, server

    answer, server = asyncio.run(main())
    assert answer[0].shape == (2, SPEC.num_actions)
    assert counter(server, "nn_evaluations_total") == 2


def test_empty_request_and_bad_versions() -> None:
    async def main() -> tuple:
        server = make_server()
        empty = await server.evaluate(*request(0, 0))
        with pytest.raises(ValueError, match="version"):
            await server.load_weights(weights_to_bytes(make_net(0)), -1)
        with pytest.raises(ValueError, match="weights"):
            await server.load_weights(b"not weights", 5)
        server.close()
        return empty, server.weights_version

    (logits, value, version), held = asyncio.run(main())
    assert logits.shape == (0, SPEC.num_actions) and value.shape == (0,)
    assert version == 0 and held == 0


def test_run_lasts_until_stop_and_counts_requests() -> None:
    async def main() -> tuple[bool, int]:
        server = make_server(max_wait_ms=0)
        running = asyncio.ensure_future(server.run())
        for seed in range(3):
            await server.evaluate(*request(2, seed))
        await asyncio.sleep(0.01)
        was_running = not running.done()
        server.stop()
        served = await asyncio.wait_for(running, 5)
        after_stop = await server.evaluate(*request(1, 9))  # still answers until killed
        server.close()
        assert after_stop[0].shape == (1, SPEC.num_actions)
        return was_running, served

    assert asyncio.run(main()) == (True, 3)


def test_config_is_validated() -> None:
    with pytest.raises(ValueError, match="max_batch"):
        InferenceServerConfig(max_batch=0)
    with pytest.raises(ValueError, match="max_wait_ms"):
        InferenceServerConfig(max_wait_ms=-1)
    with pytest.raises(ValueError, match="precision must be one of"):
        InferenceServerConfig(precision="fp8")


def test_precision_reaches_the_network_and_auto_keeps_the_cpu_exact() -> None:
    """``inference.precision`` is handed to the TorchEvaluator. On the CPU an explicit
    bfloat16 is honoured, ``auto`` stays float32, and ``fast`` is bfloat16 exactly where
    the CPU has AMX."""
    server = make_server(precision="bfloat16", device="cpu")
    assert server._evaluator.config.precision == "bfloat16"
    assert server._evaluator.dtype == torch.bfloat16
    assert make_server(precision="auto", device="cpu")._evaluator.dtype == torch.float32
    fast = torch.bfloat16 if native_bfloat16(torch.device("cpu")) else torch.float32
    assert make_server(precision="fast", device="cpu")._evaluator.dtype == fast
