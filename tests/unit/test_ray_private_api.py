"""The private Ray APIs zeroforge relies on still exist in the installed Ray, and nothing
outside ``deploy/ray/private_api.py`` reaches for one.

A Ray upgrade that removes or moves one of them fails here, with a message naming the
missing API and the adapter function that uses it, instead of in a run (where several of
them fail quietly: a status without pending actors, a cluster that binds the network).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
from pathlib import Path
from typing import Any

import pytest
import ray

from zeroforge.deploy.ray import private_api

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = (ROOT / "deploy" / "ray" / "private_api.py", Path(__file__).resolve())
"""The adapter, and this test, which checks the adapter's private names against Ray."""
SCANNED = ("shared", "actors", "learner", "deploy", "zeroforge", "tests", "benchmarks",
           "examples", "scripts")
"""Folders whose Python files may use private Ray APIs only through the adapter."""


def _resolve(dotted: str) -> Any:
    """The object at ``dotted``: the longest importable module prefix, then attributes.
    Raises LookupError naming the first part that is missing."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for i, attr in enumerate(parts[cut:], start=cut):
            if not hasattr(obj, attr):
                raise LookupError(f"{'.'.join(parts[:i])} has no attribute {attr!r}")
            obj = getattr(obj, attr)
        return obj
    raise LookupError(f"module {parts[0]!r} does not import")


def test_the_adapter_names_its_functions_rightly():
    named = {*private_api.PRIVATE_NAMES.values(), *private_api.INIT_KEYWORDS.values()}
    assert {n for n in named if not inspect.isfunction(getattr(private_api, n, None))} == set()


@pytest.mark.parametrize("name", private_api.PRIVATE_NAMES)
def test_each_private_name_the_adapter_uses_still_exists(name):
    try:
        _resolve(name)
    except LookupError as err:
        user = private_api.PRIVATE_NAMES[name]
        pytest.fail(f"Ray {ray.__version__} no longer has the private API {name} ({err}); "
                    f"deploy/ray/private_api.py uses it in {user}(): find what replaced it "
                    "and change that function (and PRIVATE_NAMES)", pytrace=False)


@pytest.mark.parametrize("keyword", private_api.INIT_KEYWORDS)
def test_ray_init_still_takes_the_private_keywords(keyword):
    source = inspect.getsource(inspect.unwrap(ray.init))
    if f'"{keyword}"' not in source:
        pytest.fail(f"Ray {ray.__version__}'s ray.init no longer reads the private keyword "
                    f"{keyword!r}; deploy/ray/private_api.py passes it in "
                    f"{private_api.INIT_KEYWORDS[keyword]}()",
                    pytrace=False)


def test_single_node_mode_keeps_a_node_on_loopback_and_puts_everything_back(monkeypatch):
    from ray._private import ray_constants, services, worker

    assert ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR == private_api.SINGLE_NODE_ENV, (
        f"Ray {ray.__version__} reads ENABLE_RAY_CLUSTER from "
        f"${ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR}, not ${private_api.SINGLE_NODE_ENV}: "
        "update private_api.SINGLE_NODE_ENV")
    monkeypatch.setenv(private_api.SINGLE_NODE_ENV, "1")
    before = ray_constants.ENABLE_RAY_CLUSTER
    with private_api.single_node_mode():
        assert os.environ[private_api.SINGLE_NODE_ENV] == "0"
        assert ray_constants.ENABLE_RAY_CLUSTER is False
        if worker._global_node is None:  # no node in this process: Ray's own answer
            assert services.get_node_ip_address() in ("127.0.0.1", "::1"), (
                f"Ray {ray.__version__} no longer keeps a node on loopback when "
                "ENABLE_RAY_CLUSTER is off (services.get_node_ip_address): "
                "private_api.single_node_mode does not work any more")
    assert ray_constants.ENABLE_RAY_CLUSTER is before
    assert os.environ[private_api.SINGLE_NODE_ENV] == "1"
    monkeypatch.delenv(private_api.SINGLE_NODE_ENV)
    with private_api.single_node_mode():
        pass
    assert private_api.SINGLE_NODE_ENV not in os.environ


def test_environment_sets_a_variable_for_the_block_only(monkeypatch):
    name = "ZEROFORGE_TEST_ENVIRONMENT"
    monkeypatch.delenv(name, raising=False)
    with private_api.environment(name, "0", keep_set=True):
        assert os.environ[name] == "0"
    assert name not in os.environ  # was unset: unset again
    monkeypatch.setenv(name, "7")
    with private_api.environment(name, "0", keep_set=True):
        assert os.environ[name] == "7"  # the user's own value wins
    with private_api.environment(name, "0"):
        assert os.environ[name] == "0"
    assert os.environ[name] == "7"
    with pytest.raises(KeyError), private_api.environment(name, "0"):
        raise KeyError("the block failed")
    assert os.environ[name] == "7"  # put back on the way out of a failure too


def test_newest_local_cluster_address_is_rays_lookup_of_auto(monkeypatch):
    monkeypatch.setenv("RAY_ADDRESS", "10.1.2.3:6379")
    assert private_api.newest_local_cluster_address() == "10.1.2.3:6379"


def test_ray_config_and_token_cache_can_be_reloaded():
    # what ``cluster.use_token`` does before joining: both must run without a cluster
    private_api.reload_ray_config()
    private_api.reset_auth_token_cache()


def test_gcs_actor_state_never_raises_and_session_dir_needs_a_node():
    from ray._private import worker

    assert private_api.gcs_actor_state(object()) == ""
    if worker._global_node is None:
        with pytest.raises(RuntimeError, match="has not started or joined a Ray node"):
            private_api.session_dir()


def _private_uses(path: Path) -> list[str]:
    """Uses of a private Ray API in one file: imports of ``ray._*`` modules, underscore
    attributes reached from the name ``ray``, ``_actor_id`` on anything, and underscore
    keywords of ``ray.init``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("ray._")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ray._"):
            found.append(f"from {node.module} import ...")
        elif isinstance(node, ast.Attribute):
            if node.attr in ("_actor_id", "_ray_actor_id"):
                found.append(f".{node.attr}")
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if (isinstance(root, ast.Name) and root.id == "ray" and node.attr.startswith("_")
                    and not node.attr.startswith("__")):
                found.append(f"ray...{node.attr}")
        elif isinstance(node, ast.Call) and ast.unparse(node.func) == "ray.init":
            found += [f"ray.init({k.arg}=...)" for k in node.keywords
                      if k.arg and k.arg.startswith("_")]
    return [f"{path.relative_to(ROOT)}:{node}" for node in found]


def test_no_other_file_uses_a_private_ray_api():
    offenders = []
    for folder in SCANNED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path not in ALLOWED and ".venv" not in path.parts:
                offenders += _private_uses(path)
    assert offenders == [], (
        "private Ray APIs outside deploy/ray/private_api.py (add a function there, with "
        f"why the public API does not serve, and call it): {offenders}")
