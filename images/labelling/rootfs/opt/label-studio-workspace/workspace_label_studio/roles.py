"""What each role of a course's labelling team may do in its shared Label Studio (team mode only).

Label Studio's community edition has no roles: every member of the organization may do everything. The
platform's proxy says who is what (sign_in.py keeps it on the request as `workspace_role`), and this
middleware, right after the sign-in, holds each role to its part, by method and by the URL Label Studio
resolves the request to (its apps' namespaces and its views' names, so a path written differently, or a
view Label Studio moves, is still the same rule):

- manager (the instructor, the course's other managers): everything, as in Label Studio itself.
- annotator (a labeller): reads the project and its tasks, and labels them: what the labelling interface
  writes, and nothing else (LABELLER_WRITES). Their own annotations only, never accepted by themselves.
- reviewer: the annotator's part, and fixes and accepts anyone's annotation. Accepting is marking it
  ground truth, which the community edition's interface has no button for: a reviewer's "Update" of an
  annotation (changed or not) accepts it (`accepted`), as does an edit sending ground_truth: true. The
  platform's export takes the accepted annotations only.

Some things are not for non-managers even to read (MANAGERS_SEE_*): they hold the project's data in bulk
(exports), where it comes from (storages), where it goes (webhooks, ML backends) or credentials (API
tokens, invitations, Django's admin and job queue).

Anything else that changes state is refused with a 403 and a JSON `detail`, as Label Studio's API answers.
"""

import json

from django.http import JsonResponse
from django.urls import Resolver404, resolve

SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
EDIT = frozenset({"PATCH", "PUT"})

# Reading these is the manager's too, by Label Studio's URL namespaces (a prefix of one: "ml" is also
# "ml:api") and view names, with what they are for the refusal.
MANAGERS_SEE_NAMESPACES = {
    "admin": "Django's administration",
    "jwt_auth": "API tokens",  # /api/token/…, /api/jwt/settings
    "data_export": "the project's exports",  # /api/projects/<id>/export…, …/exports/…, /api/auth/export/
    "storages:api": "the project's storages",  # /api/storages/… (not /data/local-files/: the images)
    "webhooks": "webhooks",
    "ml": "machine-learning backends",
}
MANAGERS_SEE_VIEWS = {
    "current-user-token": "API tokens",  # the legacy token, and its reset
    "current-user-reset-token": "API tokens",
    "organization-invite": "invitations",
    "organization-reset-token": "invitations",
}
# django-rq's views have no namespace of their own: only their mount point says what they are.
MANAGERS_SEE_PATHS = {"/django-rq/": "the job queue"}
ML_LIST = ("ml:api", "ml-list")
ANNOTATION = ("tasks:api-annotations", "annotation-detail")

# An annotation's fields a non-manager never sends: whose it is, which task. Label Studio takes them from
# the body (its serializer has every field), which would let one user file work as another's. Its project
# the Data Manager adds to every write it makes ({"project": "1"}): only the annotation's own is let by.
IDENTITY = frozenset({"completed_by", "updated_by", "task"})


def body_of(request):
    """The JSON object a write sends ({} for none), or None when it is anything else: Label Studio also
    parses forms and multipart, which this would not read the same way as it does."""
    if not request.body:
        return {}
    if request.content_type != "application/json":
        return None
    try:
        body = json.loads(request.body)
    except ValueError:
        return None
    return body if isinstance(body, dict) else None


def annotation_written(request, role, kwargs):
    """A new annotation (submit; skip is one with was_cancelled) or an edit of one (update, skip again)."""
    from tasks.models import Annotation, Task

    body = body_of(request)
    if body is None:
        return "send an annotation other than as a JSON object"
    if IDENTITY & body.keys():
        return f"set {', '.join(sorted(IDENTITY & body.keys()))} of an annotation"
    # a reviewer accepts by editing (PATCH), any annotation; nobody files their own as accepted
    if "ground_truth" in body and not (role == "reviewer" and request.method in EDIT):
        return "accept annotations (ground_truth): reviewers do"
    if request.method == "POST":  # /api/tasks/<pk>/annotations/
        where = Task.objects.filter(pk=kwargs["pk"]).values_list("project_id", flat=True).first()
    else:
        where = Annotation.objects.filter(pk=kwargs["pk"]).values_list("task__project_id", flat=True).first()
    if "project" in body and str(body["project"]) != str(where):
        return "move an annotation to another project"
    if request.method in EDIT and role == "reviewer":
        return None
    if request.method != "POST":
        return own_annotation(request, role, kwargs)
    return None


def own_annotation(request, role, kwargs):
    """Deleting, turning into a draft (unskip) or an annotator's edit: their own annotations only."""
    from tasks.models import Annotation

    found = Annotation.objects.filter(pk=kwargs["pk"]).values_list("completed_by_id", flat=True).first()
    if found is not None and found != request.user.id:
        return "change another user's annotation"
    return None


def own_draft(request, role, kwargs):
    """A draft is one user's unsaved work (Label Studio does not check whose it is)."""
    from tasks.models import AnnotationDraft

    found = AnnotationDraft.objects.filter(pk=kwargs["pk"]).values_list("user_id", flat=True).first()
    if found is not None and found != request.user.id:
        return "change another user's draft"
    return None


