"""A course's shared Label Studio made ready before it serves (team mode; workspace-label-studio-team runs it).

What the platform's labelling project is, in Label Studio: the organization (made as the manager's), ONE
project (its title and labelling configuration from the environment, each task labelled once, tasks in
the dataset's order), a Data Manager tab (labellers' browsers would otherwise each make one as they first
open it, all at once), and a local-files storage over the dataset version mounted at
WORKSPACE_LABEL_STUDIO_SOURCE (its images, read where they are, served by Label Studio), synced.

Idempotent: each piece is made when missing, so a later start (the container restarted, a newer image)
finds them and only syncs the storage again (a version does not change: nothing new, in a second). The
title and configuration are the first start's; the manager changes them in Label Studio after that.
"""

import os

from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.migrations.executor import MigrationExecutor

# What a dataset version's images are named, any case; not hidden files (macOS leaves ._x.jpg beside x.jpg).
# Label Studio matches it against each file's name, below the folder at any depth (recursive scan).
IMAGES = r"(?i)[^.].*\.(jpe?g|png|gif|bmp|webp|tiff?|avif)$"


class Command(BaseCommand):
    help = "Make the team's organization, project, Data Manager tab and dataset storage; sync the storage."

    def handle(self, *args, **options):
        env = {
            name: os.environ.get(f"WORKSPACE_LABEL_STUDIO_{name}", "")
            for name in ("MANAGER", "TITLE", "CONFIG", "SOURCE")
        }
        missing = [f"WORKSPACE_LABEL_STUDIO_{name}" for name, value in env.items() if not value]
        if missing:
            raise CommandError(f"not set: {', '.join(missing)}")
        migrate()
        from workspace_label_studio.sign_in import user_of

        manager = user_of(env["MANAGER"])  # the organization's creator when it is made here
        project = project_of(manager, env["TITLE"], env["CONFIG"])
        tab_of(project, manager)
        storage = storage_of(project, env["SOURCE"])
        storage.sync()  # without Redis (none here), in this process
        storage.refresh_from_db()
        tasks = project.tasks.count()
        self.stdout.write(
            f"workspace_team_setup: project {project.id} {project.title!r}, storage {storage.id} over "
            f"{storage.path}: {storage.status}, {storage.last_sync_count or 0} new tasks, {tasks} in all"
        )
        if storage.status == storage.Status.FAILED:
            # Label Studio serves anyway: the manager sees the storage's error in its settings
            self.stderr.write(f"workspace_team_setup: the sync failed:\n{storage.traceback}")


def migrate():
    """A newer image's migrations, before anything here reads its tables (what `label-studio start` does)."""
    connection = connections[DEFAULT_DB_ALIAS]
    connection.prepare_database()
    executor = MigrationExecutor(connection)
    if executor.migration_plan(executor.loader.graph.leaf_nodes()):
        call_command("migrate", interactive=False, verbosity=0)


def project_of(manager, title: str, config: str):
    """The organization's one project, made as the API makes one (its checks of the title and of the
    configuration included) when there is none."""
    from projects.models import Project
    from projects.serializers import ProjectSerializer

    organization = manager.active_organization
    project = Project.objects.filter(organization=organization).order_by("id").first()
    if project is not None:
        return project
    made = ProjectSerializer(
        data={
            "title": title,
            "label_config": config,
            # one annotation per task: a task once labelled leaves the label stream; a reviewer fixes it
            "maximum_annotations": 1,
            "sampling": Project.SEQUENCE,
        },
        context={"created_by": manager},
    )
    if not made.is_valid():
        errors = "; ".join(f"{field}: {' '.join(map(str, said))}" for field, said in made.errors.items())
        raise CommandError(f"Label Studio refuses the project: {errors}")
    return made.save(organization=organization)


def tab_of(project, manager) -> None:
    """A Data Manager tab: its tabs are the organization's, shared; with none, every browser that opens the
    project makes one."""
    from data_manager.models import View

    if not View.objects.filter(project=project).exists():
        View.objects.create(project=project, user=manager, data={"title": "Tasks", "type": "list", "target": "tasks"})


def storage_of(project, source: str):
    """The project's local-files storage over the dataset, made (and checked: the path exists, under the
    document root, local files served) when there is none over that path."""
    from io_storages.localfiles.models import LocalFilesImportStorage

    path = os.path.normpath(source)
    storage = LocalFilesImportStorage.objects.filter(project=project, path=path).order_by("id").first()
    if storage is not None:
        return storage
    storage = LocalFilesImportStorage(
        project=project,
        title="Dataset",
        path=path,
        regex_filter=IMAGES,
        use_blob_urls=True,  # a task per image, its address Label Studio's own /data/local-files/?d=…
        recursive_scan=True,
    )
    try:
        storage.validate_connection()
    except ValidationError as e:
        raise CommandError(f"Label Studio refuses the storage over {path}: {' '.join(e.messages)}") from e
    storage.save()
    return storage
