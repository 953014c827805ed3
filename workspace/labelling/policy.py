"""What a course's labelling projects may take (the service's configuration, `LabellingPolicy`)."""

from __future__ import annotations

from traitlets import Float, Integer, Unicode
from traitlets.config import LoggingConfigurable

from workspace.sizes import parse_bytes


class LabellingPolicy(LoggingConfigurable):
    """A course's labelling projects (#36): the image of their Label Studios and what each may take."""

    image = Unicode(
        "workspace-labelling:latest",
        config=True,
        help="""The image of the courses' Label Studios: the labelling image (images/labelling), whose
        `workspace-label-studio-team` runs Label Studio for a team.""",
    )
    max_per_course = Integer(
        20,
        min=0,
        config=True,
        help="""How many labelling projects one course may have; each runs a Label Studio of its own.""",
    )
    memory = Unicode(
        "2G",
        config=True,
        help="""The memory of one project's Label Studio (its container's limit, swap included).""",
    )
    cpus = Float(1.0, min=0.1, config=True, help="""The CPUs one project's Label Studio may use.""")
    pids = Integer(512, min=64, config=True, help="""The processes and threads one project's Label Studio may run.""")
    data_limit = Unicode(
        "5G",
        config=True,
        help="""The most one project's Label Studio may keep (its database, imports and exports), a size
        limit of its folder in the home store where the store enforces one (btrfs).""",
    )

    def limits(self) -> dict:
        return {
            "memory": parse_bytes(self.memory),
            "cpus": self.cpus,
            "pids": self.pids,
            "data": parse_bytes(self.data_limit),
        }
