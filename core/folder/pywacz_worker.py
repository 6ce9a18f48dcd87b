"""One long-lived py-wacz process per Vellum process, for packaging snapshot after snapshot.

Starting Python and importing py-wacz costs about a tenth of a second (what only some of its
calls need is left until one is made, ``_STAND_INS``, and pkg_resources is never imported);
packaging and checking one snapshot's WACZ then takes some 50 ms. So the first job starts a
worker that imports py-wacz once and runs job after job, each a list of py-wacz command lines
(``wacz.main.main``) read as one JSON line on its stdin. Its own stdout carries only a "done"
line per job; what py-wacz prints goes to two files the job names, which core/folder/wacz.py
reads as it would a one-off process's output.

Like every tool Vellum runs, the worker is in its own process group, dies with its parent
(``setpriv --pdeathsig KILL``), and is killed, group and all, when a job runs past its timeout
or the actor is asked to stop; the next job starts a fresh one. It is also replaced every
``JOBS_PER_WORKER`` jobs, so nothing a job leaves behind in memory accumulates.
"""

from __future__ import annotations

import atexit
import contextlib
import enum
import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

from core.extractors.process import SETPRIV, CommandCancelled, cancel_requested, on_shutdown

JOBS_PER_WORKER = 200
POLL_SECONDS = 0.1
# A job step's first word for py-wacz's validate less its schema check (``run`` in _WORKER).
CHECK_CONTENTS = "check-contents"
NOISE_LINES = 20  # of what the worker printed outside py-wacz, kept to explain a failure
DEAD_OUTPUT_SECONDS = 5  # to read what a worker that died before its job printed

# Modules that py-wacz imports but only some of its calls use, each costly to import: a stand-in
# holds each one's place in sys.modules, and the first use of anything in it imports the real
# module, which takes the stand-in's place; the functions named for a module are those that
# ``from module import function`` binds as py-wacz imports, which must not import it. When one
# gives way, all do: the real module may import another's submodules (tldextract imports
# requests_file, which imports requests.adapters), which a stand-in, not a package, cannot hold.
# - frictionless (a fifth of a second) serves only the full validate's schema check, which a
#   job's check-contents leaves out.
# - requests (50 ms) serves only the services that sign and verify a WACZ's datapackage digest
#   (``requests.post``), which Vellum does not use: it signs its own manifest (core/folder/
#   signing.py). py-wacz imports it in every check all the same.
# - tldextract (with requests, 0.1 s: half of the worker's start before these two) serves only
#   surt's ``public_suffix`` option, which cdxj-indexer's SURT keys never ask for.
_STAND_INS = """\
import importlib, sys, types
_stand_ins = {}
def _stand_in(name, functions=()):
    module = _stand_ins[name] = types.ModuleType(name)
    def real():
        for other, stand_in in _stand_ins.items():
            if sys.modules.get(other) is stand_in:
                del sys.modules[other]
        return importlib.import_module(name)
    def forward(function):
        return lambda *args, **kwargs: getattr(real(), function)(*args, **kwargs)
    def attribute_of_real(attribute):  # PEP 562
        if attribute.startswith("__"):  # "from m import f" asks for __path__: not imported
            raise AttributeError(attribute)
        return getattr(real(), attribute)
    for function in functions:
        setattr(module, function, forward(function))
    module.__getattr__ = attribute_of_real
    sys.modules.setdefault(name, module)
_stand_in("frictionless", ["validate"])
_stand_in("requests")
_stand_in("tldextract")
"""

# The worker: first package and check a WACZ of one record in a scratch folder, silently
# (py-wacz's first run loads what its later ones reuse, time that would otherwise fall on the
# first snapshot); then, for each JSON job on stdin, run its steps as the one-off driver did (a
# marker line before each step on both streams, "<mark> <n> exit <code>" after it), then say
# "<mark> done". A step is a py-wacz command line, or ``[CHECK_CONTENTS, path]``: py-wacz's
# ``validate`` without frictionless's schema check of ``datapackage.json`` (core/folder/wacz.py
# says when that is enough).
_WORKER = (
    _STAND_INS
    + """\
import contextlib, io, json, os, tempfile, traceback
# pkg_resources, imported by pyamf (cdxj-indexer's AMF canonicalization) only to find its own
# adapters' folder, which it takes from its __file__ when the import fails, scans every
# installed distribution: 60 ms, a quarter of the worker's start. None makes the import fail.
sys.modules.setdefault("pkg_resources", None)
from wacz.main import main
from wacz.util import WACZ_VERSION
from wacz.validate import Validation
from warcio.warcwriter import WARCWriter
control = sys.stdout
def check_contents(path):
    validation = Validation(path)
    checks = [validation.check_required_contents, validation.check_file_paths,
              validation.check_file_hashes, validation.check_data_package_hash_and_sig]
    if validation.version != WACZ_VERSION or any(check() is False for check in checks):
        print("Validation failed, the passed WACZ is invalid")
        return 1
    print("Validation succeeded, the passed WACZ is valid")
    return 0
def run(args):
    return check_contents(args[1]) if args[0] == "check-contents" else main(args)
with tempfile.TemporaryDirectory() as scratch, open(os.devnull, "w") as quiet, \\
        contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(quiet):
    try:
        warc, wacz = os.path.join(scratch, "prime.warc.gz"), os.path.join(scratch, "prime.wacz")
        with open(warc, "wb") as stream:
            writer = WARCWriter(stream, gzip=True)
            writer.write_record(writer.create_warc_record(
                "urn:vellum:prime", "resource", payload=io.BytesIO(b"prime"),
                warc_content_type="text/plain"))
        main(["create", "-o", wacz, warc])
        check_contents(wacz)
    except BaseException:
        pass  # priming is only a head start: a real job reports what is wrong
for line in sys.stdin:
    job = json.loads(line)
    mark = job["mark"]
    os.chdir(job["cwd"])
    tempfile.tempdir = job["cwd"]  # py-wacz's scratch files: on the data's file system
    with open(job["stdout"], "w", encoding="utf-8") as out, \\
            open(job["stderr"], "w", encoding="utf-8") as err, \\
            contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        for number, args in enumerate(job["steps"]):
            print(f"{mark} {number}", flush=True)
            print(f"{mark} {number}", file=sys.stderr, flush=True)
            try:
                code = run(args)
            except SystemExit as exit:
                code = exit.code if isinstance(exit.code, int) else 1
            except Exception:
                traceback.print_exc()
                code = 1
            print(f"{mark} {number} exit {code or 0}", flush=True)
            if code and job["stop"]:
                break
    tempfile.tempdir = None
    control.write(f"{mark} done\\n")
    control.flush()
"""
)


