"""deploy/k8s (the Dask operator) and deploy/helm (the plain Dask chart), checked offline.

Every object meets its schema (Kubernetes', or the operator's CRD), the kustomization renders each
manifest once with its namespace, labels and image, and the parts agree with one another and with
Polis: the scheduler address, the data volume, the settings, the secrets and the image.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import dask.config
import jsonschema
import pytest
import yaml
from dask.utils import parse_bytes

from engine.settings import THREADS_PER_WORKER
from service.admission.grants import read_grants_file
from service.server import check_listen_address
from service.settings import ServiceSettings
from tests.deploy.kustomize_render import render
from tests.deploy.manifests import (
    HELM,
    IMAGE,
    K8S,
    ROOT,
    all_pods,
    env_of,
    load,
    manifests,
    one,
    pod_specs,
    service_env,
)
from tests.deploy.schemas import operator_scheduler_name, validate
from tests.deploy.test_dockerfile import copies, instructions

KUBECTL = shutil.which("kubectl")


def dockerfile_env() -> dict[str, str]:
    """The variables deploy/Dockerfile's ENV instructions set."""
    return dict(pair.split("=", 1) for word, rest in instructions() if word == "ENV" for pair in shlex.split(rest))


def setting_variables() -> set[str]:
    """Every environment variable the Polis settings tree reads."""
    names = set()
    for name, field in ServiceSettings.model_fields.items():
        alias = field.validation_alias
        names.add(alias if isinstance(alias, str) else f"{ServiceSettings.model_config['env_prefix']}{name}".upper())
    assert {"POLIS_SCHEDULER", "POLIS_GRANTS", "POLIS_AUTH_TOKENS"} <= names
    return names


# ---- schemas ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("doc", [pytest.param(doc, id=f"{path.parent.name}/{path.name}:{doc['kind']}/{doc['metadata']['name']}")
                                 for path in [*sorted(K8S.glob("*.yaml")), HELM / "polis-service.yaml"]
                                 if path.name != "kustomization.yaml" for doc in load(path)])
def test_every_manifest_meets_its_kubernetes_or_crd_schema(doc: dict[str, Any]):
    validate(doc)


def test_the_crd_check_rejects_a_misspelt_field_and_an_integer_named_port():
    cluster = one(manifests(), "DaskCluster")
    worker = cluster["spec"]["worker"]["spec"]["containers"][0]
    worker["volumeMount"] = worker.pop("volumeMounts")
    with pytest.raises(jsonschema.ValidationError, match="volumeMount"):
        validate(cluster)
    cluster = one(manifests(), "DaskCluster")
    cluster["spec"]["scheduler"]["service"]["ports"][0]["targetPort"] = 8786  # the CRD types it as a string
    with pytest.raises(jsonschema.ValidationError, match="8786"):
        validate(cluster)
    with pytest.raises(jsonschema.ValidationError):
        validate({**one(manifests(), "DaskAutoscaler"), "spec": {"cluster": "polis", "minimum": 1}})


def test_the_kubernetes_check_rejects_an_unknown_field():
    claim = one(manifests(), "PersistentVolumeClaim")
    claim["spec"]["accessMode"] = claim["spec"].pop("accessModes")
    with pytest.raises(jsonschema.ValidationError, match="accessMode"):
        validate(claim)


# ---- the kustomization --------------------------------------------------------------------------------------


def key(doc: dict[str, Any]) -> tuple[str, str]:
    return doc["kind"], doc["metadata"]["name"]


def test_the_kustomization_renders_every_manifest_once_with_namespace_labels_and_image():
    rendered = render(K8S)
    assert sorted(map(key, rendered)) == sorted(map(key, manifests()))
    assert len(set(map(key, rendered))) == len(rendered)
    for doc in rendered:
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "polis", key(doc)
        assert doc["metadata"].get("namespace") == (None if doc["kind"] == "Namespace" else "polis"), key(doc)
        validate(doc)
    assert one(rendered, "Namespace")["metadata"]["name"] == "polis"
    assert {c["image"] for _, spec in pod_specs(rendered) for c in spec["containers"]} == {IMAGE}


