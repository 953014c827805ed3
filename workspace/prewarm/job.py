"""A course's pre-warm as a job of the workspace service, with its progress.

    jobs = Prewarms(db, stores, record, ...)        # once, in the service
    jobs.start(course, students, by)                # plans (blocking), then runs in threads; 409 while one runs
    jobs.of(course).status(locale)                  # what a GET answers: homes done of total, bytes, images

The homes go node by node: in parallel over the nodes, one at a time on each, by `replicas.receive`
(from the store of record or the node that saved it, incrementally from the nearest snapshot of its
lineage the node holds), as a start's own receive would (spawner/node_inputs.py); each home that is
there is recorded (assignment.record), so that its owner's start is placed there. Alongside, the
course's image is loaded into each node's engine that lacks it (image_copies). A home that cannot be
sent is said and left: its owner's start sends it then, as without a pre-warm.

The job lives in the service's memory: a restart of the service forgets its progress (what was sent
and recorded stays), and the next POST starts anew.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable

from sqlalchemy import select

from workspace import i18n, replicas
from workspace.db import Database, iso, utcnow
from workspace.errors import UserError
from workspace.executions import Snapshot
from workspace.limits import fit
from workspace.limits.resource_types import ResourceType
from workspace.prewarm import assignment, image_copies
from workspace.prewarm.assignment import Home, Plan
from workspace.store.nodes import Node, NodeStores

log = logging.getLogger("workspace.prewarm")
MAX_THREADS = 16  # nodes worked on at once (each: one home at a time, and its image)

# a home's states: to send, being sent, sent, found there already, nothing to send (an empty home, or a
# workspace running now), could not be sent
HOME_STATES = ("waiting", "sending", "sent", "there", "empty", "running", "failed")
# a node's image: to check, being loaded, found there, loaded, left to the node (it pulls from the site's
# registry), could not be loaded
IMAGE_STATES = ("waiting", "copying", "present", "copied", "registry", "failed")
# what the figures leave out, said after them when its count is not 0: (part of the counts, count, sentence)
NOTES = (
    (
        "homes",
        "failed",
        i18n.N_("{count} home(s) could not be sent ahead (see below); each is sent at its owner's start."),
    ),
    (
        "images",
        "failed",
        i18n.N_(
            "The image could not be loaded into {count} node(s) (see below): a start there fails until it is; "
            "tell your administrator."
        ),
    ),
    (
        "images",
        "registry",
        i18n.N_("{count} node(s) fetch the image from the site's registry themselves at their first start."),
    ),
    ("homes", "empty", i18n.N_("{count} student(s) start with an empty home: nothing to send.")),
    ("homes", "running", i18n.N_("{count} student(s) have their workspace running now: their home is where it runs.")),
)


@dataclass
class HomeStep:
    home: Home
    state: str = "waiting"
    bytes: int = 0
    error: str | None = None

    def as_dict(self) -> dict:
        h = self.home
        return {"name": h.student, "node": h.node, "state": self.state, "bytes": self.bytes, "error": self.error}


@dataclass
class ImageStep:
    node: Node
    state: str = "waiting"
    bytes: int = 0
    error: str | None = None


class Prewarm:
    """One pre-warm of a course: its plan, carried out by `run`, and its progress (read while it runs)."""

    def __init__(self, plan: Plan, by: str, image: str):
        self.plan, self.by, self.image = plan, by, image
        self.homes = [HomeStep(h, _first_state(h)) for h in plan.homes]
        self.images = [ImageStep(n) for n in plan.nodes]
        self.state, self.error = "running", None
        self.started, self.finished = utcnow(), None
        self._lock = threading.Lock()  # the steps change in the job's threads while a GET reads them

    @property
    def running(self) -> bool:
        return self.state == "running"

    def run(
        self,
        send_home: Callable[[Home, Callable[[int], None]], bool],
        copy_image: Callable[[Node, Callable[[int], None]], str],
        record: Callable[[Home], None],
    ) -> None:
        """Carry the plan out (blocking, in a thread of its own): `send_home(home, progress)` brings a home
        to its node (False: it was there), `copy_image(node, progress)` the image (its step's state),
        `record(home)` notes a home that is there. Every step's failure is its own; the job ends `done`."""
        try:
            by_node: dict[str, list[HomeStep]] = {}
            for step in self.homes:
                if step.state == "waiting":
                    by_node.setdefault(step.home.node, []).append(step)
            threads = max(1, min(MAX_THREADS, len(by_node) + len(self.images)))
            with ThreadPoolExecutor(threads, thread_name_prefix=f"prewarm-{self.plan.course}") as pool:
                done = [pool.submit(self._image, step, copy_image) for step in self.images]
                done += [pool.submit(self._homes, steps, send_home, record) for steps in by_node.values()]
                for future in done:
                    future.result()
            self.state = "done"
        except Exception as e:  # a defect, not a home or an image: said, and the job ends
            log.exception("the pre-warm of %s failed", self.plan.course)
            self.state, self.error = "failed", str(e)
        finally:
            self.finished = utcnow()
        log.info("pre-warm of %s: %s", self.plan.course, self.describe())

    def _homes(self, steps: list[HomeStep], send_home, record) -> None:
        """One node's homes, one at a time."""
        for step in steps:
            self._set(step, state="sending")
            try:
                sent = send_home(step.home, lambda n, step=step: self._set(step, bytes=n))
                record(step.home)
                self._set(step, state="sent" if sent else "there")
            except Exception as e:  # the next home goes on; this one is sent at its owner's start
                log.warning(
                    "pre-warm of %s: %s's home to %s: %s", self.plan.course, step.home.student, step.home.node, e
                )
                self._set(step, state="failed", error=str(e)[:500])

    def _image(self, step: ImageStep, copy_image) -> None:
        self._set(step, state="copying")
        try:
            state = copy_image(step.node, lambda n: self._set(step, bytes=n))
            self._set(step, state=state)
        except Exception as e:
            log.warning("pre-warm of %s: the image to %s: %s", self.plan.course, step.node.name, e)
            self._set(step, state="failed", error=str(e)[:500])

    def _set(self, step, **values) -> None:
        with self._lock:
            for name, value in values.items():
                setattr(step, name, value)

    # -- what a GET answers ------------------------------------------------------------------

    def counts(self) -> dict:
        """The figures of the progress: homes (to send, done, failed, nothing to send), bytes, images."""
        with self._lock:
            homes = [s.state for s in self.homes]
            images = [s.state for s in self.images]
            sent = sum(s.bytes for s in self.homes)
            image_bytes = sum(s.bytes for s in self.images)
        return {
            "homes": {
                "total": sum(h not in ("empty", "running") for h in homes),
                "done": sum(h in ("sent", "there") for h in homes),
                "failed": homes.count("failed"),
                "empty": homes.count("empty"),
                "running": homes.count("running"),
            },
            "bytes": sent,
            "images": {
                "total": len(images),
                "done": sum(i in ("present", "copied") for i in images),
                "failed": images.count("failed"),
                "registry": images.count("registry"),
                "bytes": image_bytes,
            },
        }

    def status(self, locale: str = i18n.DEFAULT) -> dict:
        """The job as the API shows it, its sentence in `locale`."""
        counts = self.counts()
        with self._lock:
            students = [s.as_dict() for s in self.homes]
            nodes = [
                {
                    "name": s.node.name,
                    "homes": sum(h.home.node == s.node.name for h in self.homes),
                    "image": s.state,
                    "image_error": s.error,
                }
                for s in self.images
            ]
        return {
            "course": self.plan.course,
            "workspace": self.plan.workspace,
            "state": self.state,
            "single_host": False,
            "by": self.by,
            "started": iso(self.started),
            "finished": iso(self.finished),
            "image": self.image,
            **counts,
            "nodes": nodes,
            "students": students,
            "message": self.describe(locale, counts),
        }

    def describe(self, locale: str = i18n.DEFAULT, counts: dict | None = None) -> str:
        """The progress in a sentence or a few, in `locale`."""
        c = counts or self.counts()
        homes, images = c["homes"], c["images"]
        figures = dict(
            done=homes["done"],
            total=homes["total"],
            mb=c["bytes"] / 1e6,
            images=images["done"],
            nodes=images["total"],
        )
        if self.state == "failed":
            return i18n.translate(
                locale,
                "The pre-warm stopped: {error}. What was sent stays on the nodes; start the pre-warm again.",
                error=self.error,
            )
        if self.state == "running":
            text = i18n.translate(
                locale,
                "Pre-warming: {done} of {total} home(s) on their nodes ({mb:,.1f} MB sent); "
                "the image on {images} of {nodes} node(s).",
                **figures,
            )
        else:
            seconds = (self.finished - self.started).total_seconds()
            text = i18n.translate(
                locale,
                "Pre-warmed in {seconds:,.0f} s: {done} of {total} home(s) on their nodes ({mb:,.1f} MB sent); "
                "the image on {images} of {nodes} node(s).",
                seconds=seconds,
                **figures,
            )
        return " ".join([text, *self._notes(locale, c)])

    def _notes(self, locale: str, counts: dict) -> list[str]:
        """What the figures leave out (NOTES), each whose count is not 0."""
        return [i18n.translate(locale, text, count=counts[part][key]) for part, key, text in NOTES if counts[part][key]]


def _first_state(home: Home) -> str:
    if home.running:
        return "running"
    return "empty" if home.snapshot is None else "waiting"


SINGLE_HOST = i18n.N_(
    "This server runs every workspace on one host: the students' homes and the image are there already, so "
    "there is nothing to pre-warm."
)
NEVER = i18n.N_(
    "Not pre-warmed yet. Pre-warm the course shortly before a lecture: each student's home is brought to the "
    "node their start will get, and the image to every node."
)


def without_job(course: str, single_host: bool, locale: str = i18n.DEFAULT) -> dict:
    """What the API answers where no pre-warm ran: on a single host, where every home and image is on the one
    node already (done); on a swarm, for a course not pre-warmed since the service started (none)."""
    return {
        "course": course,
        "state": "done" if single_host else "none",
        "single_host": single_host,
        "message": i18n.translate(locale, SINGLE_HOST if single_host else NEVER),
    }


class Prewarms:
    """The pre-warms this service runs: one at a time per course, the last one's progress kept.

    `stores`: every node's store; `record`: the store of record (the saved homes' copies); `types`: the
    site's resource types; `image_of(name)`: the engine's image of an image's name (None: the default);
    `image_source()`: a Docker API client of the engine the images are copied from (the swarm's
    manager; the caller's to close).
    """

    def __init__(
        self,
        db: Database,
        stores: NodeStores,
        record,
        types: list[ResourceType],
        image_of: Callable[[str | None], str],
        image_source: Callable[[], object],
    ):
        self.db, self.stores, self.record, self.types = db, stores, record, types
        self.image_of, self.image_source = image_of, image_source
        self._jobs: dict[str, Prewarm] = {}
        self._lock = threading.Lock()

    def of(self, course: str) -> Prewarm | None:
        return self._jobs.get(course)

    def start(self, course: str, students: list[str], by: str) -> Prewarm:
        """Plan a pre-warm of `course` for `students` and start it in the background (blocking while it
        plans); the user's 409 while one runs, 503 when no node takes the course's starts."""
        with self._lock:
            current = self._jobs.get(course)
            if current is not None and current.running:
                raise UserError(
                    409,
                    "A pre-warm of “{course}” is under way already; follow its progress on the course's page, "
                    "and start another once it has finished.",
                    course=course,
                )
            plan = assignment.plan(self.db, course, students, self.nodes_for, self.load())
            if not plan.nodes:
                raise UserError(
                    503,
                    "No node can run the starts of “{course}” now, so nothing was pre-warmed; try again when "
                    "the nodes are back (administrators see them on the admin page).",
                    course=course,
                )
            job = Prewarm(plan, by, self.image_of(plan.image))
            self._jobs[course] = job
        copier = ImageCopier(job.image, self.image_source)
        worker = threading.Thread(
            target=job.run,
            args=(self.send_home, copier.copy, lambda home: assignment.record(self.db, course, home)),
            name=f"prewarm-{course}",
            daemon=True,
        )
        worker.start()
        return job

    def nodes_for(self, resource_type: str | None) -> list[Node]:
        """The nodes that may take the starts of a course of `resource_type` now (blocking)."""
        rtype = next((t for t in self.types if t.name == resource_type), None)
        return assignment.eligible(self.stores.nodes(), rtype)

    def load(self) -> dict[str, int]:
        with self.db.session() as s:
            return fit.executions_per_node(s)

    def send_home(self, home: Home, progress: Callable[[int], None]) -> bool:
        """Bring `home`'s snapshot to its node's store; False: it was there (blocking)."""
        target = self.stores.of(home.node)
        if target.has_snapshot(home.snapshot):
            return False
        stats = replicas.receive(self.db, home.snapshot, target, self.sources(home), lambda t: progress(t.bytes))
        progress(stats.bytes)
        return stats.sent

    def sources(self, home: Home) -> list:
        """Where `home`'s snapshot may be sent from: the store of record, else the node that saved it."""
        with self.db.session() as s:
            node = s.scalar(select(Snapshot.node).where(Snapshot.key == home.snapshot))
        saved_on = [self.stores.of(node)] if node and node != home.node and self.stores.known(node) else []
        return [self.record, *saved_on]


class ImageCopier:
    """The course's image into each node's engine (image_copies), its ID asked of the source once."""

    def __init__(self, image: str, source: Callable[[], object]):
        self.image, self.source = image, source
        self._id: str | None = None
        self._lock = threading.Lock()

    def copy(self, node: Node, progress: Callable[[int], None]) -> str:
        if not node.engine:
            return "registry"  # a node of a real site pulls the image itself (docs/swarm.md)
        client = self.source()
        try:
            with self._lock:
                if self._id is None:
                    self._id = image_copies.image_id(client, self.image)
            return image_copies.copy(client, self.image, self._id, node.engine, progress)
        finally:
            client.close()
