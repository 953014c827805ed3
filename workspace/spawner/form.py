"""The hub's spawn form: what to continue from (and which image, where several are allowed).

JupyterHub shows it when a workspace is started from the hub's pages; the API
takes the same choices as `user_options`:

    {"continue_from": "latest" | "fresh" | <execution number>, "image": "<allowed image>",
     "datasets": ["owner/name", "owner/name:2", ...], "resource_type": "<name>", "cleanup": true}

The service's pages show the same fields (`page_form`) and send the same choices (`options_from_page`).
"""

from __future__ import annotations

from html import escape

from sqlalchemy import select

from workspace import i18n
from workspace.caller import Caller
from workspace.datasets import Dataset
from workspace.db import Database
from workspace.executions import Execution, find_workspace
from workspace.limits import fit
from workspace.store.nodes import inventories


def execution_choices(db: Database, owner: str, name: str) -> list[dict]:
    """The workspace's executions, newest first, as the form lists them (blocking)."""
    with db.session() as s:
        ws = find_workspace(s, owner, name)
        if ws is None:
            return []
        return [
            {
                "number": e.number,
                "state": e.state,
                "has_output": e.has_output,
                "stop_reason": e.stop_reason,
                "stopped": e.stopped.strftime("%Y-%m-%d %H:%M") if e.stopped else None,
                # the dataset references bound, without version: the next start takes the latest
                "datasets": [d["ref"].rsplit(":", 1)[0] for d in e.datasets or []],
                "resource_type": e.resource_type,
                "image": e.image,  # the engine's image it ran (spawnform.image_of names the choice)
            }
            for e in sorted(ws.executions, key=lambda e: e.number, reverse=True)
        ]


def image_of(execution: dict | None, refs: dict[str, str], fallback: str) -> str:
    """The choice (a name of `refs`, {name: engine image}: what the user may start now) that runs the image
    `execution` ran, for the form to preselect; `fallback` when it ran none of them. The same repository
    counts (a site image rebuilt since has a new tag); a user's image is in `refs` only while the user may
    start it (approved, #28). A preselection is all it is: the image starts only if the form is posted."""
    ran = (execution or {}).get("image")
    if not ran:
        return fallback
    for name, ref in refs.items():
        if ran in (name, ref):
            return name
    repository = ran.rsplit(":", 1)[0]
    same = [name for name, ref in refs.items() if ref.rsplit(":", 1)[0] == repository]
    return same[0] if len(same) == 1 else fallback


def readable_datasets(db: Database, caller: Caller) -> list[str]:
    """References of the datasets `caller` may bind, for the form's suggestions (blocking)."""
    with db.session() as s:
        return [
            ds.ref
            for ds in s.scalars(select(Dataset).order_by(Dataset.owner, Dataset.name))
            if ds.live_versions() and ds.readable_by(caller)
        ]


def continued(db: Database, owner: str, name: str, choice: str) -> tuple[list[str], str | None]:
    """The dataset references (without version: each one's latest) and resource type of the execution a
    start continues from: `choice` is its number, `latest` (the newest) or `fresh` (none) (blocking)."""
    if choice == "fresh":
        return [], None
    executions = execution_choices(db, owner, name)
    if choice.isdigit():
        ex = next((e for e in executions if e["number"] == int(choice)), None)
    else:
        ex = executions[0] if executions else None
    return (ex["datasets"], ex["resource_type"]) if ex else ([], None)


def page_form(
    db: Database,
    caller: Caller,
    name: str | None,
    selected="latest",
    *,
    types,
    nodes: list,
    images: list[str],
    image: str,
    default_type: str | None,
    image_labels: dict[str, str] | None = None,
    image_refs: dict[str, str] | None = None,
    locale: str = "en",
) -> str:
    """The start form's fields, on the service's pages and the hub's spawn page alike (blocking): for
    `caller`'s workspace `name` (None or one never started: a new one, without "Continue from"), prefilled
    from its execution `selected` (else its newest): that execution's datasets, resource type (the default
    for one in cleanup mode, or one with none) and image (`image_of`, among `image_refs`; else `image`);
    its sentences in `locale`."""
    executions = execution_choices(db, caller.name, name) if name else []
    chosen = next((e for e in executions if str(e["number"]) == str(selected)), None) or (
        executions[0] if executions else None
    )
    current_type = (chosen or {}).get("resource_type")
    if current_type in (None, "cleanup"):
        current_type = default_type
    if image_refs:
        image = image_of(chosen, {n: r for n, r in image_refs.items() if n in images}, image)
    return render(
        executions,
        images,
        image,
        selected=selected,
        datasets=readable_datasets(db, caller),
        bound=(chosen or {}).get("datasets", []),
        types=type_choices(db, types, caller.groups, nodes, locale=locale) if types else [],
        current_type=current_type,
        continue_choice=bool(executions),
        image_labels=image_labels,
        locale=locale,
    )


