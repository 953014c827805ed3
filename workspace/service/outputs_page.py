"""The output browser, /services/workspace/workspaces/{name}/executions/{n}/files/{path}: a saved output's
directories page by page (links shown with their target, never followed), each file's download, a
directory's as .tar.gz or .zip, and previews: the first 64 KiB of a text file (escaped), an image
(through the API's inline URL, sent with a CSP sandbox), a notebook's cells with their text outputs
(no HTML or script output is shown). `?user=NAME`: an instructor's (or administrator's) read-only view
of a student's output, as on the workspace page.

The files are read as the API reads them (workspace/outputs/files.py), in the API's own thread pool.
"""

from __future__ import annotations

from urllib.parse import quote

from tornado import web

from workspace import i18n
from workspace.errors import UserError
from workspace.executions import number_of
from workspace.outputs import archives
from workspace.outputs import files as output_files
from workspace.outputs import saved as outputs
from workspace.service.outputs_api import pool_run
from workspace.service.pages import PageHandler, env
from workspace.store import paths


def human(n: int | None) -> str:
    """A size as people read it: 512 B, 3.4 kB, 12.0 MB, 2.10 GB."""
    if n is None:
        return ""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:,.2f} {unit}" if unit == "GB" else f"{n / scale:,.1f} {unit}"
    return f"{n} B"


env.filters["bytes"] = human


def _load(root, rel: bytes, offset: int, limit: int, locale: str = i18n.DEFAULT) -> dict:
    """What the page shows of `rel`: a listing page, or a file's preview, its notes in `locale` (blocking)."""
    with paths.Tree(root) as tree:
        st = output_files.resolve(tree, rel)
        kind = archives.kind_of(st)
        info = output_files.describe(rel, st, tree.readlink(rel) if kind == "link" and rel else None)
        if kind == "dir":
            return {"kind": "dir", "info": info, "listing": output_files.listing(tree, rel, offset, limit)}
        if kind != "file":
            return {"kind": kind, "info": info}
        preview = output_files.preview_kind(rel)
        shown = {"kind": "file", "info": info, "preview": preview}
        if preview == "notebook" and st.st_size <= output_files.NOTEBOOK_BYTES:
            data, _ = output_files.read_head(tree, rel, output_files.NOTEBOOK_BYTES)
            try:
                return dict(shown, cells=output_files.notebook(data))
            except UserError as e:
                shown.update(preview="text", note=e.in_locale(locale))
        elif preview == "notebook":
            note = i18n.translate(locale, "This notebook is too large to show here; download it.")
            shown.update(preview="text", note=note)
        if shown["preview"] == "text":
            data, _ = output_files.read_head(tree, rel, output_files.PREVIEW_BYTES)
            shown["text"] = output_files.text_preview(data, st.st_size)
        return shown


class OutputPage(PageHandler):
    def decode_argument(self, value: bytes, name: str | None = None) -> str:
        if name is None and value is not None:  # a path in an output need not be UTF-8
            return value.decode("utf-8", "surrogateescape")
        return super().decode_argument(value, name)

    @web.authenticated
    async def get(self, name: str, number: str, path: str | None):
        rel = output_files.parse_path(path)
        offset, limit = output_files.page_args(self.get_argument("offset", None), self.get_argument("limit", None))
        me = self.get_current_user()["name"]
        owner = await self.owner()
        n = number_of(number)
        out = await self.blocking(
            outputs.locate,
            self.db,
            self.settings["workspace_store"],
            self.settings.get("node_stores"),
            owner,
            name,
            n,
            self.settings.get("record_store"),
        )
        shown = await pool_run(_load, out.root, rel, offset, limit, self.lang)
        base = f"workspaces/{quote(name, safe='')}/executions/{out.number}/files"
        user_q = f"user={quote(owner, safe='')}" if owner != me else ""
        crumbs, parts = [], rel.split(b"/") if rel else []
        for i, part in enumerate(parts):
            crumbs.append({"name": output_files.shown(part), "quoted": output_files.quoted(b"/".join(parts[: i + 1]))})
        self.render_page(
            "output.html",
            name=name,
            owner=owner,
            readonly=owner != me,
            output=out,
            rel=output_files.shown(rel),
            here=output_files.quoted(rel),
            parent=output_files.quoted(b"/".join(parts[:-1])) if parts else None,
            crumbs=crumbs,
            shown=shown,
            page=f"{self.prefix}{base}",
            api=f"{self.prefix}api/{base}",
            user_q=user_q,
            q=f"?{user_q}" if user_q else "",
            amp=f"&{user_q}" if user_q else "",
            workspace_page=f"{self.prefix}workspaces/{quote(name, safe='')}" + (f"?{user_q}" if user_q else ""),
        )


def handlers(prefix: str) -> list:
    return [(rf"{prefix}workspaces/([^/]+)/executions/(\d+)/files(?:/(.*))?", OutputPage)]
