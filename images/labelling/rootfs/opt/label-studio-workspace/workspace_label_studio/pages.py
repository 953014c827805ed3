"""The one absolute address Label Studio's pages need, made from the request.

Its browser app reads APP_SETTINGS.hostname with `new URL(...)`, which refuses a path; the stored links
stay paths (settings.py). Each page gets its request's origin and the prefix.
"""

from core.context_processors import settings as label_studio_settings
from django.conf import settings as django_settings


class _Settings:
    """Django's settings, with HOSTNAME absolute for this request."""

    def __init__(self, hostname: str):
        self.HOSTNAME = self.FRONTEND_HOSTNAME = hostname

    def __getattr__(self, name):
        return getattr(django_settings, name)


def settings(request) -> dict:
    context = label_studio_settings(request)
    context["settings"] = _Settings(request.build_absolute_uri(django_settings.PREFIX).rstrip("/"))
    return context
