"""A labelling project's label set, as Label Studio's labelling configuration (its XML).

An instructor names the labels ("cat, dog"); the project then offers boxes and polygons of those labels
over each image, what ModelArts' image labelling offers and what COCO, YOLO and Pascal VOC exports hold. A
configuration written whole (any of Label Studio's interfaces) is taken as it is, within a bound, and
Label Studio itself checks it when the project is made.
"""

from __future__ import annotations

import re
from xml.sax.saxutils import quoteattr

from workspace.errors import UserError

MAX_LABELS = 100
MAX_LABEL = 64
MAX_CONFIG = 64 * 1024
# what Label Studio shows in its buttons and writes into exports: printable, no markup
LABEL = re.compile(r"^[^\x00-\x1f<>&\"]{1,64}$")


def parse_labels(value) -> list[str]:
    """A list of labels, or one string of them separated by commas or new lines; the user's 400 otherwise."""
    if isinstance(value, str):
        value = [v for v in re.split(r"[,\n]", value)]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise UserError(400, '“labels” must be a list of labels, like ["cat", "dog"].')
    labels = []
    for raw in value:
        label = raw.strip()
        if not label:
            continue
        if not LABEL.match(label):
            raise UserError(
                400,
                "The label “{label}” cannot be used: a label has 1–{limit} characters, without <, >, & or quotes.",
                label=label[:80],
                limit=MAX_LABEL,
            )
        if label not in labels:
            labels.append(label)
    if not labels:
        raise UserError(400, "Give the project at least one label, like “cat, dog”.")
    if len(labels) > MAX_LABELS:
        raise UserError(
            400, "A project may have at most {limit} labels; this one has {count}.", limit=MAX_LABELS, count=len(labels)
        )
    return labels


def image_config(labels: list[str]) -> str:
    """Boxes and polygons of `labels` over each task's image."""
    items = "".join(f"<Label value={quoteattr(label)}/>" for label in labels)
    return (
        '<View><Image name="image" value="$image" zoom="true" zoomControl="true"/>'
        f'<RectangleLabels name="box" toName="image">{items}</RectangleLabels>'
        f'<PolygonLabels name="polygon" toName="image">{items}</PolygonLabels></View>'
    )


def config_of(body: dict) -> str:
    """The project's configuration: from its labels, or as written (`config`); the user's 400 otherwise."""
    if ("labels" in body) == ("config" in body):
        raise UserError(400, 'Give the project\'s “labels” (like ["cat", "dog"]), or a Label Studio “config”.')
    if "labels" in body:
        return image_config(parse_labels(body["labels"]))
    config = body["config"]
    if not isinstance(config, str) or not config.strip().startswith("<View") or len(config) > MAX_CONFIG:
        raise UserError(
            400,
            "“config” must be a Label Studio labelling configuration (<View>…</View>) of at most 64 KiB.",
        )
    return config.strip()
