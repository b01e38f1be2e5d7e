"""The submit route's body → a validated spec the owner may run, with every step bounded.

In order, each before anything costlier:

1. the media type: JSON (``application/json``, or no ``Content-Type``) or YAML
   (``application/yaml``, ``application/x-yaml``, ``text/yaml``); else 415;
2. the size: a declared ``Content-Length`` over ``POLIS_MAX_BODY_BYTES`` is refused before a byte
   is read, and a body that grows past it while streaming is refused then (413);
3. decoding: JSON, or YAML with ``safe_load`` semantics and no aliases (an alias bomb expands
   kilobytes into gigabytes); 422 on bad syntax;
4. the persona tables populations name (``population.N.from``), read only from under the
   ``POLIS_INPUT_DIRS`` allow-list: a path in a request body must not read the server's other
   files, so any other name is refused (422 on that field) with one message that says nothing
   about whether it exists; the rows go into the spec, so the counts below see them;
5. the quotas on the raw data (``service.admission.spec_counts``): agents, agent-steps, sweep cells, and
   the owner's disk, before ``ExperimentSpec`` validation expands any population;
6. validation (``engine.spec.parse_spec``; format widths are bounded there, module kwargs are checked
   against each module's constructor), then the input files env modules name, read from under
   ``POLIS_INPUT_DIRS`` as the run would read them;
7. the grants (``service.admission.grants``): every LLM config is free or granted to the owner.

A spec the service makes itself (a fork's: the parent's with a patch) passes steps 5 and 7 through
:meth:`Intake.authorize`. :meth:`Intake.admit` (steps 3-7) is sans-IO apart from reading allowed tables and asking the
owner's disk use (``service.admission.disk_usage.DiskLedger.used``, which measures only runs ended since it last looked); the route
calls :meth:`Intake.read`, which runs it off the event loop, on the intake's own threads (:attr:`Intake.work`): at most
``POLIS_ADMISSION_MAX_CONCURRENT_PER_OWNER`` of one owner's specs are checked at once (more get 429), so no owner's
submits can fill the thread pool every other request shares, and a check stops at its next step once its client has
gone away (or past ``POLIS_ADMISSION_TIMEOUT_S``). Forks and added steps are checked on the same threads.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import yaml
from starlette.requests import Request

from engine.api import (
    MAX_CELLS,
    ExperimentSpec,
    InputRoots,
    check_network,
    check_sweep_values,
    input_roots,
    locate_grid_files,
    locate_network_files,
    parse_spec,
    read_population_files,
    resolve_env_module,
    resolve_input_file,
)
from engine.errors import SpecError
from service.admission.grants import Grants, read_grants_file
from service.admission.limits import Slots
from service.admission.quotas import Quotas, check_counts, check_disk
from service.admission.spec_counts import count_spec
from service.compute import ComputePool, Deadline
from service.errors import SpecTooLargeError, UnsupportedMediaTypeError
from service.settings import ServiceSettings

__all__ = ["JSON_TYPES", "YAML_TYPES", "Intake", "decode_spec", "media_kind", "read_body", "spec_request_body"]

#: How a refusal names the input folders: a caller may not learn the server's paths, only how to name a file there.
INPUT_FOLDERS = "the service's input folders (POLIS_INPUT_DIRS), named relative to one of them"

#: Media types read as JSON (a request without ``Content-Type`` is read as JSON too).
JSON_TYPES = frozenset({"application/json"})
#: Media types read as YAML.
YAML_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml"})

BodyKind = Literal["json", "yaml"]


def media_kind(content_type: str | None) -> BodyKind:
    """How to decode a body with this ``Content-Type``.

    Raises:
        UnsupportedMediaTypeError: neither JSON nor YAML.
    """
    media = (content_type or "application/json").split(";", 1)[0].strip().lower()
    if media in JSON_TYPES:
        return "json"
    if media in YAML_TYPES:
        return "yaml"
    accepted = ", ".join(sorted(JSON_TYPES | YAML_TYPES))
    raise UnsupportedMediaTypeError(f"a spec is sent as one of {accepted}, not {media!r}")


async def read_body(request: Request, limit: int) -> bytes:
    """The request body, refused as soon as it is known to exceed ``limit`` bytes.

    Raises:
        SpecTooLargeError: the declared ``Content-Length`` or the bytes streamed exceed ``limit``.
    """
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise SpecTooLargeError(f"the body declares {int(declared)} bytes; at most {limit} are accepted (POLIS_MAX_BODY_BYTES)")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise SpecTooLargeError(f"the body is over {limit} bytes, the most accepted (POLIS_MAX_BODY_BYTES)")
        chunks.append(chunk)
    return b"".join(chunks)


class _NoAliasLoader(yaml.SafeLoader):
    """``yaml.safe_load``'s loader, refusing aliases (``*name``): each can stand for a whole subtree."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(None, None, "aliases (*name) are not accepted in a spec", mark)
        return super().compose_node(parent, index)


