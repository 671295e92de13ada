"""Pod sources (manifest files, a manifest URL, the API server) and the PodConfig merge.

``run.open_sources`` is the entry: the merge task first, then each configured source::

    config = await nursery.start(open_sources, options, api)
    # the syncLoop reads config.updates; housekeeping waits for
    # config.seen_all_sources(the sources whose updates the loop has handled)
"""

from .file import FileSource
from .podconfig import (
    ALL_SOURCE,
    API_SOURCE,
    FILE_SOURCE,
    HTTP_SOURCE,
    PodConfig,
    PodOperation,
    PodStorage,
    PodUpdate,
    UpdateSink,
)
from .run import open_sources
from .static import ManifestError, load_manifest, load_pod
from .url import URLSource

__all__ = [
    "ALL_SOURCE",
    "API_SOURCE",
    "FILE_SOURCE",
    "HTTP_SOURCE",
    "FileSource",
    "ManifestError",
    "PodConfig",
    "PodOperation",
    "PodStorage",
    "PodUpdate",
    "URLSource",
    "UpdateSink",
    "load_manifest",
    "load_pod",
    "open_sources",
]
