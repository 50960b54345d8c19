"""The pipe to the tuning process: a wait for its answer that Ctrl-C ends wherever the kernel
delivers the signal (backends/worker_link.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

# The main thread waits for an answer that never comes; SIGINT goes to another thread of the
# process, as the kernel may deliver a Ctrl-C (the reader's or wgpu's poller thread). It is sent
# once the main thread is inside the wait (its frames say so), so nothing depends on timing. A
# wait that only a signal on the main thread could end would hang here: HANG_GUARD ends it then.
SCRIPT = textwrap.dedent("""
    import queue, signal, sys, threading, time
    from wgtune.backends.worker_link import WorkerLink
    # Ctrl-C as a terminal's process has it (a runner in the background passes SIGINT on ignored).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    link = WorkerLink.__new__(WorkerLink)  # only its queue: no process to start
    link.answers = queue.Queue()
    bystander = threading.Thread(target=time.sleep, args=(600,), daemon=True)
    bystander.start()
    main = threading.main_thread().ident

    def waiting() -> bool:
        frame = sys._current_frames().get(main)
        while frame is not None:
            if frame.f_code.co_name == "receive":
                return True
            frame = frame.f_back
        return False

    def interrupt():
        while not waiting():
            time.sleep(0.01)
        signal.pthread_kill(bystander.ident, signal.SIGINT)

    threading.Thread(target=interrupt, daemon=True).start()
    try:
        link.receive({seconds})
    except KeyboardInterrupt:
        print("interrupted")
    else:
        print("returned")
""")
HANG_GUARD = 120


def _run(seconds: str) -> str:
    done = subprocess.run([sys.executable, "-c", SCRIPT.format(seconds=seconds)], capture_output=True, text=True,
                          timeout=HANG_GUARD)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_ctrl_c_delivered_to_another_thread_ends_a_wait_with_no_limit():
    assert _run("float('inf')") == "interrupted"


def test_ctrl_c_delivered_to_another_thread_ends_a_wait_with_an_hour_left():
    assert _run("3600.0") == "interrupted"


def test_a_wait_with_no_answer_ends_with_none_after_its_seconds():
    script = ("import queue; from wgtune.backends.worker_link import WorkerLink; "
              "link = WorkerLink.__new__(WorkerLink); link.answers = queue.Queue(); "
              "link.answers.put(('ready',)); print(link.receive(0.0), link.receive(0.3))")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=HANG_GUARD)
    assert done.stdout.split() == ["('ready',)", "None"], done.stderr
