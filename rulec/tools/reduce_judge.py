"""Judging a candidate program for `rulec reduce`: run the user's command on it, with a time limit.

The candidate is written to a private temporary folder under PROG's own file name (so that messages naming
the file read the same), and PROG's folder is put first on PYTHONPATH so that its local imports still
resolve. The command runs through the shell, in the current directory, in its own process group (a try
that runs out of time is killed with everything it started).
"""
from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Verdict:
    fails: bool  # the candidate still fails: the command exited non-zero (and its output matched --match)
    status: int | None  # the command's exit status; None when it ran out of time
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.status is None


class Judge:
    """Runs `command` on candidate texts; `tries` counts the runs."""

    def __init__(self, command: str, program: Path, timeout: float, match: re.Pattern[str] | None = None):
        self.command, self.timeout, self.match = command, timeout, match
        self.folder = Path(tempfile.mkdtemp(prefix="rulec-reduce-"))
        self.file = self.folder / program.name
        self.env = dict(os.environ, RULEC_REDUCE_FILE=str(self.file))
        paths = [str(program.resolve().parent), os.environ.get("PYTHONPATH", "")]
        self.env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        self.tries = 0

    def command_line(self) -> str:
        """The command with the candidate's path in place of `{}`, or after it when it has no `{}`."""
        path = shlex.quote(str(self.file))
        return self.command.replace("{}", path) if "{}" in self.command else f"{self.command} {path}"

    def __call__(self, text: str) -> Verdict:
        self.file.write_text(text, encoding="utf-8")
        self.tries += 1
        t0 = time.perf_counter()
        proc = subprocess.Popen(self.command_line(), shell=True, env=self.env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE if self.match else subprocess.DEVNULL,
                                stderr=subprocess.STDOUT if self.match else subprocess.DEVNULL,
                                start_new_session=True)
        try:
            out, _ = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            return Verdict(False, None, time.perf_counter() - t0)
        except BaseException:  # Ctrl-C: the command runs in its own session, so it must be stopped here
            _kill(proc)
            raise
        seconds = time.perf_counter() - t0
        fails = proc.returncode != 0
        if fails and self.match is not None:
            fails = self.match.search((out or b"").decode(errors="replace")) is not None
        return Verdict(fails, proc.returncode, seconds)

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.communicate(timeout=5)
    except subprocess.TimeoutExpired:  # a process that left the group still holds the output pipe
        if proc.stdout is not None:
            proc.stdout.close()
        proc.wait()
