"""Daytona's vendored OpenAPI documents, and the two strict copies the contract test serves (see daytona/SOURCE.md).

The copies are derived at run time, never edited by hand: every object schema a request body reaches refuses
unknown properties, and the toolbox's paths sit behind the sandbox id its proxy puts first.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent / "daytona"
API, TOOLBOX = HERE / "api.yaml", HERE / "toolbox.yaml"


def load(path: Path) -> dict:
    # The documents hold timestamps as bare YAML dates; BaseLoader would keep every scalar text, so the safe loader
    # reads them and the JSON written below turns dates back into text.
    return yaml.safe_load(path.read_text())


def _schema_refs(node, found: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            found.add(ref.rsplit("/", 1)[-1])
        for value in node.values():
            _schema_refs(value, found)
    elif isinstance(node, list):
        for value in node:
            _schema_refs(value, found)


def request_schemas(document: dict) -> set[str]:
    """The component schemas any request body reaches, directly or through other schemas."""
    schemas = document.get("components", {}).get("schemas", {})
    found: set[str] = set()
    for item in document.get("paths", {}).values():
        for operation in item.values():
            if isinstance(operation, dict) and "requestBody" in operation:
                _schema_refs(operation["requestBody"], found)
    pending = list(found)
    while pending:
        reached: set[str] = set()
        _schema_refs(schemas.get(pending.pop(), {}), reached)
        pending.extend(reached - found)
        found |= reached
    return found


def _close(schema) -> None:
    """additionalProperties: false on this object schema and the inline object schemas inside it."""
    if not isinstance(schema, dict):
        return
    if schema.get("type") == "object" and "properties" in schema and "additionalProperties" not in schema:
        schema["additionalProperties"] = False
    for value in (schema.get("properties") or {}).values():
        _close(value)
    _close(schema.get("items"))


def strict(document: dict, *, prefix: str | None = None) -> dict:
    """A copy that refuses unknown request properties; with `prefix`, every path behind it (a path parameter)."""
    document = copy.deepcopy(document)
    schemas = document.get("components", {}).get("schemas", {})
    for name in request_schemas(document):
        _close(schemas.get(name))
    for item in document.get("paths", {}).values():
        for operation in item.values():
            if isinstance(operation, dict):
                for media in ((operation.get("requestBody") or {}).get("content") or {}).values():
                    _close(media.get("schema"))
    if prefix:
        parameter = {"name": prefix, "in": "path", "required": True, "schema": {"type": "string"}}
        paths = {}
        for path, item in document["paths"].items():
            for operation in item.values():
                if isinstance(operation, dict):
                    operation["parameters"] = [parameter, *operation.get("parameters", [])]
            paths[f"/{{{prefix}}}{path}"] = item
        document["paths"] = paths
    return document


def write_strict_copies(directory: Path) -> tuple[Path, Path]:
    """The two documents Prism serves: the control plane, and the toolbox behind its proxy's sandbox id."""
    api, toolbox = directory / "api.strict.json", directory / "toolbox.strict.json"
    api.write_text(json.dumps(strict(load(API)), default=str))
    toolbox.write_text(json.dumps(strict(load(TOOLBOX), prefix="sandboxId"), default=str))
    return api, toolbox