def decode_spec(raw: bytes, kind: BodyKind) -> Any:
    """Decode a spec body.

    Raises:
        SpecError: not UTF-8, bad syntax, a YAML alias, or nesting too deep to decode.
    """
    try:
        text = raw.decode("utf-8")
        if kind == "json":
            return json.loads(text)
        return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass
    except UnicodeDecodeError as error:
        raise SpecError(f"the body is not UTF-8: {error}") from None
    except json.JSONDecodeError as error:
        raise SpecError(f"the body is not valid JSON: {error}") from None
    except yaml.YAMLError as error:
        raise SpecError(f"the body is not valid YAML: {error}") from None
    except RecursionError:
        raise SpecError("the body is nested too deeply") from None
    except ValueError as error:  # an integer of more digits than Python converts (sys.get_int_max_str_digits())
        raise SpecError(f"the body holds a number too long to read: {str(error).split(';')[0]}") from None


class Intake:
    """The rules a submitted spec passes: body size, quotas and grants.

    Args:
        max_body_bytes: the largest body read.
        quotas: each owner's quotas; default: the ``POLIS_QUOTA_*`` defaults for everyone.
        grants: each owner's granted credentials; default: none.
        input_dirs: the directories whose files a population may name (``POLIS_INPUT_DIRS``); default: none.
        work: the threads specs are checked on, with their per-owner and total slots and time limit; default: 2 per
            owner, 4 in all, 120 s.
    """

    def __init__(self, max_body_bytes: int = 1024**2, quotas: Quotas | None = None, grants: Grants | None = None,
                 input_dirs: tuple[Path, ...] = (), work: ComputePool | None = None) -> None:
        self.max_body_bytes = max_body_bytes
        self.input_roots = InputRoots(tuple(input_dirs), named=INPUT_FOLDERS)
        #: the threads specs (submitted, forked, extended) are checked on, bounded per owner and in all
        self.work = work if work is not None else _admission_pool(2, 4, 120.0)
        # The settings' defaults, without reading the environment (only ``polis serve`` does that).
        self.quotas = quotas if quotas is not None else Quotas.from_settings(ServiceSettings.model_construct())
        self.grants = grants if grants is not None else Grants()

    @classmethod
    def from_settings(cls, settings: ServiceSettings) -> Intake:
        """The intake of ``POLIS_MAX_BODY_BYTES``, ``POLIS_QUOTA_*``, the grants file (``POLIS_GRANTS``) and ``POLIS_INPUT_DIRS``.

        Raises:
            AuthConfigError: the grants file cannot be used.
        """
        grants_file = read_grants_file(settings.grants_file) if settings.grants_file is not None else None
        return cls(
            max_body_bytes=settings.max_body_bytes,
            quotas=Quotas.from_settings(settings, grants_file.quotas if grants_file else None),
            grants=Grants(grants_file.credentials if grants_file else None),
            input_dirs=settings.input_dirs,
            work=_admission_pool(settings.admission_max_concurrent_per_owner, settings.admission_max_concurrent,
                                 settings.admission_timeout_s),
        )

    async def read(self, request: Request, owner: str, disk_used: Callable[[str], int]) -> ExperimentSpec:
        """Read, bound, validate and authorize the spec in ``request``'s body.

        Args:
            request: the submit request.
            owner: who submits it.
            disk_used: the bytes an owner's runs take (``DiskLedger.used``), asked once the counts pass.

        Raises:
            UnsupportedMediaTypeError: 415.
            SpecTooLargeError: 413.
            SpecError: the body does not decode, names a table outside ``POLIS_INPUT_DIRS`` or one
                that cannot be read, or the spec is invalid (422).
            QuotaExceededError: over one of the owner's quotas (422).
            CredentialNotGrantedError: a key variable, endpoint or option not granted (422).
            TooManyRequestsError: the owner's (or everyone's) specs being checked fill their slots (429).
            TimeLimitError: the check ran past ``POLIS_ADMISSION_TIMEOUT_S`` (422).
        """
        kind = media_kind(request.headers.get("content-type"))
        raw = await read_body(request, self.max_body_bytes)
        # Off the event loop and off the shared thread pool: validation and the disk ledger must not stall other requests.
        return await self.work.run(owner, lambda deadline: self.admit(raw, kind, owner, disk_used, deadline))

    def admit(self, raw: bytes, kind: BodyKind, owner: str, disk_used: Callable[[str], int] = lambda owner: 0,
              deadline: Deadline | None = None) -> ExperimentSpec:
        """Decode, count, validate and authorize a body already read (see :meth:`read`; with no ``disk_used``, the
        owner has no runs yet; ``deadline`` is checked between the steps and the sweep's values)."""
        checkpoint = deadline.check if deadline is not None else _no_deadline
        data = locate_network_files(read_population_files(decode_spec(raw, kind), self._locate), self._locate)
        quota = self.quotas.for_owner(owner)
        counts = count_spec(data, MAX_CELLS)
        if counts.cells > MAX_CELLS:
            raise SpecError(f"the sweep expands to {counts.cells} cells; at most {MAX_CELLS} are allowed", path="sweep")
        check_counts(counts, quota, owner)
        check_disk(disk_used(owner), quota, owner)
        checkpoint()
        spec = locate_grid_files(parse_spec(data), self._locate)
        checkpoint()
        self._check_files(spec)

        def check_cell(cell: ExperimentSpec) -> None:
            checkpoint()
            self._check_files(cell)

        check_sweep_values(spec, check_cell=check_cell)
        self.grants.check_spec(spec, owner)
        return spec

    def authorize(self, spec: ExperimentSpec, owner: str, disk_used: Callable[[str], int]) -> None:
        """Check a spec the service made (a fork's) as :meth:`admit` checks a submitted one: quotas, then grants.

        Raises:
            QuotaExceededError: over one of the owner's quotas (422).
            CredentialNotGrantedError: a key variable, endpoint or option not granted (422).
        """
        quota = self.quotas.for_owner(owner)
        check_counts(count_spec(spec.model_dump(mode="json"), MAX_CELLS), quota, owner)
        check_disk(disk_used(owner), quota, owner)
        self._check_files(spec)  # a patch may name a module's input file
        self.grants.check_spec(spec, owner)

    def _check_files(self, spec: ExperimentSpec) -> None:
        """The files a spec (or a sweep's cell) names, read now as the run would read them: its edge files against its
        agents, and the input files env modules name (``MobilitySpace.city_file``)."""
        check_network(spec.network, spec.agent_ids())
        with input_roots(self.input_roots):
            for index, module in enumerate(spec.environment.modules):
                try:
                    resolve_env_module(module.type).check_inputs(module.kwargs)
                except SpecError as error:
                    error.path = f"environment.modules.{index}.kwargs.{error.path}".rstrip(".")
                    raise

    def shown(self, data: Any) -> Any:
        """``data`` (a stored spec) as a caller sees it: a file located under an input folder named relative to it, as
        it was submitted (and would be again), never by the server's path."""
        if isinstance(data, dict):
            return {key: self.shown(value) for key, value in data.items()}
        if isinstance(data, list):
            return [self.shown(value) for value in data]
        if isinstance(data, str) and data.startswith("/"):
            for root in self.input_roots.dirs:
                real = str(root.resolve())
                if data.startswith(real + "/"):
                    return data.removeprefix(real + "/")
        return data

    def _locate(self, field: str, name: str) -> Path:
        try:
            return resolve_input_file(field, name, roots=self.input_roots)
        except SpecError as error:  # its message leads with the field already; the path makes it the 422's loc
            error.path = field
            raise


