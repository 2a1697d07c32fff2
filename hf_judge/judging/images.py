"""Image variables: which template variables are images, and how an image becomes a request.

An image goes to the judge the OpenAI way, as a content part of the user
message, ``{"type": "image_url", "image_url": {"url": ...}}``: a ``data:`` URL
holding the image's own bytes (base64), or the http(s) URL a column holds. The
request body, and so the cache key, is then a function of the image bytes,
whatever process read them. A variable is an image when the prompt file
declares it (``images: [image]``) or when its column is a ``datasets.Image``
(or a list of them); image columns are read undecoded (``{"bytes", "path"}``),
so Pillow is not needed and no image is decoded and encoded again.

Example:
    >>> image_url({"bytes": b"\\x89PNG\\r\\n\\x1a\\n...", "path": None})[:22]
    'data:image/png;base64,'
    >>> image_url("https://example.org/cat.jpg")
    'https://example.org/cat.jpg'
"""

from __future__ import annotations

import base64
import logging
import os
import re
import secrets
import stat
from typing import Any

from ..errors import ConfigError, TemplateError

logger = logging.getLogger("hf_judge")

# Magic bytes of the formats OpenAI-compatible servers take as image parts.
_MAGIC = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
_URL = re.compile(r"^(https?://|data:image/)", re.I)
_TEXT = ("string", "large_string")
_BYTES = ("binary", "large_binary")
# Where an image goes in the rendered user message: a marker no row value can
# spell by chance (a per-process nonce), split out after rendering.
_NONCE = f"{secrets.randbits(60):018d}"  # digits: no filter changes their case
_MARK = re.compile(f"\x1eimage-{_NONCE}-(\\d+)\x1e")
_DATA_URL = re.compile(rb"data:image/[a-z]+;base64,[A-Za-z0-9+/=]*")
# The most bytes of one image hf-judge sends (or reads from a file): OpenAI's own limit per image,
# 20 MB. A larger image is a bad_image row; a file is read no further than this, so a path to
# /dev/zero or to a huge file costs at most this much memory.
MAX_IMAGE_BYTES = 20 * 1024 * 1024
_FORMATS = "PNG, JPEG, GIF, WebP"
# The data: URL types a judge takes (image/jpg: a common misspelling of image/jpeg).
_DATA_TYPES = ("png", "jpeg", "jpg", "gif", "webp")
_DATA_TYPE = re.compile(r"^data:image/([^;,]*)", re.I)
# Tokens an image costs a judge, for the tokens-per-minute limit: OpenAI's
# high-detail image of up to 2048 px is 85 + 170 per 512 px tile, at most ~1,100.
IMAGE_TOKENS = 1_000


class ImageValueError(ValueError):
    """A row's value of an image variable that cannot be sent as an image."""


def mime_type(data: bytes) -> str | None:
    """The image type of ``data`` from its magic bytes, if a judge can take it.

    Only the bytes count: a file named ``x.png`` that holds anything else is not
    a PNG, and a judge sent it as one would fail or answer about nothing.

    Example:
        >>> mime_type(b"GIF89a..."), mime_type(b"BM..."), mime_type(b"not a png")
        ('image/gif', None, None)
    """
    for magic, mime in _MAGIC:
        if data.startswith(magic):
            return mime
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def _data_url(data: bytes, what: str = "the image") -> str:
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageValueError(f"{what} is over {MAX_IMAGE_BYTES:,} bytes, the most a judge takes; make it smaller")
    mime = mime_type(data)
    if mime is None:  # its bytes are not named: they may be a file's contents, and errors go to the Hub
        raise ImageValueError(f"{what} is not a recognised image ({_FORMATS}); convert it before scoring")
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


def _checked_url(url: str) -> str:
    """``url`` if a judge can take it: a data: URL must hold one of the formats, within the size limit."""
    found = _DATA_TYPE.match(url)
    if found is None:
        return url
    if found.group(1).lower() not in _DATA_TYPES:
        raise ImageValueError(f"a data: URL of image/{found.group(1)[:20]} is not a recognised image ({_FORMATS})")
    if len(url) > MAX_IMAGE_BYTES * 4 // 3 + 100:  # base64: 4 characters per 3 bytes, and the header
        raise ImageValueError(f"the data: URL holds over {MAX_IMAGE_BYTES:,} bytes, the most a judge takes")
    return url


def _read_file(path: str) -> bytes:
    """The file's bytes, reading at most MAX_IMAGE_BYTES + 1 (then _data_url refuses them)."""
    what = f"the image file {path!r}"
    try:
        # O_NONBLOCK: opening a FIFO must not wait for a writer (it then is refused as no regular file).
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError as e:
        raise ImageValueError(f"cannot read {what}: {e.strerror or e}") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ImageValueError(f"{what} is not a regular file (a device, a pipe or a folder)")
    with open(fd, "rb") as f:
        try:
            return f.read(MAX_IMAGE_BYTES + 1)
        except OSError as e:
            raise ImageValueError(f"cannot read {what}: {e.strerror or e}") from None


