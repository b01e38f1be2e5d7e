"""A stand-in for ``kustomize build`` limited to the fields deploy/k8s/kustomization.yaml uses.

It applies, as kustomize v5 does: ``resources`` (files, each one or more YAML documents, in order),
``namespace`` (set on every namespaced object; a ``Namespace`` object is renamed to it), ``labels``
(``pairs`` added to every object's ``metadata.labels``; selectors and templates untouched) and ``images``
(``newName``/``newTag``/``digest`` on every ``containers``/``initContainers`` entry at any depth, custom
resources included). Any other field raises, so the stand-in never quietly renders less than kustomize
would. tests/deploy/test_k8s.py checks it against ``kubectl kustomize`` where kubectl is installed.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

__all__ = ["KNOWN_FIELDS", "render"]

#: The kustomization fields this renderer applies (``apiVersion``/``kind`` only identify the file).
KNOWN_FIELDS = frozenset({"apiVersion", "kind", "namespace", "labels", "resources", "images"})
#: Kinds with no namespace among those deploy/k8s could hold.
_CLUSTER_SCOPED = frozenset({"Namespace", "PersistentVolume", "StorageClass", "ClusterRole", "ClusterRoleBinding",
                             "CustomResourceDefinition"})


def render(directory: Path) -> list[dict[str, Any]]:
    """Every object ``directory/kustomization.yaml`` produces, in resource order.

    Raises:
        ValueError: the kustomization uses a field (or a ``labels`` option) this renderer does not apply.
    """
    kustomization = yaml.safe_load((directory / "kustomization.yaml").read_text(encoding="utf-8"))
    if unknown := set(kustomization) - KNOWN_FIELDS:
        raise ValueError(f"kustomization fields this renderer does not apply: {sorted(unknown)}")
    objects = [doc for name in kustomization.get("resources", [])
               for doc in yaml.safe_load_all((directory / name).read_text(encoding="utf-8")) if doc is not None]
    objects = [copy.deepcopy(doc) for doc in objects]
    namespace = kustomization.get("namespace")
    for doc in objects:
        metadata = doc.setdefault("metadata", {})
        if namespace is not None:
            if doc["kind"] == "Namespace":
                metadata["name"] = namespace
            elif doc["kind"] not in _CLUSTER_SCOPED:
                metadata["namespace"] = namespace
        for entry in kustomization.get("labels", []):
            if set(entry) - {"pairs"}:
                raise ValueError(f"labels options this renderer does not apply: {sorted(set(entry) - {'pairs'})}")
            metadata.setdefault("labels", {}).update(entry["pairs"])
        for image in kustomization.get("images", []):
            _set_image(doc, image)
    return objects


def _set_image(node: Any, image: dict[str, str]) -> None:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("containers", "initContainers") and isinstance(value, list):
                for container in value:
                    container["image"] = _new_image(container["image"], image)
            else:
                _set_image(value, image)
    elif isinstance(node, list):
        for item in node:
            _set_image(item, image)


def _new_image(current: str, image: dict[str, str]) -> str:
    reference = current.split("@", 1)[0]
    # A colon after the last slash starts the tag (one before it is a registry's port).
    colon = reference.rfind(":")
    name, tag = (reference[:colon], reference[colon + 1:]) if colon > reference.rfind("/") else (reference, "")
    if name != image["name"]:
        return current
    new = image.get("newName", name)
    if "digest" in image:
        return f"{new}@{image['digest']}"
    new_tag = image.get("newTag", tag)
    return f"{new}:{new_tag}" if new_tag else new
