"""A project's labels out of its Label Studio, for a dataset version (the instructor's "export").

Asked of Label Studio as the project's manager (the secret, the creator's name): its export snapshot of
the tasks with annotations, by default only the accepted ones (a reviewer accepts an annotation by
updating it, which marks it ground truth), converted to the format asked and downloaded. What comes back is Label
Studio's, a program that students' input reaches: a bounded size, one file, its name made here.
"""

from __future__ import annotations

import asyncio
import json

import aiohttp

from workspace.datasets import check_slug
from workspace.errors import UserError

FORMATS = ("JSON", "JSON_MIN", "CSV", "COCO", "YOLO", "VOC")
MAX_EXPORT = 1 << 30
TIMEOUT = aiohttp.ClientTimeout(total=600, sock_connect=5)


def parse_request(body: dict) -> tuple[str, str, bool]:
    """An export's request: (the caller's dataset to make a version of, the format, accepted only); the
    user's 400 otherwise."""
    unknown = sorted(set(body) - {"dataset", "format", "accepted_only"})
    if unknown:
        raise UserError(
            400,
            "Unknown field(s) {fields}: an export takes dataset, format and accepted_only.",
            fields=", ".join(unknown),
        )
    accepted_only = body.get("accepted_only", True)
    if not isinstance(accepted_only, bool):
        raise UserError(400, "“accepted_only” is true (the accepted labels, by default) or false (all).")
    return check_slug(body.get("dataset")), parse_format(body.get("format")), accepted_only


def parse_format(value) -> str:
    fmt = (value or "JSON").upper() if isinstance(value, str) or value is None else ""
    if fmt not in FORMATS:
        raise UserError(400, "“format” is one of {formats}.", formats=", ".join(FORMATS))
    return fmt


def file_name(title: str, fmt: str) -> str:
    """The version's one file: the project's title in characters every shell takes, and the format."""
    stem = "".join(c if c.isalnum() or c in "-_." else "-" for c in title).strip("-.") or "labels"
    ext = {"JSON": "json", "JSON_MIN": "json", "CSV": "csv"}.get(fmt, "zip")
    return f"{stem}-{fmt.lower()}.{ext}"


async def fetch(address: str, project, fmt: str, accepted_only: bool) -> bytes:
    """The export of `project`'s labels from its Label Studio at `address`; the user's 409/502 otherwise."""
    headers = {
        "X-Workspace-Proxy-Secret": project.secret,
        "X-Workspace-User": project.creator,
        "X-Workspace-Role": "manager",
    }
    async with aiohttp.ClientSession(base_url=address, headers=headers, timeout=TIMEOUT) as s:
        try:
            pid = await _project_id(s)
            # Label Studio's "usual" (every annotation) is on unless turned off
            filters = {"usual": False, "ground_truth": True} if accepted_only else {}
            body = {
                "title": "workspace export",
                "task_filter_options": {"only_with_annotations": True},
                "annotation_filter_options": filters,
            }
            snapshot = await _json(s.post(f"/api/projects/{pid}/exports/", json=body))
            if snapshot.get("status") != "completed":
                raise UserError(502, "Label Studio could not export the labels; try again in a minute.")
            eid = snapshot["id"]
            # its JSON says how many annotations it holds (the snapshot's counters count tasks only)
            labels = await _download(s, f"/api/projects/{pid}/exports/{eid}/download?exportType=JSON")
            if accepted_only and not _annotations(labels):
                raise UserError(
                    409,
                    "No annotation of this project is accepted yet: a reviewer accepts one by "
                    "opening its task and pressing Update.",
                )
            if fmt == "JSON":
                return labels
            await _json(
                s.post(
                    f"/api/projects/{pid}/exports/{eid}/convert",
                    json={"export_type": fmt, "download_resources": False},
                )
            )
            return await _download(s, f"/api/projects/{pid}/exports/{eid}/download?exportType={fmt}")
        except (aiohttp.ClientError, asyncio.TimeoutError, KeyError, ValueError) as e:
            raise UserError(
                502, "Label Studio did not answer the export ({error}); try again in a minute.", error=type(e).__name__
            ) from e


def _annotations(labels: bytes) -> int:
    """How many annotations Label Studio's JSON export holds."""
    tasks = json.loads(labels)
    if not isinstance(tasks, list):
        raise ValueError("not a list of tasks")
    return sum(len(t.get("annotations") or []) for t in tasks if isinstance(t, dict))


async def _project_id(s: aiohttp.ClientSession) -> int:
    found = await _json(s.get("/api/projects/"))
    results = found.get("results", found) if isinstance(found, dict) else found
    if not results:
        raise UserError(409, "This project's Label Studio has no project yet; try again in a minute.")
    return int(results[0]["id"])


async def _json(request):
    async with request as r:
        if r.status >= 400:
            raise UserError(502, "Label Studio refused the export ({status}).", status=r.status)
        return await r.json(content_type=None)


async def _download(s: aiohttp.ClientSession, path: str) -> bytes:
    """The converted file; Label Studio may still be converting it (it does so as it is asked)."""
    for _ in range(120):
        async with s.get(path) as r:
            if r.status == 404:
                await asyncio.sleep(1)
                continue
            if r.status >= 400:
                raise UserError(502, "Label Studio refused the export ({status}).", status=r.status)
            data = bytearray()
            async for chunk in r.content.iter_chunked(1 << 20):
                data += chunk
                if len(data) > MAX_EXPORT:
                    raise UserError(413, "The export is larger than 1 GiB; export the labels in parts.")
            return bytes(data)
    raise UserError(504, "Label Studio took too long to convert the export; try again in a minute.")