def image_url(value: Any) -> str:
    """The URL to send for one image value: a ``datasets.Image`` dict, image bytes or a URL string.

    An image over MAX_IMAGE_BYTES (20 MiB), or in another format than PNG, JPEG,
    GIF or WebP (an SVG included), raises ImageValueError: the row is ``bad_image``.

    Example:
        >>> image_url("data:image/svg+xml,<svg/>")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        hf_judge.judging.images.ImageValueError: a data: URL of image/svg+xml is not a recognised image (...)
    """
    if isinstance(value, str):
        if _URL.match(value):
            return _checked_url(value)
        raise ImageValueError(f"{value[:60]!r} is not an http(s) or data: URL")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _data_url(bytes(value))
    if isinstance(value, dict) and ("bytes" in value or "path" in value):
        data, path = value.get("bytes"), value.get("path")
        if data is not None:
            return _data_url(bytes(data))
        if isinstance(path, str) and _URL.match(path):
            return _checked_url(path)
        if path:
            return _data_url(_read_file(path), f"the image file {path!r}")
        raise ImageValueError("the image has neither bytes nor a path")
    raise ImageValueError(
        f"a {type(value).__name__} is not an image (expected image bytes, a datasets.Image value or a URL)"
    )


def image_urls(value: Any) -> list[str]:
    """The URLs of one row's value: one image, or each image of a list of them.

    Example:
        >>> image_urls(["https://example.org/a.png", None, "https://example.org/b.png"])
        ['https://example.org/a.png', 'https://example.org/b.png']
    """
    if isinstance(value, (list, tuple)):
        return [image_url(v) for v in value if v is not None]
    return [image_url(value)]


def prompt_tokens_estimate(body: bytes) -> float:
    """The prompt tokens of a request body, roughly: a token per 4 bytes of text, IMAGE_TOKENS per image.

    An image's base64 bytes are not text: counted as such, one photo would take
    a whole second's budget of a tokens-per-minute limit.

    Example:
        >>> prompt_tokens_estimate(b'{"content":"' + b"x" * 400 + b'"}')
        103.5
    """
    if b'"image_url"' not in body:
        return len(body) / 4
    images = body.count(b'"image_url":{')
    return len(_DATA_URL.sub(b"", body)) / 4 + images * IMAGE_TOKENS


def _kind(feature: Any) -> str | None:
    """'image' for an image feature or a list of them; 'text'/'bytes' for columns that may hold images; else None."""
    from datasets import Image, Value  # here, not at import: `hf-judge metrics` must not load datasets

    inner = getattr(feature, "feature", None)  # List, LargeList, Sequence (datasets 3)
    if inner is not None:
        feature = inner
    if isinstance(feature, Image):
        return "image"
    if isinstance(feature, Value) and feature.dtype in _TEXT:
        return "text"
    if isinstance(feature, Value) and feature.dtype in _BYTES:
        return "bytes"
    return None


def image_variables(metric: Any, columns: dict[str, str | None], features: dict[str, Any]) -> frozenset[str]:
    """The variables of ``metric`` to send as images on a split with ``features``.

    Declared ones (``images:`` in the front matter) and every variable bound to
    a ``datasets.Image`` column. Raises a ConfigError when a declared image is
    bound to a column that cannot hold one, or when an image variable is used
    where the renderer cannot place it (a filter, an expression, the system prompt).
    """
    found = set()
    for var, col in columns.items():
        if col is None:
            continue
        kind = _kind(features.get(col))
        if var in metric.images:
            if kind is None:
                raise ConfigError(
                    f"metric {metric.name} sends {var!r} as an image, but column {col!r} holds "
                    f"{_describe(features.get(col))}. "
                    f"Map {var!r} to a datasets.Image column, a column of http(s) URLs or of image bytes "
                    f"(columns={{'{var}': '<column>'}})."
                )
            found.add(var)
        elif kind == "image":
            found.add(var)
    for var in sorted(found):
        problem = metric.image_misuse.get(var)
        if problem:
            raise TemplateError(
                f"prompt {metric.name}: image variable {var!r} is used {problem}. An image can only stand on its own, "
                f"as {{{{ {var} }}}} where it goes in the user message (or in a test like {{% if {var} %}})."
            )
    return frozenset(found)


def _describe(feature: Any) -> str:
    from datasets import Value

    if isinstance(feature, Value):
        return feature.dtype
    return type(feature).__name__ if feature is not None else "nothing"


def mark(urls: list[str], marks: list[str]) -> str:
    """The text that stands for ``urls`` while the template renders; ``marks`` collects them."""
    out = []
    for url in urls:
        out.append(f"\x1eimage-{_NONCE}-{len(marks)}\x1e")
        marks.append(url)
    return "".join(out)


