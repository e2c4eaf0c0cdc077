"""A pytest plugin for the GPU run's operator suites (-p case_log, with this folder on PYTHONPATH).

It appends to the file CASE_LOG names, as each case ends, its outcome and, for a failure, its message and
what it printed. pytest-xdist's controller writes these, so they survive a worker that dies and a suite
stopped at its time limit, where pytest's own summary and JUnit file would be lost.

It also takes over pytest-timeout's per-case timer in each worker: a case still running at its limit gets
its Python stacks and, where cuda-gdb is installed, its native stacks appended, and then its worker exits,
so xdist records the case as failed and starts a new worker for the next case.
"""

import faulthandler
import os
import shutil
import subprocess
import tempfile
import threading

import pytest

_TIMER = pytest.StashKey[threading.Timer]()


def _log():
    return open(os.environ["CASE_LOG"], "a", encoding="utf-8")  # each caller closes it


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """One line `CASE: PHASE OUTCOME[: MESSAGE]`, then a failure's whole report and output, indented."""
    if "PYTEST_XDIST_WORKER" in os.environ or (report.when != "call" and report.passed):
        return
    with _log() as log:
        if not report.failed:
            log.write(f"{report.nodeid}: {report.when} {report.outcome}\n")
            return
        crash = getattr(report.longrepr, "reprcrash", None)
        # the exception's first line; a worker that died leaves only a text, whose last line says so
        first = crash.message.splitlines()[:1] if crash else report.longreprtext.strip().splitlines()[-1:]
        log.write(f"{report.nodeid}: {report.when} failed: {''.join(first)}\n")
        text = [report.longreprtext] + [f"--- {section}\n{body}" for section, body in report.sections]
        log.write("".join(f"    {line}\n" for block in text for line in block.splitlines()))


def _stuck(nodeid: str, seconds: float) -> None:
    # The stacks are gathered first and appended in one write, so that the stacks of workers stuck at the
    # same time do not interleave in the log (cuda-gdb takes seconds).
    with tempfile.TemporaryFile("w+", encoding="utf-8") as stacks:
        faulthandler.dump_traceback(stacks, all_threads=True)
        stacks.flush()
        if shutil.which("cuda-gdb"):
            subprocess.run(["cuda-gdb", "-q", "-batch", "-p", str(os.getpid()), "-ex", "thread apply all bt 25"],
                           stdout=stacks, stderr=subprocess.STDOUT, timeout=90, check=False)
        stacks.seek(0)
        text = f"{nodeid} is still running after {seconds:g} s: its stacks follow, then its worker exits\n"
        text += stacks.read()
    log = os.open(os.environ["CASE_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(log, text.encode())
    os.close(log)
    os._exit(1)


@pytest.hookimpl(tryfirst=True)  # before pytest-timeout's own timer
def pytest_timeout_set_timer(item: pytest.Item, settings) -> bool:
    timer = threading.Timer(settings.timeout, _stuck, args=(item.nodeid, settings.timeout))
    timer.daemon = True
    timer.start()
    item.stash[_TIMER] = timer
    return True


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_cancel_timer(item: pytest.Item) -> bool:
    item.stash[_TIMER].cancel()
    return True