def test_the_kustomization_sets_the_image_and_namespace_it_names(tmp_path: Path):
    shutil.copytree(K8S, tmp_path / "k8s")
    path = tmp_path / "k8s" / "kustomization.yaml"
    kustomization = yaml.safe_load(path.read_text())
    kustomization["namespace"] = "lab-a"
    kustomization["images"] = [{"name": "polis", "newName": "registry.example:5000/team/polis", "newTag": "0.1.0"}]
    path.write_text(yaml.safe_dump(kustomization))
    rendered = render(tmp_path / "k8s")
    assert {c["image"] for _, spec in pod_specs(rendered) for c in spec["containers"]} == {"registry.example:5000/team/polis:0.1.0"}
    assert {doc["metadata"].get("namespace", doc["metadata"]["name"]) for doc in rendered} == {"lab-a"}


def test_the_renderer_refuses_a_field_it_does_not_apply(tmp_path: Path):
    shutil.copytree(K8S, tmp_path / "k8s")
    path = tmp_path / "k8s" / "kustomization.yaml"
    path.write_text(path.read_text() + "namePrefix: dev-\n")
    with pytest.raises(ValueError, match="namePrefix"):
        render(tmp_path / "k8s")


@pytest.mark.skipif(KUBECTL is None, reason="no kubectl on PATH: its built-in kustomize is not compared (the renderer still is)")
def test_kubectl_kustomize_renders_the_same_objects_as_the_renderer():
    out = subprocess.run([str(KUBECTL), "kustomize", str(K8S)], capture_output=True, text=True, timeout=60, check=True).stdout
    by_key = {key(doc): doc for doc in yaml.safe_load_all(out)}
    assert len(by_key) == len(manifests())
    assert by_key == {key(doc): doc for doc in render(K8S)}


# ---- cross-checks -------------------------------------------------------------------------------------------


def test_the_service_reaches_the_daskclusters_scheduler_service():
    docs = manifests()
    cluster = one(docs, "DaskCluster")
    name = cluster["metadata"]["name"]
    port = next(p for p in cluster["spec"]["scheduler"]["service"]["ports"] if p["name"] == "tcp-comm")
    address = f"tls://{operator_scheduler_name(name)}:{port['port']}"
    assert service_env(docs)["POLIS_SCHEDULER"] == address
    [worker] = cluster["spec"]["worker"]["spec"]["containers"]
    assert worker["args"][2] == address  # the operator's DASK_SCHEDULER_ADDRESS is tcp://: the workers name it
    assert one(docs, "DaskAutoscaler")["spec"]["cluster"] == name
    assert 1 <= one(docs, "DaskAutoscaler")["spec"]["minimum"] <= one(docs, "DaskAutoscaler")["spec"]["maximum"]
    # The Service selects the scheduler pod by the labels the operator puts on it.
    assert cluster["spec"]["scheduler"]["service"]["selector"] == {"dask.org/cluster-name": name, "dask.org/component": "scheduler"}


def test_the_helm_service_reaches_the_charts_scheduler_service():
    values = yaml.safe_load((HELM / "dask-values.yaml").read_text(encoding="utf-8"))
    # The chart names its scheduler Service "<fullname>-scheduler" on scheduler.servicePort.
    expected = f"tcp://{values['fullnameOverride']}-scheduler:{values['scheduler']['servicePort']}"
    assert service_env(load(HELM / "polis-service.yaml"))["POLIS_SCHEDULER"] == expected


def test_one_rwx_claim_is_mounted_at_the_data_dir_in_every_pod():
    docs = manifests()
    claim = one(docs, "PersistentVolumeClaim")
    assert claim["spec"]["accessModes"] == ["ReadWriteMany"]
    data_dir = service_env(docs)["POLIS_DATA_DIR"]
    assert dockerfile_env()["POLIS_DATA_DIR"] == data_dir
    pods = all_pods()
    assert {where for where, _ in pods} >= {"polis scheduler", "polis workers", "polis-service", "chart workers", "helm polis-service"}
    for where, spec in pods:
        [volume] = [v["name"] for v in spec["volumes"] if v.get("persistentVolumeClaim", {}).get("claimName") == claim["metadata"]["name"]]
        for container in spec["containers"]:
            assert [m["mountPath"] for m in container["volumeMounts"] if m["name"] == volume] == [data_dir], where


