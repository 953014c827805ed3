"""Every export a user downloads is kept in the home too: ~/label-studio-exports/<project>/<file>.

Label Studio hands an export (JSON, COCO, YOLO, Pascal VOC ...) to the browser and keeps only its JSON
snapshots, under cryptic names. In a workspace the labels are wanted where the work is: in the home,
saved with it when the workspace stops, and made a dataset version from that execution's output in one
step (the platform's "dataset from output"). The file is written beside the download as it streams, under
a temporary name renamed at its end (a download cut short leaves nothing).

Not in team mode (a course's shared Label Studio, settings.py does not install this): it has no home, the
platform takes the manager's export itself (its dataset version is made from that download), and a copy
beside Label Studio's own snapshot would only fill the project's size-limited data folder.
"""

import os
import re
import tempfile

EXPORTS = os.path.join(os.path.expanduser("~"), "label-studio-exports")
# Label Studio's two download views: the export dialog's, and a snapshot's converted file
VIEWS = {"project-export", "project-exports-download"}


def folder_of(project) -> str:
    """A project's folder: its id and title, in characters every shell and archive takes."""
    title = re.sub(r"[^A-Za-z0-9._-]+", "-", project.title).strip("-.")[:60] or "project"
    return os.path.join(EXPORTS, f"{project.id}-{title}")


def file_name(response, export_type: str) -> str:
    """Label Studio's own file name (the project, the time, a hash) with the format in it."""
    sent = os.path.basename(str(response.get("filename") or "export"))
    stem, _, ext = sent.rpartition(".")
    return f"{stem}-{export_type}.{ext}" if stem else f"{sent}-{export_type}"


def kept(chunks, folder: str, name: str):
    """Pass the download's chunks on, writing them to folder/name as they go."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    fd, partial = tempfile.mkstemp(prefix=".partial-", dir=folder)
    done = False
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                out.write(chunk)
                yield chunk
        os.replace(partial, os.path.join(folder, name))
        done = True
    finally:
        if not done:
            os.unlink(partial)


class KeepExports:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        if response.status_code != 200 or match is None or match.url_name not in VIEWS:
            return response
        from projects.models import Project

        project = Project.objects.filter(pk=match.kwargs.get("pk")).first()
        export_type = (request.GET.get("exportType") or request.GET.get("export_type") or "JSON").upper()
        if project is None or not re.fullmatch(r"[A-Z0-9_]{1,40}", export_type):
            return response
        name = file_name(response, export_type)
        if response.streaming:
            response.streaming_content = kept(response.streaming_content, folder_of(project), name)
        else:
            response.content = b"".join(kept([response.content], folder_of(project), name))
        return response