def split_parts(text: str, marks: list[str], where: str) -> str | list[dict[str, Any]]:
    """The rendered user message as content parts: text and images in template order.

    With no image in it the message stays a plain string, as a text-only one is.

    Example:
        >>> marks = []
        >>> split_parts("See " + mark(["https://x/a.png"], marks), marks, "prompt P")
        [{'type': 'text', 'text': 'See '}, {'type': 'image_url', 'image_url': {'url': 'https://x/a.png'}}]
    """
    pieces = _MARK.split(text)
    changed = f"{where}: an image variable was changed by the template; write it as {{{{ name }}}} alone"
    if len(pieces) == 1:
        if _NONCE in text:
            raise TemplateError(changed)
        return text
    parts: list[dict[str, Any]] = []
    for i, piece in enumerate(pieces):
        if i % 2:
            parts.append({"type": "image_url", "image_url": {"url": marks[int(piece)]}})
        elif piece.strip():
            if _NONCE in piece:
                raise TemplateError(changed)
            parts.append({"type": "text", "text": piece})
    return parts


def _image_columns(features: Any) -> list[str]:
    return [c for c, f in features.items() if _kind(f) == "image"]


def _gone(arr: Any, missing: set[str] | None) -> Any:
    """Per image of ``arr`` (an Image column's struct storage): path-only, and in ``missing`` (any, if None)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    path_only = pc.and_(pc.and_(arr.is_valid(), arr.field("bytes").is_null()), arr.field("path").is_valid())
    if missing is None:
        return path_only
    return pc.and_(path_only, pc.is_in(arr.field("path"), value_set=pa.array(sorted(missing), pa.string())))


def _nulled(arr: Any, missing: set[str]) -> Any:
    """``arr`` with each path-only image whose file is in ``missing`` set to null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
        return type(arr).from_arrays(arr.offsets, _nulled(arr.values, missing), type=arr.type, mask=arr.is_null())
    null = pc.or_(arr.is_null(), _gone(arr, missing))
    return pa.StructArray.from_arrays(
        [arr.field(i) for i in range(arr.type.num_fields)], fields=list(arr.type), mask=null
    )


def missing_image_files(ds: Any, batch_size: int = 10_000) -> set[str]:
    """The local files of path-only images of ``ds``'s Image columns that cannot be read.

    Only images without bytes are looked at (a dataset from the Hub has its
    bytes inside), and each distinct file once.

    Example:
        >>> missing_image_files(ds)  # doctest: +SKIP
        {'pics/tmp.png'}
    """
    import pyarrow as pa
    import pyarrow.compute as pc
    from datasets.utils.file_utils import is_local_path

    cols = _image_columns(ds.features)
    if not cols or len(ds) == 0:
        return set()
    seen: dict[str, bool] = {}
    for table in ds.select_columns(cols).with_format("arrow").iter(batch_size):
        for col in cols:
            arr = table[col].combine_chunks()
            while pa.types.is_list(arr.type) or pa.types.is_large_list(arr.type):
                arr = arr.flatten()
            for path in pc.unique(pc.filter(arr.field("path"), _gone(arr, None))).to_pylist():
                if path not in seen:
                    seen[path] = not is_local_path(path) or (os.path.isfile(path) and os.access(path, os.R_OK))
    return {p for p, ok in seen.items() if not ok}


def saveable(ds: Any) -> Any:
    """``ds`` as ``save_to_disk`` can write it: path-only images whose file cannot be read set to null.

    ``save_to_disk`` embeds each path-only image's file into the saved copy, and
    one file gone would fail the save and lose every score of the run. That
    row's image could not be sent either: it has a ``bad_image`` error row.
    A warning names the files. Nothing is copied when every file is there.

    Example:
        >>> saveable(scored["train"]).save_to_disk("out/train")  # doctest: +SKIP
    """
    missing = missing_image_files(ds)
    if not missing:
        return ds
    cols = _image_columns(ds.features)
    names = sorted(missing)
    logger.warning(
        "%d image file(s) of column(s) %s cannot be read, e.g. %s; the saved copy holds no image there "
        "(the rows' scores and error rows are saved)",
        len(names),
        ", ".join(cols),
        ", ".join(names[:5]),
    )

    def null_missing(table: Any) -> Any:
        for col in cols:
            i = table.schema.get_field_index(col)
            table = table.set_column(i, col, _nulled(table[col].combine_chunks(), missing))
        return table

    fmt = ds.format
    out = ds.with_format("arrow").map(null_missing, batched=True, features=ds.features, desc="Dropping missing images")
    return out.with_format(
        fmt["type"], columns=fmt["columns"], output_all_columns=fmt["output_all_columns"], **fmt["format_kwargs"]
    )
