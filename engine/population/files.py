"""Reading the tables a spec's populations name (``population.N.from``) into their ``rows``, before validation.

A spec names a table by path; where that path may point is the caller's rule, a :data:`Locate`:

- the CLI (``load_spec``) resolves it against the spec file's folder (an absolute path as is):
  whoever runs ``polis run`` owns the machine;
- the service resolves it only under the ``POLIS_INPUT_DIRS`` allow-list (``service.admission.intake``):
  a path in a request body must not read the server's other files.

The rows are written into the spec data, so the validated spec carries its table: a stored spec,
a resumed run, a sweep's cells and a forked run need no file. A population that already has
``rows`` (a stored spec) is left as it is. A survey population (one with a ``codebook``) is read by
:mod:`engine.population.survey_files`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from engine.errors import PopulationFileError
from engine.population.table import read_table

__all__ = ["Locate", "read_population_files", "spec_folder"]

#: ``(field, name) -> path``: where the file a spec field names is read from; raises
#: ``SpecError`` (with ``field`` as its path) for a name the caller does not allow.
Locate = Callable[[str, str], Path]


def spec_folder(folder: Path) -> Locate:
    """Resolve a relative name against ``folder`` (a spec file's folder); an absolute one as is."""

    def locate(field: str, name: str) -> Path:
        path = Path(name)
        return path if path.is_absolute() else folder / path

    return locate


def read_population_files(data: Any, locate: Locate) -> Any:
    """``data`` (a decoded spec) with the rows of each population's table filled in.

    Args:
        data: the decoded spec; anything that is not a spec with a population list is returned
            unchanged, for validation to refuse.
        locate: where a named file is read from.

    Returns:
        A shallow copy of ``data`` whose populations with ``from`` and no ``rows`` gain ``rows``;
        ``data`` itself is not changed.

    Raises:
        PopulationFileError: a ``from`` or ``columns`` that is malformed, or a table that cannot be
            read (see :func:`engine.population.table.read_table`), with the field's path.
        SpecError: ``locate`` refused the name.
    """
    if not isinstance(data, Mapping) or not isinstance(data.get("population"), list):
        return data
    populations = []
    for index, entry in enumerate(data["population"]):
        if isinstance(entry, Mapping) and entry.get("codebook") is not None:
            from engine.population.survey_files import read_survey

            populations.append(read_survey(entry, index, locate))
            continue
        if isinstance(entry, Mapping) and "from" in entry and "rows" not in entry:
            field, name, columns = f"population.{index}.from", entry["from"], entry.get("columns")
            if not isinstance(name, str) or not name:
                raise PopulationFileError("must name a .parquet, .csv or .jsonl file", field)
            if columns is not None and not (isinstance(columns, list) and columns and all(isinstance(c, str) for c in columns)):
                raise PopulationFileError("must be a non-empty list of column names", f"population.{index}.columns")
            entry = {**entry, "rows": read_table(locate(field, name), field=field, label=name, columns=columns)}
        populations.append(entry)
    return {**data, "population": populations}
