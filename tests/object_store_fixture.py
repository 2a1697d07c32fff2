"""The reply store's tests that are about its semantics run on each object store a user may give: S3 (moto),
Google Cloud Storage (gcp-storage-emulator) and Azure Blob Storage (Azurite), each through its own fsspec
package (s3fs, gcsfs, adlfs), whose listings, writes and errors differ."""

from __future__ import annotations

import pytest

_FIXTURE = {"s3": "s3", "gs": "gcs", "az": "azure"}


@pytest.fixture(params=list(_FIXTURE))
def object_store(request):
    """The loopback server of each scheme in turn, with this process's configuration pointed at it: ``bucket()``
    makes an empty bucket, ``env`` configures another process, ``options`` are the same as storage_options."""
    return request.getfixturevalue(_FIXTURE[request.param])
