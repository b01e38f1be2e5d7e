"""Who is calling: bearer tokens mapped to an owner and a role, stored only as SHA-256 hashes.

The token file (``POLIS_AUTH_TOKENS``) is JSON::

    {"tokens": [{"token_sha256": "<hex>", "owner": "lab-a", "role": "user"}]}

With no file configured the service has one caller, :data:`LOCAL_ADMIN`, and binds only to
loopback (``service.server``). ``polis token create`` appends a new token's hash to the file and
prints the token once.

A browser cannot send a bearer header with a page load or an ``EventSource``, so a token may also come
in the :data:`SESSION_COOKIE` that ``/login`` sets (``service.routes.session``): ``HttpOnly``,
``SameSite=Strict``. The header wins when both are present. A request that changes something
(any method but GET/HEAD) and is authenticated by the cookie alone must also come from the service's
own pages: its ``Origin`` (or else ``Referer``) must be this service, else it is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from fastapi import Depends, Request
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.api import atomic_write_text
from service.errors import AuthConfigError, UnauthorizedError

__all__ = [
    "LOCAL_ADMIN",
    "SESSION_COOKIE",
    "Caller",
    "Principal",
    "Role",
    "TokenEntry",
    "TokenStore",
    "authenticate",
    "create_token",
    "hash_token",
    "same_origin",
]

Role = Literal["user", "admin"]

#: An owner name: also a directory-safe label in records and metrics.
OWNER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_BEARER = re.compile(r"^Bearer\s+(\S+)\s*$", re.IGNORECASE)
#: The cookie ``/login`` sets for browsers; it holds the token itself.
SESSION_COOKIE = "polis_session"
_SAFE_METHODS = frozenset({"GET", "HEAD"})


@dataclass(frozen=True)
class Principal:
    """The caller of one request."""

    owner: str  #: whose experiments these are
    role: Role  #: ``admin`` sees every owner's experiments

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

    def may_see(self, owner: str) -> bool:
        """Whether this caller may see (and act on) an experiment of ``owner``."""
        return self.is_admin or owner == self.owner


#: The one caller of a service without a token file (loopback only).
LOCAL_ADMIN = Principal(owner="local", role="admin")


class TokenEntry(BaseModel):
    """One token as the file stores it: its hash, never the token."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    token_sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    owner: str = Field(pattern=OWNER_PATTERN)
    role: Role = "user"


class _TokenFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tokens: list[TokenEntry] = []


def hash_token(token: str) -> str:
    """The hex SHA-256 of a token, as the token file stores it."""
    return hashlib.sha256(token.encode()).hexdigest()


class TokenStore:
    """The tokens of one token file, looked up by hash.

    Args:
        entries: the file's entries.
    """

    def __init__(self, entries: list[TokenEntry]) -> None:
        self._by_hash = {entry.token_sha256: entry for entry in entries}

    @classmethod
    def load(cls, path: Path) -> TokenStore:
        """Read a token file.

        Raises:
            AuthConfigError: the file is missing, not JSON, or not of the documented shape.
        """
        return cls(_read(path).tokens)

    def principal(self, token: str) -> Principal | None:
        """The caller a token stands for, or None for an unknown token."""
        digest = hash_token(token)
        entry = self._by_hash.get(digest)
        # compare_digest: the lookup above is by hash already; this keeps the final check constant-time.
        if entry is None or not hmac.compare_digest(entry.token_sha256, digest):
            return None
        return Principal(owner=entry.owner, role=entry.role)

    def __len__(self) -> int:
        return len(self._by_hash)

    def owners(self) -> frozenset[str]:
        """The owners that have at least one token."""
        return frozenset(entry.owner for entry in self._by_hash.values())


def _read(path: Path) -> _TokenFile:
    try:
        return _TokenFile.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AuthConfigError(f"POLIS_AUTH_TOKENS names {path}, which does not exist") from None
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        raise AuthConfigError(f"the token file {path} is not valid: {where}: {first['msg']}") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise AuthConfigError(f"the token file {path} cannot be read: {error}") from None


def create_token(path: Path, owner: str, role: Role = "user") -> str:
    """Make a new token for ``owner``, append its hash to the token file (created if missing), return it.

    Raises:
        AuthConfigError: the owner name is invalid, or the file exists and is not valid.
    """
    if not re.fullmatch(OWNER_PATTERN, owner):
        raise AuthConfigError(f"owner {owner!r} must match {OWNER_PATTERN}")
    current = _read(path) if path.exists() else _TokenFile()
    token = "polis_" + secrets.token_urlsafe(32)
    current.tokens.append(TokenEntry(token_sha256=hash_token(token), owner=owner, role=role))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, current.model_dump_json(indent=2) + "\n")
    path.chmod(0o600)
    return token


async def authenticate(request: Request) -> Principal:
    """The caller of ``request`` (a FastAPI dependency; ``async`` so FastAPI runs it on the loop, not in its threadpool).

    Raises:
        UnauthorizedError: the service has tokens and the request carries none, or an unknown one, or a
            cookie-authenticated change that does not come from the service's own pages.
    """
    store: TokenStore | None = request.app.state.polis.tokens
    if store is None:
        return LOCAL_ADMIN
    header = request.headers.get("authorization")
    match = _BEARER.match(header or "")
    if match is not None:
        token = match.group(1)
    elif header is None and (cookie := request.cookies.get(SESSION_COOKIE)):
        if request.method not in _SAFE_METHODS and not same_origin(request):
            raise UnauthorizedError("a session cookie authenticates changes only from this service's own pages")
        token = cookie
    else:
        raise UnauthorizedError("this service needs 'Authorization: Bearer <token>' (in a browser: sign in at /login)")
    principal = store.principal(token)
    if principal is None:
        raise UnauthorizedError("unknown token")
    return principal


def same_origin(request: Request) -> bool:
    """Whether the request says it comes from a page of this service (``Origin``, else ``Referer``)."""
    source = request.headers.get("origin") or request.headers.get("referer")
    if not source:
        return False
    parts = urlsplit(source)
    return f"{parts.scheme}://{parts.netloc}" == f"{request.url.scheme}://{request.url.netloc}"


#: Route parameter type that injects the authenticated caller.
Caller = Annotated[Principal, Depends(authenticate)]