def options_from_page(continue_from: str, datasets: str, fallback_type: str | None, fields: dict[str, str]) -> dict:
    """The service pages' start (their form's fields) -> user_options: the datasets' text split into
    references; `fallback_type` (the type of the execution continued from) unless the form chose one, and
    never the cleanup mode's; the cleanup mode when ticked."""
    options = {"continue_from": continue_from or "latest"}
    refs = [r.strip() for r in datasets.replace("\n", ",").split(",") if r.strip()]
    if refs:
        options["datasets"] = refs
    if fallback_type and fallback_type != "cleanup":
        options["resource_type"] = fallback_type
    options.update({k: fields[k] for k in ("resource_type", "image") if fields.get(k)})
    if fields.get("cleanup") in ("on", "true"):
        options["cleanup"] = True
    return options


def render(
    executions: list[dict],
    images: list[str],
    current_image: str,
    selected="latest",
    datasets: list[str] = (),
    bound: list[str] = (),
    types: list[dict] = (),
    current_type: str | None = None,
    continue_choice: bool = True,
    image_labels: dict[str, str] | None = None,
    locale: str = "en",
) -> str:
    """The form's fields (Bootstrap 5, the hub's own look); the pages of the service use them too. Its
    sentences are in `locale` (the catalogue's translations are trusted HTML text; what they are filled with
    is escaped).

    `continue_choice` False leaves out "Continue from" (a workspace that does not exist yet)."""
    html = _continue_field(executions, selected, locale) if continue_choice else []
    html += _datasets_field(datasets, bound, locale)
    if types:
        html += _type_field(types, current_type, locale)
    if len(images) > 1:
        html += _image_field(images, current_image, image_labels, locale)
    html += _cleanup_field(locale)
    return "\n".join(html)


def _option(value, label, chosen=False) -> str:
    sel = " selected" if chosen else ""
    return f'<option value="{escape(str(value))}"{sel}>{escape(label)}</option>'


def _continue_field(executions: list[dict], selected, locale: str) -> list[str]:
    """ "Continue from": the latest output, each execution, or nothing."""
    choices = [
        _option("latest", i18n.translate(locale, "The latest execution with saved output"), selected == "latest")
    ]
    for e in executions:
        label = _execution_label(e, locale)
        if e["stop_reason"]:
            label += f" ({e['stop_reason']})"
        choices.append(_option(e["number"], label, str(selected) == str(e["number"])))
    choices.append(_option("fresh", i18n.translate(locale, "Nothing: start with an empty home"), selected == "fresh"))
    return [
        '<div class="form-group mb-3">',
        '<label for="continue_from" class="form-label">' + i18n.translate(locale, "Continue from") + "</label>",
        '<select class="form-select form-control" id="continue_from" name="continue_from">',
        *choices,
        "</select>",
        '<small class="form-text text-muted">'
        + i18n.translate(
            locale,
            "Your home (/openbayes/home) is restored from the chosen execution's output; what you change is "
            "saved as this execution's output when it stops.",
        )
        + "</small>",
        "</div>",
    ]


def _datasets_field(datasets: list[str], bound: list[str], locale: str) -> list[str]:
    """The datasets to mount: the ones `bound` filled in, the readable `datasets` suggested."""
    value = escape(", ".join(bound))
    placeholder = escape(i18n.translate(locale, "owner/name or owner/name:version, separated by commas"))
    return [
        '<div class="form-group mb-3">',
        '<label for="datasets" class="form-label">'
        + i18n.translate(locale, "Datasets (up to 5, mounted read-only at /input0 … /input4)")
        + "</label>",
        f'<input class="form-control" id="datasets" name="datasets" list="dataset-choices" value="{value}" '
        f'placeholder="{placeholder}">',
        '<datalist id="dataset-choices">',
        *(f'<option value="{escape(ref)}">' for ref in datasets),
        "</datalist>",
        "</div>",
    ]


def _type_field(types: list[dict], current_type: str | None, locale: str) -> list[str]:
    """The resource types (`type_choices`), each with what is free now."""
    return [
        '<div class="form-group mb-3">',
        '<label for="resource_type" class="form-label">' + i18n.translate(locale, "Resource type") + "</label>",
        '<select class="form-select form-control" id="resource_type" name="resource_type">',
        *(_option(t["name"], f"{t['name']} — {t['summary']} ({t['free']})", t["name"] == current_type) for t in types),
        "</select>",
        "</div>",
    ]


