"""The JSON Lines records sink: what is written reads back; damage costs one line, not the file."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import textwrap
import time

from wgtune import Key, Trial, TuneRecord
from wgtune.backends.records import JsonlRecords, read_records


def record(n: int, stored: bool = True) -> TuneRecord:
    return TuneRecord(
        set_name="matmul",
        key=Key({"n": n, "dtype": "f32"}),
        checksum="c0ffee",
        winner=n % 2,
        trials=(Trial("tile8", 0.0125), Trial("tile16", 0.25 + n)),
        short_circuit="single candidate" if n == 2 else None,
        wall=1.5 * n,
        dry_run=n == 3,
        stored=stored,
    )


def test_write_then_read(tmp_path):
    path = tmp_path / "deep" / "er" / "records.jsonl"  # parent folders are made
    sink = JsonlRecords(path)
    written = [record(1), record(2, stored=False), record(3)]
    before = time.time()
    for r in written:
        sink.write(r)
    lines = path.read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(line)["kind"] == "autotune" for line in lines)
    rows = read_records(path)
    assert [r for _, r in rows] == written
    assert [env["effect"] for env, _ in rows] == ["changed", "observed", "changed"]
    assert all(before <= env["at"] <= time.time() for env, _ in rows)
    assert rows[0][0]["record"] == written[0].to_json()


def test_missing_file_has_no_records(tmp_path):
    assert read_records(tmp_path / "nothing.jsonl") == []


def test_unreadable_lines_are_skipped_with_a_warning(tmp_path, caplog):
    path = tmp_path / "records.jsonl"
    sink = JsonlRecords(path)
    sink.write(record(1))
    with open(path, "ab") as handle:
        handle.write(b"\x00\xffgarbage that is not json\n")
        handle.write(b'{"kind": "autotune", "record": {"table": "t"}}\n')  # lacks fields
        handle.write(b"[1, 2]\n\n")  # not an object; then a blank line, ignored
        handle.write(b'{"kind": "someday", "anything": 1}\n')  # another kind: skipped quietly
    sink.write(record(2))
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        rows = read_records(path)
    assert [r for _, r in rows] == [record(1), record(2)]
    [message] = [r.getMessage() for r in caplog.records if r.name == "wgtune"]  # one warning for them all
    assert "skipped 3 unreadable line(s)" in message and "line 2" in message


def test_a_line_cut_short_does_not_swallow_the_next(tmp_path, caplog):
    path = tmp_path / "records.jsonl"
    sink = JsonlRecords(path)
    sink.write(record(1))
    with open(path, "ab") as handle:
        handle.write(json.dumps({"kind": "autotune"}).encode()[:-4])  # a writer died mid-line
    sink.write(record(2))
    with caplog.at_level(logging.WARNING, logger="wgtune"):
        rows = read_records(path)
    assert "skipped 1" in caplog.text
    assert [r for _, r in rows] == [record(1), record(2)]


WORKER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from wgtune import Key, TuneRecord
    from wgtune.backends.records import JsonlRecords

    sink, worker, go = JsonlRecords(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    while not go.exists():
        time.sleep(0.001)
    for i in range(20):
        sink.write(TuneRecord("t", Key({"worker": worker, "i": i}), "c", 0, (), None, 0.1, False, True))
    """
)


def test_two_processes_append(tmp_path):
    path, go = tmp_path / "records.jsonl", tmp_path / "go"
    workers = [subprocess.Popen([sys.executable, "-c", WORKER, str(path), str(w), str(go)]) for w in range(2)]
    go.touch()
    for worker in workers:
        assert worker.wait(timeout=120) == 0
    keys = {(r.key.as_dict()["worker"], r.key.as_dict()["i"]) for _, r in read_records(path)}
    assert keys == {(w, i) for w in range(2) for i in range(20)}
