"""HTTP manners on a live server: offline docs, ``/`` redirecting to them, and every error code declared in OpenAPI."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin

import httpx
import pytest

from engine.cluster_options import IN_PROCESS
from service.admission.auth import create_token
from service.openapi import ROUTE_ERRORS, ErrorBody
from service.settings import ServiceSettings
from tests.service.live import serve

_REFERENCE = re.compile(r"""(?:src|href|spec-url)=["']([^"']+)["']|url:\s*'([^']+)'""")


@pytest.fixture(scope="module")
def token_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("tokens") / "tokens.json"


@pytest.fixture(scope="module")
def token(token_file: Path) -> str:
    return create_token(token_file, "lab-a")


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory, token_file: Path, token: str) -> Iterator[httpx.Client]:
    settings = ServiceSettings(data_dir=tmp_path_factory.mktemp("manners"), scheduler=IN_PROCESS, auth_tokens=token_file)
    with serve(settings) as client:  # no token: the docs and the schema need none
        yield client


def test_root_redirects_to_the_docs(http: httpx.Client) -> None:
    response = http.get("/")
    assert response.status_code in {307, 308}
    assert response.headers["location"] == "/docs"


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_page_and_every_asset_it_references_are_served_locally(http: httpx.Client, page: str) -> None:
    response = http.get(page)
    assert response.status_code == 200
    html = response.text
    assert not re.search(r"""(?:src|href|url|spec-url)\s*[=:]\s*["']?(?:https?:)?//""", html), html
    references = {a or b for a, b in _REFERENCE.findall(html)}
    assert "/openapi.json" in references
    assert len(references) >= 3, references  # the script, the favicon (and the CSS for Swagger UI), the schema
    for reference in references:
        asset = http.get(urljoin(page, reference))
        assert asset.status_code == 200, reference
        assert len(asset.content) > 100, reference


def test_swagger_ui_asks_no_online_validator(http: httpx.Client) -> None:
    assert '"validatorUrl": null' in http.get("/docs").text


def test_every_experiment_operation_declares_its_errors_with_example_bodies(http: httpx.Client) -> None:
    schema = http.get("/openapi.json").json()
    assert "ErrorBody" in schema["components"]["schemas"]
    operations = {f"{method.upper()} {path}": op for path, ops in schema["paths"].items() for method, op in ops.items()}
    undeclared = sorted(key for key in operations if key.split(" ")[1].startswith("/experiments") and key not in ROUTE_ERRORS)
    assert not undeclared, f"add these operations to service.openapi.ROUTE_ERRORS: {undeclared}"
    for key, operation in operations.items():
        for code in ROUTE_ERRORS.get(key, ()):
            declared = operation["responses"][str(code)]
            content = declared["content"]["application/json"]
            assert content["schema"] == {"$ref": "#/components/schemas/ErrorBody"}, key
            ErrorBody.model_validate(content["example"])
        assert ("security" in operation) == (401 in ROUTE_ERRORS.get(key, ())), key


def test_the_submit_operation_declares_413_415_and_422_and_no_fastapi_validation_schema(http: httpx.Client) -> None:
    responses = http.get("/openapi.json").json()["paths"]["/experiments"]["post"]["responses"]
    assert {"401", "413", "415", "422"} <= set(responses)
    assert responses["422"]["content"]["application/json"]["example"]["detail"][0]["loc"][0] == "body"


def test_health_metrics_and_docs_need_no_token_and_declare_no_401(http: httpx.Client) -> None:
    paths = http.get("/openapi.json").json()["paths"]
    for path in ("/health", "/metrics"):
        assert http.get(path).status_code == 200, path
        assert "401" not in paths[path]["get"]["responses"]


def test_the_declared_401_is_what_a_request_without_token_gets(http: httpx.Client) -> None:
    listed = http.get("/experiments")
    assert listed.status_code == 401
    assert listed.headers["www-authenticate"] == "Bearer"
    ErrorBody.model_validate(listed.json())


def test_the_declared_404_is_what_another_id_gets(http: httpx.Client, token: str) -> None:
    response = http.get("/experiments/0123456789ab", headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 404
    assert isinstance(ErrorBody.model_validate(response.json()).detail, str)