def _image_field(images: list[str], current_image: str, image_labels: dict[str, str] | None, locale: str) -> list[str]:
    """The images, each with its label (size, versions) where known."""
    return [
        '<div class="form-group mb-3">',
        '<label for="image" class="form-label">' + i18n.translate(locale, "Image") + "</label>",
        '<select class="form-select form-control" id="image" name="image">',
        *(_option(i, (image_labels or {}).get(i, i), i == current_image) for i in images),
        "</select>",
        "</div>",
    ]


def _cleanup_field(locale: str) -> list[str]:
    """The cleanup mode's tick box."""
    return [
        '<div class="form-check mb-3">',
        '<input class="form-check-input" type="checkbox" id="cleanup" name="cleanup" value="on">',
        '<label class="form-check-label" for="cleanup">'
        + i18n.translate(
            locale,
            "Cleanup mode: a small workspace for 30 minutes whose home can only shrink, to delete files. It starts "
            "even when your storage is over its quota.",
        )
        + "</label>",
        "</div>",
    ]


def _execution_label(e: dict, locale: str) -> str:
    """How the choice "Continue from" names an execution: its number, whether it saved an output (else its
    state), when it stopped."""
    number, state, stopped = e["number"], e["state"], e["stopped"]
    if e["has_output"] and stopped:
        return i18n.translate(locale, "#{number} — saved output, stopped {stopped} UTC", number=number, stopped=stopped)
    if e["has_output"]:
        return i18n.translate(locale, "#{number} — saved output", number=number)
    if stopped:
        return i18n.translate(
            locale,
            "#{number} — no saved output ({state}); its nearest earlier output is used, stopped {stopped} UTC",
            number=number,
            state=state,
            stopped=stopped,
        )
    return i18n.translate(
        locale, "#{number} — no saved output ({state}); its nearest earlier output is used", number=number, state=state
    )


def options_from_form(formdata: dict) -> dict:
    """Form fields (lists of strings) -> user_options; validation happens at spawn."""
    options = {}
    for key in ("continue_from", "image", "datasets", "resource_type"):
        values = formdata.get(key) or []
        if values and values[0] != "":
            options[key] = values[0]
    if (formdata.get("cleanup") or [""])[0] in ("on", "true", "1"):
        options["cleanup"] = True
    return options


def type_choices(db: Database, types, groups, nodes: list, *, locale: str = "en") -> list[dict]:
    """The resource types the user may choose, with what is free now on the `nodes` (workspace/store/nodes.py) that
    take each (blocking), said in `locale`. A GPU start runs on one node: the most free on one node is said
    when it matters."""
    out = []
    with db.session() as s:
        used = fit.used_gpus(s)
        for t in types:
            places = inventories(nodes, t.gpu_model if t.gpus else None, root=t.root)
            free_per_node = [len([g for g in ids if g not in used.get(node, ())]) for node, ids in places.items()]
            free = sum(free_per_node)
            if not t.allowed(groups):
                continue
            active = (
                s.query(Execution).filter(Execution.resource_type == t.name, Execution.state.in_(fit.HOLDING)).count()
            )
            queued = s.query(Execution).filter(Execution.resource_type == t.name, Execution.state == "queued").count()
            parts = []
            if t.capacity is not None:
                parts.append(
                    i18n.translate(
                        locale, "{free} of {capacity} free", free=max(0, t.capacity - active), capacity=t.capacity
                    )
                )
            if t.gpus:
                parts.append(i18n.translate(locale, "{free} GPU(s) free", free=free))
                most = max(free_per_node, default=0)
                if most < t.gpus <= free:  # enough in all, not on one node: a start is never split
                    parts.append(i18n.translate(locale, "at most {most} on one node", most=most))
            if queued:
                parts.append(i18n.translate(locale, "{queued} waiting", queued=queued))
            if t.root and not places:
                parts.append(i18n.translate(locale, "no node of this server runs it"))
            out.append(
                {
                    "name": t.name,
                    "description": t.description,
                    "summary": t.summary(locale),
                    "free": ", ".join(parts) or i18n.translate(locale, "available"),
                    "cpu": t.cpu,
                    "memory": t.memory,
                    "gpus": t.gpus,
                    "gpu_model": t.gpu_model,
                    "home_size": t.home_size,
                    "max_runtime": t.max_runtime,
                    "capacity": t.capacity,
                    "active": active,
                    "queued": queued,
                    "gpus_free": free if t.gpus else None,
                    "gpus_free_on_one_node": max(free_per_node, default=0) if t.gpus else None,
                    "root": t.root,
                }
            )
    return out
