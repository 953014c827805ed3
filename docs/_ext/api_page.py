"""The REST API's reference page (the site's reference/rest-api), rendered from workspace/service/openapi.yaml.

    python docs/_ext/api_page.py            # the Markdown, as the site shows it

The documentation build calls `markdown()` as it reads the page (generated_pages.py), so the
page is the description the service serves at /services/workspace/api/openapi.yaml, never a copy that
can drift from it. Each operation is a section (its method and path the title), with its parameters,
request body and responses; each schema a section that the operations link to.
"""

from __future__ import annotations

import re
from pathlib import Path

import yaml

SPEC = Path(__file__).resolve().parents[2] / "workspace" / "service" / "openapi.yaml"
METHODS = ("get", "post", "put", "patch", "delete")


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def _anchor(name: str) -> str:
    return "schema-" + re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _cell(text) -> str:
    """Text that stays in one cell of a Markdown table."""
    return " ".join(str(text or "").split()).replace("|", "\\|")


def _type(schema: dict | None) -> str:
    """A schema in a few words: a link to a named schema, or its type."""
    if not schema:
        return ""
    if "$ref" in schema:
        name = _ref_name(schema["$ref"])
        return f"[{name}](#{_anchor(name)})"
    kind = schema.get("type", "object")
    if kind == "array":
        return f"array of {_type(schema.get('items'))}"
    if "enum" in schema:
        return f"{kind}: " + ", ".join(f"`{v}`" for v in schema["enum"])
    return kind + (", or null" if schema.get("nullable") else "")


def _parameter(spec: dict, p: dict) -> dict:
    return spec["components"]["parameters"][_ref_name(p["$ref"])] if "$ref" in p else p


def _properties_table(schema: dict) -> list[str]:
    props = schema.get("properties") or {}
    if not props:
        return []
    required = set(schema.get("required") or ())
    lines = ["| field | type | |", "| --- | --- | --- |"]
    for name, prop in props.items():
        note = ("required. " if name in required else "") + (prop.get("description") or "")
        lines.append(f"| `{name}` | {_cell(_type(prop))} | {_cell(note)} |")
    return lines + [""]


def _operation(spec: dict, path: str, method: str, op: dict, shared: list) -> list[str]:
    lines = [f"### `{method.upper()} {path}`", ""]
    for text in (op.get("summary"), op.get("description")):
        if text:
            lines += [text.strip(), ""]
    params = [_parameter(spec, p) for p in shared + (op.get("parameters") or [])]
    if params:
        lines += ["| parameter | in | type | |", "| --- | --- | --- | --- |"]
        for p in params:
            note = ("required. " if p.get("required") else "") + (p.get("description") or "")
            lines.append(f"| `{p['name']}` | {p['in']} | {_cell(_type(p.get('schema')))} | {_cell(note)} |")
        lines.append("")
    body = (op.get("requestBody") or {}).get("content") or {}
    for kind, content in body.items():
        schema = content.get("schema") or {}
        lines += [f"Request body ({kind}): {_type(schema)}", ""]
        if "$ref" not in schema:
            lines += _properties_table(schema)
    responses = op.get("responses") or {}
    if responses:
        lines += ["| response | |", "| --- | --- |"]
        for code, r in responses.items():
            r = spec["components"]["responses"][_ref_name(r["$ref"])] if "$ref" in r else r
            schemas = [_type(c.get("schema")) for c in (r.get("content") or {}).values() if c.get("schema")]
            text = (r.get("description") or "") + (f" ({', '.join(schemas)})" if schemas else "")
            lines.append(f"| {code} | {_cell(text)} |")
        lines.append("")
    return lines


def markdown(spec_path: Path = SPEC) -> str:
    spec = yaml.safe_load(spec_path.read_text())
    info = spec["info"]
    lines = [
        "# REST API",
        "",
        f"{info['title']}, version {info['version']}: every operation of `workspace/service/openapi.yaml`, "
        "which the service also serves at `/services/workspace/api/openapi.yaml`.",
        "",
        info.get("description", "").strip(),
        "",
        "## Operations",
        "",
    ]
    for path, item in spec["paths"].items():
        shared = item.get("parameters") or []
        for method in METHODS:
            if method in item:
                lines += _operation(spec, path, method, item[method], shared)
    lines += ["## Schemas", ""]
    for name, schema in spec["components"]["schemas"].items():
        lines += [f"({_anchor(name)})=", f"### {name}", ""]
        if schema.get("description"):
            lines += [schema["description"].strip(), ""]
        table = _properties_table(schema)
        lines += table or [f"{_type(schema)}", ""]
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
