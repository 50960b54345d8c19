"""The tab crash of issue 30, at its cause and in its evidence: with GWP-ASan forced on in every
process (whose stack walks crashed the tab while Pyodide ran Python on JSPI stacks) the page loads,
reloads and tunes, its Python off those stacks; and a crashed tab leaves its evidence (the dump,
the log's tail) for the test that met it."""

from __future__ import annotations

import struct
import time

import pytest
from harness import SMALL_TUNE, crash_dumps, crash_evidence, describe_dump, gwp_asan_args, launch, open_page, wait_ready
from playwright.sync_api import Error as PlaywrightError

GWP_ASAN_DENSE = gwp_asan_args("1.0")


def crash_a_tab(playwright, profile, args) -> tuple[bytes, str]:
    """A tab of a Chromium on ``profile`` crashed on purpose: its dump and the evidence."""
    began = time.time()
    context = launch(playwright, profile, args)
    try:
        with pytest.raises(PlaywrightError):
            context.new_page().goto("chrome://crash")
        # Crashpad reads the dead tab's memory from its own process: the browser must live until
        # the dump is written. A guard against a dump that never comes, not a measurement.
        for _ in range(1200):
            dumps = crash_dumps(began)
            if dumps:
                break
            time.sleep(0.1)
    finally:
        context.close()
    assert len(dumps) == 1, crash_evidence(began)
    return dumps[0].read_bytes(), crash_evidence(began)


def test_a_crashed_tab_leaves_its_dump_and_log(playwright, tmp_path):
    _dump, evidence = crash_a_tab(playwright, tmp_path / "profile", None)
    assert "renderer process, SIGSEGV code 1 at 0x0 on thread 'chromium'" in evidence, evidence
    assert "Intentionally crashing" in evidence  # the renderer's own last line, from the log


def test_the_page_loads_reloads_and_tunes_under_gwp_asan_in_every_process(playwright, server, tmp_path):
    # Before the page kept Python off JSPI stacks these flags crashed 10 of 10 loads, and with
    # ?stack-switching (Python on them again) 7 of 10 (bench/tab_crash.py): three loads here, each
    # with a tune, would meet it. The flags are what they say: GWP-ASan is in the renderer's dump.
    context = launch(playwright, tmp_path / "profile", GWP_ASAN_DENSE)
    try:
        page, _log = open_page(context, server.url)
        assert page.evaluate(SMALL_TUNE, "gwp_asan_first") == "Hit"
        page.reload()
        wait_ready(page)
        assert page.evaluate(SMALL_TUNE, "gwp_asan_reload") == "Hit"
        second, _log = open_page(context, server.url)
        assert second.evaluate(SMALL_TUNE, "gwp_asan_second_tab") == "Hit"
    finally:
        context.close()
    dump, _ = crash_a_tab(playwright, tmp_path / "profile-crash", GWP_ASAN_DENSE)
    assert b"gwp-asan-malloc" in dump  # GWP-ASan, where on, names its allocator in every dump


def minidump(signal: int, code: int, address: int, stack: tuple[int, int], thread_name: str) -> bytes:
    """A minidump with what ``describe_dump`` reads: the exception, the thread list, the names."""
    tid = 7
    name = struct.pack("<I", 2 * len(thread_name)) + thread_name.encode("utf-16-le")
    header_size, directory_size = 32, 3 * 12
    exception_at = header_size + directory_size
    exception = struct.pack("<IIIIQQ", tid, 0, signal, code, 0, address) + bytes(152 + 8 + 8 - 32)
    threads_at = exception_at + len(exception)
    threads = struct.pack("<I", 1) + struct.pack("<IIIIQQII", tid, 0, 0, 0, 0, stack[0], stack[1], 0) + bytes(8)
    names_at = threads_at + len(threads)
    name_at = names_at + 4 + 12
    names = struct.pack("<I", 1) + struct.pack("<IQ", tid, name_at) + name
    directory = b"".join(struct.pack("<III", kind, size, rva) for kind, size, rva in (
        (6, len(exception), exception_at), (3, len(threads), threads_at), (24, len(names), names_at)))
    header = b"MDMP" + struct.pack("<IIIIIQ", 0xA793, 3, header_size, 0, 0, 0)
    return header + directory + exception + threads + names + b"ptype\x00\x00\x00\x08\x00\x00\x00renderer\x00"


def test_a_dump_says_the_signal_the_thread_and_where_the_fault_lies_against_the_threads_stack():
    # The crash of issue 30: a read at the very end of the stack the main thread was on.
    dump = minidump(11, 2, 0x20A5B7208000, (0x20A5B7205E80, 0x2180), "chromium")
    assert describe_dump(dump) == ("renderer process, SIGSEGV code 2 at 0x20a5b7208000 on thread 'chromium', "
                                   "+0 bytes past the end of its stack (captured from 0x20a5b7205e80)")
    elsewhere = describe_dump(minidump(5, 128, 0x1000, (0x20A5B7205E80, 0x2180), "Compositor"))
    assert elsewhere == "renderer process, SIGTRAP code 128 at 0x1000 on thread 'Compositor'"
    assert describe_dump(b"MDMP" + bytes(8)).startswith("not a minidump this can read")
