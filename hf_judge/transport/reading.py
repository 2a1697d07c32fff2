"""Reading a reply's body with a bound on its size (``max_reply_bytes``), on the wire and decompressed."""

from __future__ import annotations

from collections.abc import Mapping

import aiohttp

__all__ = ["ReplyTooLarge", "read_limited"]


class ReplyTooLarge(Exception):
    status = 0  # the HTTP status of the reply that was cut off, and its headers
    headers: Mapping[str, str] | None = None


async def read_limited(resp: aiohttp.ClientResponse, limit: int) -> bytes:
    """The body, or :class:`ReplyTooLarge` as soon as it passes ``limit`` bytes.

    Both sizes are bounded: the bytes on the wire (``Content-Length`` up front,
    then as they come) and the bytes after aiohttp's decompression, which it
    does a bounded piece at a time, so a gzip bomb never expands in one go.
    """
    declared = resp.content_length
    if declared is not None and declared > limit:
        raise ReplyTooLarge(f"Content-Length {declared:,}")
    content = resp.content
    chunks = []
    size = 0
    while True:
        chunk = await content.readany()
        if not chunk:
            break
        size += len(chunk)
        if size > limit or content.total_raw_bytes > limit:
            raise ReplyTooLarge(f"over {limit:,} bytes read")
        chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
