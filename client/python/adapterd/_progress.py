"""A text progress display for training jobs on a stream (stderr by default).

No third-party dependency. On a terminal it keeps one live line (state, a bar,
epoch, step, loss, the kind's best metric, ETA) redrawn in place, and prints
state changes, epoch metrics and warnings above it; on anything else (a log
file, a pipe) it prints only those event lines, never carriage returns.
"""

from __future__ import annotations

import math
import sys
from typing import IO, Optional

from adapterd.records import JobEvent, JobState, TrainingJob

_BAR_WIDTH = 24


def _eta(seconds: float) -> str:
    s = int(round(seconds))
    if s >= 3600:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"


def progress_line(job: TrainingJob, last_train_loss: float = math.nan, progress_time: Optional[float] = None) -> str:
    """The live line for ``job`` (adapterctl's, with a bar): "RUNNING [#####....] epoch 1/3 step 4/12 (33.3%) ...".

    ``progress_time``: the server's time (POSIX seconds) of the latest progress
    event, for the ETA; both ends of the ETA come from the server's clock.
    """
    p = job.progress
    line = job.state.name
    if p.total_steps <= 0:
        return line
    filled = int(round(_BAR_WIDTH * p.fraction))
    line += f" [{'#' * filled}{'.' * (_BAR_WIDTH - filled)}] epoch {p.epoch}/{p.total_epochs}"
    line += f"  step {p.step}/{p.total_steps} ({100 * p.fraction:.1f}%)"
    if math.isnan(last_train_loss) and job.best_metrics is not None:
        last_train_loss = job.best_metrics.train_loss
    if not math.isnan(last_train_loss):
        line += f"  loss {last_train_loss:.4f}"
    if job.best_metrics is not None:
        line += "  " + job.best_metrics.describe()
    if job.started_at is not None and progress_time is not None and 0 < p.step < p.total_steps:
        elapsed = progress_time - job.started_at.timestamp()
        if elapsed > 0:
            line += "  ETA " + _eta(elapsed / p.step * (p.total_steps - p.step))
    return line


class ProgressPrinter:
    """Prints a job's watch events on ``stream``; call :meth:`event` per event and :meth:`close` at the end."""

    def __init__(self, stream: Optional[IO[str]] = None, live: Optional[bool] = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        if live is None:
            isatty = getattr(self._stream, "isatty", None)
            live = bool(isatty and isatty())
        self._live = live
        self._live_shown = False
        self._last_train_loss = math.nan
        self._progress_time: Optional[float] = None

    def event(self, event: JobEvent) -> None:
        """Shows one event (and, on a terminal, redraws the live line with the event's job)."""
        if event.state_change is not None:
            change = event.state_change
            text = f"state {change.to_state.name}"
            if change.reason:
                text += f" ({change.reason})"
            self._print(text)
        elif event.epoch_metrics is not None:
            m = event.epoch_metrics
            self._last_train_loss = m.train_loss
            self._print(
                f"epoch {m.epoch}: train loss {m.train_loss:.4f}, val loss {m.val_loss:.4f}, "
                f"{m.describe()}, {m.examples_per_second:.0f} examples/s"
            )
        elif event.warning is not None:
            self._print(f"warning: {event.warning.message}")
        elif event.progress is not None and event.time is not None:
            self._progress_time = event.time.timestamp()
        if self._live and event.job.state == JobState.RUNNING:
            self._stream.write("\r\x1b[K" + progress_line(event.job, self._last_train_loss, self._progress_time))
            self._stream.flush()
            self._live_shown = True

    def finish(self, job: TrainingJob) -> None:
        """Ends the live line and prints the job's outcome."""
        self.close()
        text = f"job {job.job_id} {job.state.name}"
        if job.state == JobState.SUCCEEDED:
            text += f": task {job.task_id} version {job.result_version}"
            if job.best_metrics is not None:
                text += f" ({job.best_metrics.describe()})"
        elif job.error_message:
            text += f": {job.error_message}"
        self._print(text)

    def close(self) -> None:
        """Clears the live line, if one is shown."""
        if self._live_shown:
            self._stream.write("\r\x1b[K")
            self._stream.flush()
            self._live_shown = False

    def _print(self, text: str) -> None:
        self.close()
        self._stream.write(text + "\n")
        self._stream.flush()
