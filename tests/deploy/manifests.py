"""The objects under deploy/k8s and deploy/helm, and the pods they make, for the deploy tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

__all__ = ["HELM", "IMAGE", "K8S", "ROOT", "all_pods", "env_of", "helm_pod_specs", "load", "manifests", "one", "pod_specs",
           "service_env"]

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
HELM = ROOT / "deploy" / "helm"
#: The image every container runs: deploy/Dockerfile's, as the kustomization tags it.
IMAGE = "polis:latest"


def load(path: Path) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc is not None]


def manifests() -> list[dict[str, Any]]:
    """Every object of every YAML file under deploy/k8s but the kustomization."""
    return [doc for path in sorted(K8S.glob("*.yaml")) if path.name != "kustomization.yaml" for doc in load(path)]


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    [doc] = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    return doc


def pod_specs(docs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, pod spec) of every pod the objects make: Deployments and the DaskCluster's scheduler and workers."""
    for doc in docs:
        if doc["kind"] == "Deployment":
            yield doc["metadata"]["name"], doc["spec"]["template"]["spec"]
        elif doc["kind"] == "DaskCluster":
            yield f"{doc['metadata']['name']} scheduler", doc["spec"]["scheduler"]["spec"]
            yield f"{doc['metadata']['name']} workers", doc["spec"]["worker"]["spec"]


def helm_pod_specs() -> Iterator[tuple[str, dict[str, Any]]]:
    """The pod specs the dask/dask chart makes from dask-values.yaml (its templates' use of the values), and the service's."""
    values = yaml.safe_load((HELM / "dask-values.yaml").read_text(encoding="utf-8"))
    worker = values["worker"]
    yield "chart workers", {"containers": [{"name": "worker", "env": worker["env"], "volumeMounts": worker["mounts"]["volumeMounts"],
                                            "image": f"{worker['image']['repository']}:{worker['image']['tag']}"}],
                            "volumes": worker["mounts"]["volumes"]}
    for where, spec in pod_specs(load(HELM / "polis-service.yaml")):
        yield f"helm {where}", spec


def all_pods() -> list[tuple[str, dict[str, Any]]]:
    """Every pod spec of both variants, named by where it comes from."""
    return [*pod_specs(manifests()), *helm_pod_specs()]


def env_of(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {entry["name"]: entry for entry in container.get("env", [])}


def service_env(docs: list[dict[str, Any]]) -> dict[str, str]:
    [container] = one(docs, "Deployment", "polis-service")["spec"]["template"]["spec"]["containers"]
    return {name: entry["value"] for name, entry in env_of(container).items() if "value" in entry}