def next_task(request, role, kwargs):
    """The Data Manager's actions are one endpoint: the label stream's next task is one of them, the rest
    (deleting tasks, annotations, predictions ...) are the manager's."""
    if request.GET.get("id") != "next_task":
        return "run this Data Manager action"
    return None


def anyone(request, role, kwargs):
    return None


# What the labelling interface writes for a labeller, found in Label Studio 1.23.2's frontend (web/dist's
# source maps: libs/datamanager/src/sdk/api-config.js and lsf-sdk.js, apps/labelstudio's
# pages/DataManager): (namespace, view name) -> methods and what else must hold.
LABELLER_WRITES = {
    # "Submit" and "Skip" (was_cancelled) of a task: POST /api/tasks/<id>/annotations/
    ("tasks:api", "task-annotations"): ({"POST"}, annotation_written),
    # "Update", skip of a submitted one, "Delete": /api/annotations/<id>/ (reviewers edit any)
    ("tasks:api-annotations", "annotation-detail"): (EDIT | {"DELETE"}, annotation_written),
    # "Unskip": the skipped annotation back into a draft (it deletes the annotation)
    ("tasks:api-annotations", "annotation-convert-to-draft"): ({"POST"}, own_annotation),
    # drafts, saved as one labels: of a new annotation, of an edit of a submitted one; then updated, deleted
    ("tasks:api", "task-drafts"): ({"POST"}, anyone),
    ("tasks:api", "task-annotations-drafts"): ({"POST"}, anyone),
    ("tasks:api-drafts", "draft-detail"): (EDIT | {"DELETE"}, own_draft),
    # "Label All Tasks" and each next task of the stream: POST /api/dm/actions/?id=next_task
    ("data_manager", "dm-actions"): ({"POST"}, next_task),
    # the Data Manager's tabs: it saves the selected one as it opens and on each change (columns, filters,
    # ordering, selection), makes one when a project has none, reorders them; deleting is the manager's
    ("data_manager:api", "view-list"): ({"POST"}, anyone),
    ("data_manager:api", "view-detail"): (EDIT, anyone),
    ("data_manager:api", "view-update-order"): ({"POST"}, anyone),
    # labels a labeller adds themselves where the configuration lets them (Taxonomy's user labels),
    # saved with each submit
    ("labels_manager:api-labels", "label-list"): ({"POST"}, anyone),
    # one's own settings: hotkeys, the product tour's "seen"
    ("", "current-user-hotkeys"): (EDIT, anyone),
    ("", "product-tour"): (EDIT, anyone),
}


def hidden(match, path: str):
    """What a non-manager may not even read, as a noun for the refusal; None when they may."""
    for prefix, what in MANAGERS_SEE_PATHS.items():
        if path.startswith(prefix):
            return what
    if match is None:
        return None
    for namespace, what in MANAGERS_SEE_NAMESPACES.items():
        if match.namespace == namespace or match.namespace.startswith(namespace + ":"):
            return what
    return MANAGERS_SEE_VIEWS.get(match.url_name)


def resolved(path: str):
    """The view a path goes to; the same with the trailing slash Label Studio's API client leaves off (its
    CommonMiddleware then serves the path with it); None for neither."""
    for candidate in (path,) if path.endswith("/") else (path, path + "/"):
        try:
            return resolve(candidate)
        except Resolver404:
            continue
    return None


def decide(request, role: str, match):
    """None when a non-manager's `role` may do this request, else what it may not do (for the refusal)."""
    what = hidden(match, request.path_info)
    if what is not None:
        return f"see {what}"
    if request.method in SAFE:
        return None
    rule = LABELLER_WRITES.get((match.namespace, match.url_name)) if match is not None else None
    if rule is None or request.method not in rule[0]:
        return f"do this ({request.method} {request.path_info}): it is for the project's managers"
    return rule[1](request, role, match.kwargs)


def accepted(pk) -> None:
    """A reviewer's update of an annotation accepts it: the task's ground truth (one a task, as Label
    Studio keeps it), unless it is a skip."""
    from tasks.models import Annotation

    found = Annotation.objects.filter(pk=pk, was_cancelled=False).values_list("task_id", flat=True).first()
    if found is None:
        return
    Annotation.objects.filter(task_id=found).exclude(pk=pk).update(ground_truth=False)
    Annotation.objects.filter(pk=pk).update(ground_truth=True)


class Roles:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        role = request.workspace_role  # sign_in.py refuses a team request without one
        if role == "manager":
            return self.get_response(request)
        match = resolved(request.path_info)
        if request.method in SAFE and match is not None and (match.namespace, match.url_name) == ML_LIST:
            # asked as the Data Manager opens (interactive pre-labelling); a refusal there would be an error
            # on every labeller's screen: none to see
            return JsonResponse([], safe=False)
        what = decide(request, role, match)
        if what is None:
            response = self.get_response(request)
            if role == "reviewer" and request.method in EDIT and response.status_code == 200 and match is not None:
                if (match.namespace, match.url_name) == ANNOTATION:
                    accepted(match.kwargs["pk"])
            return response
        article = "An" if role[0] in "aeiou" else "A"
        return JsonResponse({"detail": f"{article} {role} may not {what}."}, status=403)
