"""Offline schema checks for Kubernetes objects: built-in kinds and the Dask operator's custom resources.

Built-in kinds are checked by ``kubernetes-validate`` (the Kubernetes OpenAPI schemas, packaged) in its
strict mode, where an unknown field is an error. Custom resources are checked against the
``openAPIV3Schema`` of the CRDs that the ``dask-kubernetes`` package ships, made strict the same way:
the API server would prune an unknown field silently, so a misspelt ``volumeMount`` would vanish
unnoticed. The package is installed with ``--no-deps --target .venv/k8s-crds`` (Makefile), off the
venv's import path: only its YAML files are read (installed in the venv, its ``dask kubernetes`` CLI
plugin warns on every ``dask`` command without its dependencies).
"""

from __future__ import annotations

import ast
import functools
import os
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

__all__ = ["CRD_PACKAGE", "KUBERNETES_VERSION", "operator_scheduler_name", "require_crds", "strict", "validate"]

#: The Kubernetes version whose schemas the manifests must meet (an old one still widely run).
KUBERNETES_VERSION = "1.29"
#: Where ``make test`` puts the dask-kubernetes package (its CRDs and constants), beside this venv.
CRD_PACKAGE = Path(sys.prefix) / "k8s-crds" / "dask_kubernetes"
_CRDS = CRD_PACKAGE / "operator" / "deployment" / "helm" / "dask-kubernetes-operator" / "crds"


def require_crds() -> None:
    """Fail when ``CI=true`` and the CRDs are missing; skip loudly elsewhere."""
    if not _CRDS.is_dir():
        message = (f"no Dask operator CRDs in {_CRDS}: `make install` does not put them there, `make test` does "
                   f"({sys.executable} -m pip install --no-deps --target {CRD_PACKAGE.parent} dask-kubernetes==2026.3.0)")
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


def strict(schema: Any) -> Any:
    """``schema`` with ``additionalProperties: false`` on every object that lists its properties."""
    if isinstance(schema, dict):
        out = {key: strict(value) for key, value in schema.items()}
        if "properties" in schema and "additionalProperties" not in schema \
                and not schema.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    return schema


@functools.cache
def _crd_schema(api_version: str, kind: str) -> dict[str, Any]:
    group, _, version = api_version.partition("/")
    for path in sorted(_CRDS.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        if crd["spec"]["group"] == group and crd["spec"]["names"]["kind"] == kind:
            schema = next(v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"] if v["name"] == version)
            # The API server adds the object's own fields to every custom resource's schema.
            schema = {**schema, "properties": {**schema["properties"], "apiVersion": {"type": "string"},
                                               "kind": {"type": "string"}, "metadata": {"type": "object"}}}
            return strict(schema)
    raise LookupError(f"no CRD for {kind} ({api_version}) in {_CRDS}")


def validate(doc: dict[str, Any]) -> None:
    """Check one object against its schema: the Kubernetes one, or its CRD's for ``kubernetes.dask.org``.

    Raises:
        jsonschema.ValidationError: the object does not meet the schema.
    """
    if doc["apiVersion"].startswith("kubernetes.dask.org/"):
        require_crds()
        jsonschema.Draft4Validator(_crd_schema(doc["apiVersion"], doc["kind"])).validate(doc)
    else:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)


def operator_scheduler_name(cluster: str) -> str:
    """The scheduler Service name the operator gives a DaskCluster (its ``SCHEDULER_NAME_TEMPLATE``)."""
    require_crds()
    tree = ast.parse((CRD_PACKAGE / "constants.py").read_text(encoding="utf-8"))
    template = next(node.value.value for node in tree.body if isinstance(node, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "SCHEDULER_NAME_TEMPLATE" for t in node.targets)
                    and isinstance(node.value, ast.Constant))
    return str(template).format(cluster_name=cluster)
