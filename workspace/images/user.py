"""Images users define (#18): a base image plus apt packages, pip requirements and a post-build script.

The definition is checked here (names, package lists, sizes, who may see it),
recorded as a `UserImage`, built by the workspace service one at a time
(workspace/images/builds.py) and offered on the spawn forms to everyone it is
visible to: its owner; the members of a course (a JupyterHub group) when the
owner shares it there; everyone when it is public. Each build is a new engine
image (`workspace-user-<id>:<build>`); a rebuild replaces the old one only when
it succeeded, so a failed rebuild never takes an image away from a class.

Sharing makes an image *visible*; it *runs* for someone other than its owner
only once that build is approved for them (#28: an image is its owner's code,
run as whoever starts it, with their home and their server's token). An
`ImageApproval` names one build (its engine image) and one audience: everyone
(`public`, an administrator's approval) or one course (`group:NAME`, its
instructor's or an administrator's). A rebuild makes a new engine image, which
no approval names until someone approves it again (workspace/images/approvals.py).
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
    delete,
    func,
    select,
)
from sqlalchemy.orm import Mapped, mapped_column

from workspace import i18n
from workspace.caller import Caller
from workspace.db import Base, iso, utcnow
from workspace.errors import UserError

STATES = ("queued", "building", "ready", "failed")
BUSY = ("queued", "building")


class UserImage(Base):
    __tablename__ = "user_images"
    __table_args__ = (UniqueConstraint("owner", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    owner: Mapped[str] = mapped_column(String(255), index=True)
    name: Mapped[str] = mapped_column(String(63))
    base: Mapped[str] = mapped_column(String(255))  # what the owner chose (an image's name or owner/name)
    base_ref: Mapped[str] = mapped_column(String(255))  # the engine's image it was resolved to
    apt: Mapped[list] = mapped_column(JSON, default=list)
    pip: Mapped[str] = mapped_column(Text, default="")
    script: Mapped[str] = mapped_column(Text, default="")
    dockerfile: Mapped[str | None] = mapped_column(Text, nullable=True)  # as sent; `script` is its translation
    # a Dockerfile's ENV and LABEL values for the image, and its context's archive until the build ran
    config: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    visibility: Mapped[str] = mapped_column(String(300), default="private")  # private | group:NAME | public
    state: Mapped[str] = mapped_column(String(16), default="queued")
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    progress: Mapped[str | None] = mapped_column(String(300), nullable=True)  # the step a build is at
    build: Mapped[int] = mapped_column(Integer, default=1)  # the number of the build asked for last
    ref: Mapped[str | None] = mapped_column(String(255), nullable=True)  # the engine's image of the last success
    bytes: Mapped[int] = mapped_column(BigInteger, default=0)  # its own layer: its size less its base's
    versions: Mapped[dict] = mapped_column(JSON, default=dict)
    log_total: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    log_kept: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    created: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)
    started: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    finished: Mapped[dt.datetime | None] = mapped_column(DateTime, nullable=True)
    updated: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def as_dict(self, locale: str = i18n.DEFAULT) -> dict:
        """The image as the API shows it, its error sentence in `locale`."""
        seconds = (self.finished - self.started).total_seconds() if self.started and self.finished else None
        return {
            "name": self.full_name,
            "owner": self.owner,
            "base": self.base,
            "apt": list(self.apt or []),
            "pip": self.pip,
            "script": self.script if self.dockerfile is None else "",
            "dockerfile": self.dockerfile,
            "visibility": self.visibility,
            "state": self.state,
            "error": i18n.said(locale, self.error),
            "progress": self.progress if self.state == "building" else None,
            "build": self.build,
            "available": self.ref is not None,
            "bytes": self.bytes,
            "versions": self.versions or {},
            "created": iso(self.created),
            "started": iso(self.started),
            "finished": iso(self.finished),
            "build_seconds": round(seconds, 1) if seconds is not None else None,
        }


class ImageApproval(Base):
    """One build of a user's image approved for an audience: who approved it, when."""

    __tablename__ = "image_approvals"
    __table_args__ = (UniqueConstraint("image_id", "audience"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    image_id: Mapped[int] = mapped_column(ForeignKey("user_images.id", ondelete="CASCADE"), index=True)
    audience: Mapped[str] = mapped_column(String(300))  # public | group:NAME
    # the build approved: its engine image names one build of one image (<deployment>-user-<id>:<build>)
    ref: Mapped[str] = mapped_column(String(255))
    build: Mapped[int] = mapped_column(Integer)
    approver: Mapped[str] = mapped_column(String(255))
    approved: Mapped[dt.datetime] = mapped_column(DateTime, default=utcnow)

    def as_dict(self, current_ref: str | None) -> dict:
        return {
            "for": self.audience,
            "by": self.approver,
            "at": iso(self.approved),
            "build": self.build,
            # False once the owner rebuilt: the new build waits for an approval of its own
            "current": self.ref == current_ref,
        }


# -- who may start one (the rule; blocking functions below apply it) ----------------------


def covers(audience: str, groups: set[str]) -> bool:
    """Whether an approval for `audience` is one for a member of `groups`."""
    return audience == "public" or (audience.startswith("group:") and audience[6:] in groups)


def may_start(image: UserImage, approvals: list[ImageApproval], who: str, groups: set[str]) -> bool:
    """The rule: a built image runs for its owner; for anyone else only when they may see it and its current
    build is approved for an audience they are in. Being an administrator changes nothing here: their
    workspace would run the owner's code as them just the same (they approve first)."""
    if image.ref is None:
        return False
    if image.owner == who:
        return True
    if not _visible(image, Caller(who, groups)):  # as a user: an administrator's rights do not count
        return False
    return any(a.image_id == image.id and a.ref == image.ref and covers(a.audience, groups) for a in approvals)


# -- checking a definition ---------------------------------------------------------------


def visible_clause(owner: str, groups: set[str]):
    return (
        (UserImage.owner == owner)
        | (UserImage.visibility == "public")
        | UserImage.visibility.in_([f"group:{g}" for g in sorted(groups)] or ["-"])
    )


# -- the records (blocking) ----------------------------------------------------------------


def request_build(db, owner: str, definition: dict, limit: int, queued_limit: int | None = None) -> dict:
    """Record a build of `definition` (a new image, or a rebuild of the caller's own): queued. The user's 409
    while one of it is queued or building, 403 beyond `limit` images, 429 beyond `queued_limit` builds
    queued or under way (the builder is shared: one user's builds never fill its queue)."""
    with db.session() as s:
        image = s.scalar(select(UserImage).where(UserImage.owner == owner, UserImage.name == definition["name"]))
        if queued_limit and (image is None or image.state not in BUSY):
            busy = s.scalar(
                select(func.count()).select_from(UserImage).where(UserImage.owner == owner, UserImage.state.in_(BUSY))
            )
            if busy >= queued_limit:
                raise UserError(
                    429,
                    "You have {count} image builds queued or under way, the most one user may; wait until "
                    "one has ended, then ask again.",
                    count=busy,
                )
        if image is None:
            count = s.scalar(select(func.count()).select_from(UserImage).where(UserImage.owner == owner))
            if count >= limit:
                raise UserError(
                    403,
                    "You have {count} images, the most one user may have; delete one you no longer use first.",
                    count=count,
                )
            image = UserImage(owner=owner, name=definition["name"], build=1)
            s.add(image)
        elif image.state in BUSY:
            raise UserError(
                409, "“{image}” is being built; wait for that build to end, or follow its log.", image=image.full_name
            )
        else:
            image.build += 1
        for k in ("base", "base_ref", "apt", "pip", "script", "visibility", "dockerfile", "config"):
            setattr(image, k, definition.get(k))
        image.state, image.error, image.started, image.finished = "queued", None, None, None
        image.progress = None
        image.updated = utcnow()
        s.flush()
        return image.as_dict()


def _find(s, full_name: str) -> UserImage | None:
    owner, _, name = full_name.partition("/")
    return s.scalar(select(UserImage).where(UserImage.owner == owner, UserImage.name == name))


def _visible(image: UserImage | None, caller: Caller) -> bool:
    if image is None:
        return False
    v = image.visibility
    return (
        caller.admin
        or image.owner == caller.name
        or v == "public"
        or (v.startswith("group:") and v[6:] in caller.groups)
    )


def _get(s, full_name: str, caller: Caller) -> UserImage:
    """The image, or the user's 404 (also for one they may not see: its existence is not theirs to learn)."""
    image = _find(s, full_name)
    if not _visible(image, caller):
        raise UserError(404, "There is no image “{image}” you can see.", image=full_name)
    return image


def _own(s, full_name: str, caller: Caller) -> UserImage:
    image = _get(s, full_name, caller)
    if image.owner != caller.name and not caller.admin:
        raise UserError(
            403, "Only {owner} (and administrators) may change or delete “{image}”.", owner=image.owner, image=full_name
        )
    return image


def approvals_of(s, images: list[UserImage]) -> list[ImageApproval]:
    ids = [i.id for i in images]
    if not ids:
        return []
    return list(s.scalars(select(ImageApproval).where(ImageApproval.image_id.in_(ids)).order_by(ImageApproval.id)))


def shown(image: UserImage, approvals: list[ImageApproval], who: str, groups: set[str], locale: str) -> dict:
    """The API's view of an image for `who`: with its approvals and whether they may start it."""
    return {
        **image.as_dict(locale),
        "approvals": [a.as_dict(image.ref) for a in approvals if a.image_id == image.id],
        "startable": may_start(image, approvals, who, groups),
    }


def listing(db, caller: Caller, locale: str = i18n.DEFAULT) -> list[dict]:
    """The images the caller may see (an administrator: all), their own first (said in `locale`), each with
    its approvals and whether the caller may start it."""
    with db.session() as s:
        query = select(UserImage).order_by(UserImage.owner != caller.name, UserImage.owner, UserImage.name)
        if not caller.admin:
            query = query.where(visible_clause(caller.name, caller.groups))
        images = list(s.scalars(query))
        approvals = approvals_of(s, images)
        return [shown(i, approvals, caller.name, caller.groups, locale) for i in images]


def describe(db, full_name: str, caller: Caller, locale: str = i18n.DEFAULT) -> dict:
    with db.session() as s:
        image = _get(s, full_name, caller)
        return shown(image, approvals_of(s, [image]), caller.name, caller.groups, locale)


def startable(db, who: str, groups: set[str]) -> list[dict]:
    """[{name, ref, owner, approved_by}] of the built images `who` may start (blocking): their own, and the
    others' whose current build is approved for them (approved_by: who approved it, for the start forms)."""
    with db.session() as s:
        images = list(
            s.scalars(
                select(UserImage)
                .where(visible_clause(who, groups), UserImage.ref.is_not(None))
                .order_by(UserImage.owner != who, UserImage.owner, UserImage.name)
            )
        )
        approvals = approvals_of(s, images)
        out = []
        for i in images:
            if not may_start(i, approvals, who, groups):
                continue
            by = [a.approver for a in approvals if a.image_id == i.id and a.ref == i.ref and covers(a.audience, groups)]
            out.append({"name": i.full_name, "ref": i.ref, "owner": i.owner, "approved_by": sorted(set(by))})
        return out


def choices(db, who: str, groups: set[str]) -> dict[str, str]:
    """{owner/name: engine image} of the built images the user may start (blocking): what the start forms
    offer, the spawner allows and a build may start from."""
    return {i["name"]: i["ref"] for i in startable(db, who, groups)}


def origin(entry: dict, who: str, locale: str = i18n.DEFAULT) -> str:
    """Who made a startable image and who approved it, for a start form: “built by alice, approved by root”."""
    if entry["owner"] == who:
        return i18n.translate(locale, "built by you")
    return i18n.translate(
        locale,
        "built by {owner}, approved by {approvers}",
        owner=entry["owner"],
        approvers=", ".join(entry["approved_by"]),
    )


def check_startable(db, full_name: str, who: str, groups: set[str]) -> None:
    """A start naming `full_name` as its image: nothing when it is no user's image (the site's: the spawner's
    own list decides) or one `who` may start; the user's 404 for one they may not see, 409 for one not built
    yet, 403 for another's build that is not approved for them (blocking)."""
    with db.session() as s:
        image = _find(s, full_name)
        if image is None:
            return
        if not _visible(image, Caller(who, groups)):  # as a user, as in may_start
            raise UserError(404, "There is no image “{image}” you can see.", image=full_name)
        if image.ref is None:
            raise UserError(409, "“{image}” has not been built yet; start it when its build is ready.", image=full_name)
        if not may_start(image, approvals_of(s, [image]), who, groups):
            raise UserError(
                403,
                "“{image}” was built by {owner} and this build of it is not approved for you: an image someone "
                "else built runs in your workspace only after an administrator (or your course's instructor) "
                "approves it. Choose another image, or ask them to approve it.",
                image=full_name,
                owner=image.owner,
            )


def log_of(db, full_name: str, caller: Caller) -> tuple[int, str, int]:
    """(id, state, build) of an image whose log the caller may read: its owner's or an administrator's (a
    build log may show what the owner's script printed); 404/403 otherwise."""
    with db.session() as s:
        image = _own(s, full_name, caller)
        return image.id, image.state, image.build


def state_of(db, image_id: int) -> tuple[str, int]:
    with db.session() as s:
        image = s.get(UserImage, image_id)
        return (image.state, image.build) if image is not None else ("failed", 0)


def set_visibility(db, full_name: str, caller: Caller, visibility: str) -> dict:
    with db.session() as s:
        image = _own(s, full_name, caller)
        image.visibility, image.updated = visibility, utcnow()
        return image.as_dict()


def remove(db, full_name: str, caller: Caller) -> tuple[int, str | None]:
    """Delete the record (the user's 409 while it builds); (its id, the engine image to remove)."""
    with db.session() as s:
        image = _own(s, full_name, caller)
        if image.state == "building":
            raise UserError(409, "“{image}” is being built; delete it when the build has ended.", image=full_name)
        found = image.id, image.ref
        # its approvals go with it (not only by the foreign key: a later image may get its id, and its ref)
        s.execute(delete(ImageApproval).where(ImageApproval.image_id == image.id))
        s.delete(image)
        return found


def owned(db_session, owner: str) -> list[UserImage]:
    """The user's images with an engine image (what counts against their quota)."""
    return list(
        db_session.scalars(
            select(UserImage).where(UserImage.owner == owner, UserImage.ref.is_not(None)).order_by(UserImage.id)
        )
    )


def last_change(db_session, owner: str) -> dt.datetime | None:
    return db_session.scalar(select(func.max(UserImage.updated)).where(UserImage.owner == owner))


def set_progress(db, image_id: int, build: int, step: str) -> None:
    """The step a build announced (`step 2/3: pip install 4 requirement(s)`)."""
    with db.session() as s:
        image = s.get(UserImage, image_id)
        if image is not None and image.build == build and image.state == "building":
            image.progress = step[:300]


def build_order(images: list[UserImage]) -> list[UserImage]:
    """The queued builds among `images` (the images of every owner with a queued build) in the order the
    builder takes them: round-robin between users. A build goes before another when
    fewer builds of its owner are ahead of it (building, or queued before it), then when its owner was
    served less recently (their last build's start), then when it was asked for earlier."""
    ahead: dict[str, int] = {}
    served: dict[str, dt.datetime] = {}
    for image in images:
        if image.state != "queued" and image.started is not None:
            served[image.owner] = max(served.get(image.owner, image.started), image.started)
    ranked = []
    for image in sorted(images, key=lambda i: (i.state != "building", i.updated, i.id)):
        if image.state == "queued":
            ranked.append(
                (ahead.get(image.owner, 0), served.get(image.owner, dt.datetime.min), image.updated, image.id, image)
            )
        if image.state in BUSY:
            ahead[image.owner] = ahead.get(image.owner, 0) + 1
    return [r[-1] for r in sorted(ranked, key=lambda r: r[:-1])]


def next_queued(db) -> dict | None:
    """The next queued build (build_order), now marked building: {id, build, owner, name, base_ref, apt, pip,
    script}."""
    with db.session() as s:
        queued_owners = select(UserImage.owner).where(UserImage.state == "queued").distinct()
        order = build_order(list(s.scalars(select(UserImage).where(UserImage.owner.in_(queued_owners)))))
        if not order:
            return None
        image = order[0]
        image.state, image.started, image.updated = "building", utcnow(), utcnow()
        return {
            "id": image.id,
            "build": image.build,
            "owner": image.owner,
            "name": image.full_name,
            "base_ref": image.base_ref,
            "apt": list(image.apt or []),
            "pip": image.pip,
            "script": image.script,
            "config": dict(image.config or {}),  # a Dockerfile's: its ENV, LABELs and context (builds.py)
        }


def finish(db, image_id: int, build: int, result: dict) -> str | None:
    """Record a build's end. `result`: {ok, ref, bytes, versions, error, log_total, log_kept}. A success makes
    its image the current one; the engine image it replaces (or, if the record changed meanwhile, this
    build's own) is returned to be removed."""
    with db.session() as s:
        image = s.get(UserImage, image_id)
        if image is None or image.build != build:  # deleted, or rebuilt meanwhile: this build is nobody's
            return result.get("ref")
        image.finished = image.updated = utcnow()
        image.log_total, image.log_kept = result.get("log_total"), result.get("log_kept")
        if not result.get("ok"):
            image.state = "failed"
            image.error = result.get("error") or i18n.kept("The build failed; read its log.")
            return None
        old = image.ref
        image.state, image.error = "ready", None
        image.ref, image.bytes = result["ref"], int(result.get("bytes") or 0)
        image.versions = result.get("versions") or {}
        return old if old != image.ref else None


def interrupted(db) -> int:
    """Builds left `building` by a service that stopped: failed, with a sentence (blocking)."""
    with db.session() as s:
        rows = list(s.scalars(select(UserImage).where(UserImage.state == "building")))
        for image in rows:
            image.state, image.finished, image.updated = "failed", utcnow(), utcnow()
            image.error = i18n.kept("The build was interrupted (the service restarted); build it again.")
        return len(rows)
