"""The bytes of the files ``wgtune serve`` sends, read once and shared by every response.

The server keeps an answer in memory until the client has taken it (``pooled_server.py``), so a
hundred slow readers of Pyodide's 9.6 MB WebAssembly would be a hundred copies of it if each
response read the file anew; here they hold one. A file is known by its identity and its
modification (device, inode, size, mtime): a changed file is read again, its old bytes dropped
once no response holds them.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from pathlib import Path

__all__ = ["FileBytes"]


class FileBytes:
    """Files' bytes by identity, the most recently used kept up to ``budget`` bytes in all; a file
    over ``largest`` bytes is read each time and not kept."""

    def __init__(self, budget: int = 64 << 20, largest: int = 32 << 20) -> None:
        self.budget, self.largest = budget, largest
        self._kept: OrderedDict[tuple, bytes] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def read(self, path: Path, stat: os.stat_result) -> bytes:
        """The bytes of ``path``, whose ``stat`` the caller took (its validators come from the same one)."""
        identity = (str(path), stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)
        with self._lock:
            kept = self._kept.get(identity)
            if kept is not None:
                self._kept.move_to_end(identity)
                return kept
        data = path.read_bytes()
        if len(data) != stat.st_size or len(data) > self.largest:  # changed since its stat, or too big to keep
            return data
        with self._lock:
            if identity not in self._kept:
                self._kept[identity] = data
                self._size += len(data)
            while self._size > self.budget:
                _, dropped = self._kept.popitem(last=False)
                self._size -= len(dropped)
            return self._kept.get(identity, data)

    def __len__(self) -> int:
        return len(self._kept)