def _no_deadline() -> None:
    """No time limit: :meth:`Intake.admit` called directly (the CLI's tests, a script)."""


def _admission_pool(per_owner: int, total: int, timeout_s: float) -> ComputePool:
    return ComputePool(Slots("spec checks", (per_owner, "POLIS_ADMISSION_MAX_CONCURRENT_PER_OWNER"),
                             (total, "POLIS_ADMISSION_MAX_CONCURRENT")), "the spec's check",
                       (timeout_s, "POLIS_ADMISSION_TIMEOUT_S"))


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            return _inline(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
        # A discriminator's mapping names $defs; once inlined, the oneOf alone describes the choice.
        return {key: _inline(value, defs) for key, value in node.items() if key != "discriminator"}
    if isinstance(node, list):
        return [_inline(item, defs) for item in node]
    return node


def spec_request_body() -> dict[str, Any]:
    """The submit route's OpenAPI ``requestBody``: ``ExperimentSpec``'s schema as JSON and as YAML.

    The schema is inlined (no ``$defs``), so it stands alone inside the OpenAPI document.
    """
    schema = ExperimentSpec.model_json_schema()
    inlined = _inline({key: value for key, value in schema.items() if key != "$defs"}, schema.get("$defs", {}))
    content = {media: {"schema": inlined} for media in ("application/json", "application/yaml")}
    return {"required": True, "content": content}