def test_every_polis_variable_is_a_setting_and_the_service_env_passes_the_listen_check(tmp_path: Path, monkeypatch):
    known = setting_variables()
    for where, spec in all_pods():
        for container in spec["containers"]:
            assert {n for n in env_of(container) if n.startswith("POLIS_")} <= known, where
    docs = manifests()
    env = service_env(docs)
    # The token and grants files where the Deployment mounts the polis-auth Secret: here, in tmp_path.
    [auth] = [m for m in one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] if m["name"] == "auth"]
    for name, text in one(docs, "Secret", "polis-auth")["stringData"].items():
        (tmp_path / name).write_text(text)
    for name, value in env.items():
        monkeypatch.setenv(name, value.replace(auth["mountPath"], str(tmp_path)))
    settings = ServiceSettings()
    assert settings.host == "0.0.0.0" and settings.scheduler == env["POLIS_SCHEDULER"]
    assert check_listen_address(settings).startswith("POLIS_AUTH_TOKENS: 0 token(s)")
    assert settings.grants_file is not None and read_grants_file(settings.grants_file).credentials


def test_every_dask_variable_is_a_dask_setting():
    defaults = dask.config.merge(*dask.config.defaults)
    found = {}
    for _, spec in all_pods():
        for container in spec["containers"]:
            for name, entry in env_of(container).items():
                if name.startswith("DASK_"):
                    found[name] = dask.config.collect_env({name: entry["value"]})
    assert set(found) == {"DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES", "DASK_DISTRIBUTED__DASHBOARD__LINK"}
    for name, tree in found.items():
        node, default = tree, defaults
        while isinstance(node, dict):
            [(part, node)] = node.items()
            assert part in default, name
            default = default[part]
    routes = found["DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES"]["distributed"]["scheduler"]["http"]["routes"]
    assert set(defaults["distributed"]["scheduler"]["http"]["routes"]) < set(routes)
    assert "distributed.http.scheduler.api" in routes
    for module in routes:  # each route is a module the scheduler imports
        __import__(module)


def test_secrets_hold_placeholders_and_every_key_reference_resolves():
    docs = manifests()
    keys = one(docs, "Secret", "polis-provider-keys")["stringData"]
    assert keys and set(keys.values()) == {""}
    auth = one(docs, "Secret", "polis-auth")["stringData"]
    assert yaml.safe_load(auth["tokens.json"]) == {"tokens": []}
    granted = {g["api_key_env"] for owner in yaml.safe_load(auth["grants.json"])["credentials"].values() for g in owner.values()}
    assert granted == set(keys)
    secrets = {doc["metadata"]["name"]: set(doc["stringData"]) for doc in docs if doc["kind"] == "Secret"}
    key_env: dict[str, set[str]] = {}
    for where, spec in all_pods():
        for container in spec["containers"]:
            for name, entry in env_of(container).items():
                if ref := entry.get("valueFrom", {}).get("secretKeyRef"):
                    assert ref["key"] in secrets[ref["name"]], (where, name)
                    key_env.setdefault(where, set()).add(name)
        for volume in spec.get("volumes", []):
            if "secret" in volume:
                assert volume["secret"]["secretName"] in secrets, where
    # Whoever calls a provider has every granted key: the operator's and the chart's workers, and the service.
    assert key_env == {where: set(keys) for where in ("polis workers", "chart workers", "polis-service", "helm polis-service")}


def test_one_image_everywhere():
    images = {c["image"] for _, spec in all_pods() for c in spec["containers"]}
    values = yaml.safe_load((HELM / "dask-values.yaml").read_text(encoding="utf-8"))
    images.add(f"{values['scheduler']['image']['repository']}:{values['scheduler']['image']['tag']}")
    assert images == {IMAGE}
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text(encoding="utf-8"))
    assert kustomization["images"] == [{"name": IMAGE.split(":")[0], "newTag": IMAGE.split(":")[1]}]


