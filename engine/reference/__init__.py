"""The reference system's experiment files, environment variables and outputs, for ``polis run --config --steps``.

``convert`` turns ``init_config.json`` + ``steps.yaml`` into an ExperimentSpec (``modules`` and
``agents`` map their parts, ``problems`` carries every refusal with its place); ``environment``
reads the ``AGENTSOCIETY_*`` variables; ``outputs`` writes the files the reference's users read.
"""

from engine.reference.agents import NO_EQUIVALENT, REFERENCE_CONFIG
from engine.reference.convert import load_reference, reference_to_spec
from engine.reference.environment import ReferenceSettings
from engine.reference.modules import REFERENCE_MODULE_TYPES

__all__ = [
    "NO_EQUIVALENT",
    "REFERENCE_CONFIG",
    "REFERENCE_MODULE_TYPES",
    "ReferenceSettings",
    "load_reference",
    "reference_to_spec",
]
