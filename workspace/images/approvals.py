"""Approving a user's image for others (#28): who may approve it for whom, and the records.

A user's image is its owner's code, run as whoever starts it (their home, their
server's token). Sharing it (definitions.parse_visibility) only makes it
visible; it runs for someone else once its current build is approved for an
audience they belong to (user_images.may_start):

- `public` (everyone who may see it): by an administrator, for an image its
  owner made public;
- `group:NAME` (the members of one course): by an administrator or by that
  course's instructor (MANAGE_SCOPE for the group), for an image shared with
  that course or public.

An approval names the build it was given for (its engine image): the owner's
rebuild is a new engine image that waits for an approval of its own, so no
owner can swap in new code after the fact. Revoking removes it. Each approval
records who gave it and when.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select

from workspace import i18n
from workspace.db import utcnow
from workspace.errors import UserError
from workspace.images.user import ImageApproval, UserImage, _find, approvals_of, shown


@dataclass(frozen=True)
class Approver:
    """Who asks: their name, their groups, whether they approve for everyone (an administrator), and the
    courses they approve for (None: every course)."""

    name: str
    groups: frozenset
    public: bool
    courses: frozenset | None

    def may_approve(self, audience: str) -> bool:
        if audience == "public":
            return self.public
        if not audience.startswith("group:"):
            return False
        return self.public or self.courses is None or audience[len("group:") :] in self.courses

    def may_review(self, image: UserImage) -> bool:
        """Whether they may see the image (else it is not theirs to learn of, as user_images._get says)."""
        v = image.visibility
        member = v.startswith("group:") and v[len("group:") :] in self.groups
        return self.public or image.owner == self.name or v == "public" or member or self.may_approve(v)


def _is_audience(value) -> bool:
    return isinstance(value, str) and (value == "public" or (value.startswith("group:") and 6 < len(value) <= 300))


def parse_audience(value, image: UserImage) -> str:
    """`for`: "public" or "group:NAME" (default: whom the image is shared with), and only an audience that
    may see the image; the user's 400/409 otherwise."""
    if value is None or value == "":
        if image.visibility == "private":
            raise UserError(
                409,
                "“{image}” is private: its owner shares it (with a course or everyone) before it can be approved.",
                image=image.full_name,
            )
        return image.visibility
    if not _is_audience(value):
        raise UserError(400, "“for” is “public” (everyone) or “group:NAME” (the members of one course).")
    if value != image.visibility and not (image.visibility == "public" and value.startswith("group:")):
        raise UserError(
            409,
            "“{image}” is shared as {visibility}, so it cannot be approved for {audience}: approve it for those it "
            "is shared with.",
            image=image.full_name,
            visibility=image.visibility,
            audience=value,
        )
    return value


def _reviewed(s, full_name: str, approver: Approver) -> UserImage:
    image = _find(s, full_name)
    if image is None or not approver.may_review(image):
        raise UserError(404, "There is no image “{image}” you can see.", image=full_name)
    return image


def _authorize(approver: Approver, audience: str) -> None:
    if approver.may_approve(audience):
        return
    if audience == "public":
        raise UserError(
            403,
            "Only an administrator may approve an image for everyone; a course's instructor approves it for "
            "their course (“for”: “group:NAME”).",
        )
    raise UserError(
        403,
        "Only the instructors of “{course}” (and administrators) may approve an image for it.",
        course=audience[len("group:") :],
    )


def approve(db, full_name: str, approver: Approver, audience=None, build=None, locale: str = i18n.DEFAULT) -> dict:
    """Approve the image's current build for `audience` (replacing an approval of an older build); the image
    as the approver sees it (blocking). `build`: the build the approver read (the page sends it), refused
    when the image has been rebuilt since."""
    with db.session() as s:
        image = _reviewed(s, full_name, approver)
        audience = parse_audience(audience, image)
        _authorize(approver, audience)
        if image.state != "ready":
            # queued, building or failed: its record shows a definition that is not the one its engine image
            # was built from, and an approver must approve what they read
            raise UserError(
                409,
                "“{image}” has no finished build of what it now says (it is {state}); approve it when a build "
                "of it is ready.",
                image=full_name,
                state=image.state,
            )
        if build is not None and (not isinstance(build, int) or isinstance(build, bool) or build != image.build):
            raise UserError(
                409,
                "“{image}” was rebuilt since you looked (it is build {build} now); read it again before you "
                "approve it.",
                image=full_name,
                build=image.build,
            )
        found = s.scalar(
            select(ImageApproval).where(ImageApproval.image_id == image.id, ImageApproval.audience == audience)
        )
        if found is None:
            found = ImageApproval(image_id=image.id, audience=audience)
            s.add(found)
        found.ref, found.build, found.approver, found.approved = image.ref, image.build, approver.name, utcnow()
        s.flush()
        return shown(image, approvals_of(s, [image]), approver.name, set(approver.groups), locale)


def revoke(db, full_name: str, approver: Approver, audience=None, locale: str = i18n.DEFAULT) -> dict:
    """Remove the image's approval for `audience` (whichever build it was for); the user's 404 if it has none."""
    with db.session() as s:
        image = _reviewed(s, full_name, approver)
        if audience is None or audience == "":
            audience = image.visibility
        if not _is_audience(audience):
            raise UserError(400, "“for” is “public” (everyone) or “group:NAME” (the members of one course).")
        _authorize(approver, audience)
        found = s.scalar(
            select(ImageApproval).where(ImageApproval.image_id == image.id, ImageApproval.audience == audience)
        )
        if found is None:
            raise UserError(404, "“{image}” is not approved for {audience}.", image=full_name, audience=audience)
        s.delete(found)
        s.flush()
        return shown(image, approvals_of(s, [image]), approver.name, set(approver.groups), locale)


def pending(db, approver: Approver, locale: str = i18n.DEFAULT) -> list[dict]:
    """The shared images with a finished build that awaits the approver's approval for those it is shared
    with (an administrator: every one; an instructor: those shared with their courses), oldest change first."""
    with db.session() as s:
        images = list(
            s.scalars(
                select(UserImage)
                .where(UserImage.visibility != "private", UserImage.state == "ready")
                .order_by(UserImage.updated)
            )
        )
        images = [i for i in images if approver.may_approve(i.visibility)]
        approvals = approvals_of(s, images)
        waiting = [
            i
            for i in images
            if not any(a.image_id == i.id and a.audience == i.visibility and a.ref == i.ref for a in approvals)
        ]
        return [shown(i, approvals, approver.name, set(approver.groups), locale) for i in waiting]