def test_the_workers_dask_memory_limit_is_under_the_containers():
    [worker] = one(manifests(), "DaskCluster")["spec"]["worker"]["spec"]["containers"]
    args = worker["args"]
    assert args[:2] == ["dask", "worker"] and args[args.index("--nthreads") + 1] == str(THREADS_PER_WORKER)
    assert parse_bytes(args[args.index("--memory-limit") + 1]) < parse_bytes(worker["resources"]["limits"]["memory"])


def test_probes_ask_health_on_declared_ports():
    for where, spec in all_pods():
        if where == "chart workers":  # the chart's own probes are its values (dask-values.yaml), on its ports
            continue
        for container in spec["containers"]:
            ports = {p["name"] for p in container["ports"]}
            probes = [container[k] for k in ("startupProbe", "readinessProbe", "livenessProbe") if k in container]
            assert probes, where
            for probe in probes:
                assert probe["httpGet"]["path"] == "/health" and probe["httpGet"]["port"] in ports, where


@pytest.mark.parametrize("command", ["dask-scheduler", "dask-worker"])
def test_the_chart_commands_run_dask(command: str):
    """The chart starts ``dask-scheduler``/``dask-worker``; the image's deploy/bin shims run ``dask scheduler``/``worker``."""
    assert (["deploy/bin/"], "/usr/local/bin/") in copies()
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run([str(ROOT / "deploy" / "bin" / command), "--help"], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"Usage: dask {command.removeprefix('dask-')} " in done.stdout


def test_every_pod_gives_the_volume_the_images_user_group():
    """The image runs as a user of its own (deploy/Dockerfile); fsGroup lets that user write the data volume."""
    [(uid, name)] = [m.groups() for word, rest in instructions() if word == "RUN" and (m := re.search(r"useradd .*--uid (\d+) (\w+)", rest))]
    assert [rest for word, rest in instructions() if word == "USER"] == [name]
    values = yaml.safe_load((HELM / "dask-values.yaml").read_text(encoding="utf-8"))
    groups = {where: spec.get("securityContext", {}).get("fsGroup") for where, spec in all_pods()}
    groups["chart workers"] = values["worker"]["securityContext"]["fsGroup"]
    assert set(groups.values()) == {int(uid)}, groups


def test_every_dask_process_and_the_service_use_the_one_tls_secret_and_the_scheduler_requires_it():
    docs = manifests()
    cluster = one(docs, "DaskCluster")["spec"]
    [scheduler], [worker] = cluster["scheduler"]["spec"]["containers"], cluster["worker"]["spec"]["containers"]
    assert scheduler["args"][scheduler["args"].index("--protocol") + 1] == "tls"
    env = service_env(docs)
    files = {"--tls-ca-file": env["POLIS_TLS_CA_FILE"], "--tls-cert": env["POLIS_TLS_CERT"], "--tls-key": env["POLIS_TLS_KEY"]}
    for container in (scheduler, worker):
        assert {flag: container["args"][container["args"].index(flag) + 1] for flag in files} == files, container["name"]
    secret = one(docs, "Secret", "polis-dask-tls")
    assert secret["type"] == "kubernetes.io/tls" and secret["stringData"] == {"tls.crt": "", "tls.key": ""}
    for where, spec in pod_specs(docs):  # (the plain Dask chart's variant is not wired for TLS: docs/deploy.md)
        [mount] = [v for v in spec["volumes"] if v.get("secret", {}).get("secretName") == "polis-dask-tls"]
        mounted = {m["mountPath"] for c in spec["containers"] for m in c["volumeMounts"] if m["name"] == mount["name"]}
        assert mounted == {"/etc/dask-tls"} and {Path(f).parent for f in files.values()} == {Path("/etc/dask-tls")}, where
        assert {Path(f).name for f in files.values()} == set(secret["stringData"]), where
