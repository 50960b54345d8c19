"""What dead writers and old damage leave in a cache directory is cleaned up, and only that.

A writer killed mid-save leaves its temp file (``.<document>.<host>-<pid>.<random>.tmp``); set-aside
copies of damaged documents (``<document>.corrupt-<timestamp>``) pile up when damage keeps coming
back. Opening the directory removes temp files whose writer is gone or that are older than a
minute, and keeps the newest few copies of each document; a live writer's temp file stays.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from wgtune import DeviceIdentity
from wgtune.backends import file_store
from wgtune.backends.file_store import KEEP_CORRUPT, STALE_SECONDS, CacheDirectory, FileStore, namespace_for

LAVAPIPE = DeviceIdentity("mesa", "llvmpipe", "Mesa 24.0", "vulkan")
DOC = "doc--default--0.1.0--12345678.json"


def temp_name(pid: int, host: str | None = None) -> str:
    return f".{DOC}.{host or file_store._host_tag()}-{pid}.abcd1234.tmp"


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def age(path, seconds: float) -> None:
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_temp_files_of_dead_or_old_writers_are_removed_on_open_and_live_ones_kept(tmp_path):
    dead = tmp_path / temp_name(dead_pid())
    live = tmp_path / temp_name(os.getppid())  # our parent: alive, and not this process
    mine = tmp_path / temp_name(os.getpid())
    old_other_host = tmp_path / temp_name(1, host="0badc0de")
    fresh_other_host = tmp_path / temp_name(1, host="0badc0de").replace(".abcd", ".efgh")
    old_unnamed = tmp_path / f".{DOC}.x1y2z3.tmp"  # written by an older wgtune: age alone decides
    document = tmp_path / DOC
    for path in (dead, live, mine, old_other_host, fresh_other_host, old_unnamed, document):
        path.write_text("{}")
    for path in (old_other_host, old_unnamed):
        age(path, STALE_SECONDS + 5)
    CacheDirectory(tmp_path)
    left = {path.name for path in tmp_path.iterdir()}
    assert left == {live.name, mine.name, fresh_other_host.name, document.name}


def test_set_aside_copies_are_capped_to_the_newest_few_per_document(tmp_path):
    store = FileStore(tmp_path, namespace_for(LAVAPIPE))
    for attempt in range(KEEP_CORRUPT + 4):
        store.path.write_text(f"{{broken {attempt}")
        assert store.load() == []  # set aside each time
    copies = sorted(tmp_path.glob(store.path.name + ".corrupt-*"))
    assert len(copies) == KEEP_CORRUPT
    assert copies[-1].read_text() == f"{{broken {KEEP_CORRUPT + 3}"  # the newest kept
    other = tmp_path / "other.json.corrupt-20000101T000000000000Z"  # another document's copy stays
    other.write_text("x")
    CacheDirectory(tmp_path)
    assert other.exists() and len(list(tmp_path.glob(store.path.name + ".corrupt-*"))) == KEEP_CORRUPT


def test_a_write_leaves_no_temp_file_and_names_its_own_as_this_process(tmp_path, monkeypatch):
    seen = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (seen.append(os.path.basename(a)), real_replace(a, b))[1])
    store = FileStore(tmp_path, namespace_for(LAVAPIPE))
    from test_file_store import entry  # the file store's own fixture entries

    store.save(entry(1))
    assert [name for name in seen if name.endswith(".tmp")] and all(
        file_store._TEMP.match(name)["pid"] == str(os.getpid()) for name in seen if name.endswith(".tmp"))
    assert not list(tmp_path.glob("*.tmp"))


def test_opening_a_directory_that_is_a_file_or_missing_tidies_nothing_and_raises_nothing(tmp_path):
    (tmp_path / "file").write_text("x")
    CacheDirectory(tmp_path / "file")
    CacheDirectory(tmp_path / "missing")
    assert not (tmp_path / "missing").exists()