class JobEnd(enum.Enum):
    """How a job ended: it ran to its end, ran past its timeout, or the worker died."""

    DONE = "done"
    TIMEOUT = "timeout"
    DIED = "died"


class WaczWorker:
    """A py-wacz worker process, started on the first job and replaced when it must be."""

    def __init__(self) -> None:
        self.process: subprocess.Popen | None = None
        self.owner = os.getpid()  # the process that started ``process``
        self.jobs = 0
        self.noise: list[str] = []  # recent lines the worker printed that were not "done"

    def run(
        self,
        *,
        mark: str,
        steps: list[list[str]],
        stop: bool,
        cwd: Path,
        stdout: Path,
        stderr: Path,
        timeout: float,
    ) -> JobEnd:
        """Run py-wacz ``steps`` in ``cwd``; their output goes to ``stdout`` and ``stderr``.

        ``stop`` ends the job at the first failing step. Raise CommandCancelled when the actor
        is asked to stop meanwhile (the worker is killed).
        """
        if self.jobs >= JOBS_PER_WORKER:
            self.close()
        self.warm_up()
        self.jobs += 1
        job = {"mark": mark, "steps": steps, "stop": stop, "cwd": str(cwd),
               "stdout": str(stdout), "stderr": str(stderr)}  # fmt: skip
        try:
            self.process.stdin.write((json.dumps(job) + "\n").encode())
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            # It died before it read the job (its imports failed, say): what it printed says
            # why, and is read to its end before the worker is let go.
            self._wait_for(f"{mark} done", min(timeout, DEAD_OUTPUT_SECONDS))
            self.close()
            return JobEnd.DIED
        return self._wait_for(f"{mark} done", timeout)

    def warm_up(self) -> None:
        """Start the worker now, if none runs, without waiting for it: its imports then overlap
        whatever the caller does before its first job (a snapshot's extractors)."""
        if self.process is None or self.process.poll() is not None:
            self.close()
            self._start()

    def close(self) -> None:
        """Stop the worker, if any (its whole process group), and wait for it. One that another
        process started (the parent this one was forked from) is that process's: it is only
        forgotten here."""
        if self.process is None:
            return
        if self.owner != os.getpid():
            self.process, self.jobs = None, 0
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        self.process, self.jobs = None, 0

    def _start(self) -> None:
        cmd = [sys.executable, "-c", _WORKER]
        if SETPRIV:
            cmd = [SETPRIV, "--pdeathsig", "KILL", "--", *cmd]
        self.owner = os.getpid()
        self.process = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,  # an import error says why the worker could not start
            start_new_session=True,
            env={**os.environ, "PYTHONUTF8": "1"},
        )
        self.noise = []

    def _wait_for(self, done: str, timeout: float) -> JobEnd:
        """Read the worker's output until the ``done`` line, its death or ``timeout``."""
        deadline = time.monotonic() + timeout
        buffer = b""
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            while True:
                if cancel_requested.is_set():
                    self.close()
                    raise CommandCancelled("stopped while packaging a WACZ")
                left = deadline - time.monotonic()
                if left <= 0:
                    self.close()
                    return JobEnd.TIMEOUT
                if not selector.select(min(POLL_SECONDS, left)):
                    continue
                chunk = os.read(self.process.stdout.fileno(), 65536)
                if not chunk:  # end of file: the worker is gone
                    self._keep_noise(buffer)
                    self.close()
                    return JobEnd.DIED
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if line.decode("utf-8", "replace") == done:
                        return JobEnd.DONE
                    self._keep_noise(line)

    def _keep_noise(self, line: bytes) -> None:
        if line.strip():
            self.noise = [*self.noise, line.decode("utf-8", "replace")][-NOISE_LINES:]


_worker = WaczWorker()
# At exit, and when an actor stops: a forked actor ends with os._exit, which runs no atexit
# function, and a worker left to its parent-death signal would go unwaited (its CPU time
# uncounted in the actor's, orchestrator/usage.py).
atexit.register(_worker.close)
on_shutdown(_worker.close)


def shared_worker() -> WaczWorker:
    """Return this process's py-wacz worker (started on its first job)."""
    return _worker
