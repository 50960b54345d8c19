"""HTTP caching for ``wgtune serve``: validators, conditional requests and Cache-Control per kind.

A page load needs about 14 MB (Pyodide's WebAssembly and standard library, the wheel). Without
validators a browser told ``no-cache`` downloads all of it again on every load; with them it asks
"still this one?" and gets a 304 of a few hundred bytes, and Chromium also keeps its compiled
WebAssembly for a response it had cached. Each kind of file gets the policy its URL allows:

- ``revalidate`` (the page's own files, Pyodide, the config): ``no-cache``: kept, but checked on
  every use, because their URLs stay the same when their contents change (Pyodide's URLs carry no
  version: a new pin must never meet an old ``pyodide.asm.wasm`` in the cache);
- ``immutable`` (the wheel, whose URL carries the digest of its bytes): kept a year, never
  checked: another wheel has another URL.

Validators follow RFC 9110: a strong ``ETag`` from the file's size and modification time (or the
digest of a generated body) and ``Last-Modified``; ``If-None-Match`` wins over
``If-Modified-Since`` when both are sent.
"""

from __future__ import annotations

import enum
import hashlib
import os
from dataclasses import dataclass
from email.utils import formatdate, parsedate_to_datetime

__all__ = ["CachePolicy", "Validators", "not_modified"]


class CachePolicy(enum.Enum):
    """How long a browser may keep a response without asking again: its ``Cache-Control``."""

    REVALIDATE = "no-cache"
    IMMUTABLE = "public, max-age=31536000, immutable"


@dataclass(frozen=True)
class Validators:
    """What identifies one version of a response: its ``ETag`` and, for a file, ``Last-Modified``."""

    etag: str
    modified: int | None = None  # seconds since the epoch, for a file

    @classmethod
    def of_file(cls, stat: os.stat_result) -> Validators:
        """A file's: from its size and modification time (as nginx does), no reading needed."""
        return cls(f'"{stat.st_size:x}-{stat.st_mtime_ns:x}"', int(stat.st_mtime))

    @classmethod
    def of_body(cls, body: bytes) -> Validators:
        """A generated response's: from the digest of its bytes."""
        return cls(f'"{hashlib.sha256(body).hexdigest()[:20]}"')

    def headers(self) -> dict[str, str]:
        """The response headers that carry them."""
        headers = {"ETag": self.etag}
        if self.modified is not None:
            headers["Last-Modified"] = formatdate(self.modified, usegmt=True)
        return headers


def _opaque(tag: str) -> str:
    """An entity tag without its weakness prefix: If-None-Match compares weakly (RFC 9110 13.1.2)."""
    tag = tag.strip()
    return tag[2:] if tag.startswith("W/") else tag


def not_modified(validators: Validators, if_none_match: str | None, if_modified_since: str | None) -> bool:
    """Whether a conditional GET or HEAD with these header values is answered with a 304."""
    if if_none_match is not None:
        wanted = [_opaque(tag) for tag in if_none_match.split(",")]
        return "*" in wanted or _opaque(validators.etag) in wanted
    if if_modified_since is None or validators.modified is None:
        return False
    try:
        since = parsedate_to_datetime(if_modified_since)
    except (TypeError, ValueError, IndexError, OverflowError):
        return False  # an unreadable date is ignored, as RFC 9110 says
    if since is None or since.tzinfo is None:
        return False
    return validators.modified <= since.timestamp()
