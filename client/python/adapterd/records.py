"""Typed, immutable views of adapterd's messages.

Every class is a frozen dataclass built from the wire message
(proto/adapterd/v1/adapterd_service.proto); the resource types (Dataset, Task,
TrainingJob) keep the message itself as ``proto`` for fields this module does
not surface. Times are timezone-aware UTC datetimes (None where the server
sent 0, "unset"). Offsets (entities, answers) are Unicode code points, end
exclusive: ``text[start:end]`` in Python is the span.
"""

from __future__ import annotations

import datetime as _dt
import enum
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, Mapping, Optional, Sequence, Tuple, Union, overload

from adapterd._stubs import pb


def _time(micros: int) -> Optional[_dt.datetime]:
    if micros == 0:
        return None
    return _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(microseconds=micros)


class _NamedIntEnum(enum.IntEnum):
    """An IntEnum (the wire value) that prints as its name."""

    def __str__(self) -> str:
        return self.name


class TaskKind(_NamedIntEnum):
    """What a task learns (``TaskKind`` in the proto; numbers are the wire values)."""

    UNSPECIFIED = 0
    SEQUENCE_CLASSIFICATION = 1
    MULTI_LABEL_CLASSIFICATION = 2
    REGRESSION = 3
    TOKEN_CLASSIFICATION = 4
    EXTRACTIVE_QA = 5

    @property
    def flag(self) -> str:
        """adapterctl's name of the kind (``train --kind``): classification, multi-label, regression, ner, qa."""
        return _KIND_FLAGS[self]

    @classmethod
    def parse(cls, value: Union["TaskKind", int, str, None]) -> "TaskKind":
        """A kind from a TaskKind, its number, adapterctl's name ("classification", "multi-label",
        "regression", "ner", "qa"), or the proto's name with or without ``TASK_KIND_`` (any case, '-' or '_').

        None is UNSPECIFIED. Raises ValueError for anything else.
        """
        if value is None:
            return cls.UNSPECIFIED
        if isinstance(value, cls):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return cls(value)
        if isinstance(value, str):
            key = value.strip().lower().replace("_", "-")
            if key.startswith("task-kind-"):
                key = key[len("task-kind-"):]
            if key in _KIND_ALIASES:
                return _KIND_ALIASES[key]
        raise ValueError(
            f"unknown task kind {value!r} (use classification, multi-label, regression, ner or qa)"
        )


_KIND_FLAGS = {
    TaskKind.UNSPECIFIED: "classification",
    TaskKind.SEQUENCE_CLASSIFICATION: "classification",
    TaskKind.MULTI_LABEL_CLASSIFICATION: "multi-label",
    TaskKind.REGRESSION: "regression",
    TaskKind.TOKEN_CLASSIFICATION: "ner",
    TaskKind.EXTRACTIVE_QA: "qa",
}
_KIND_ALIASES = {
    "unspecified": TaskKind.UNSPECIFIED,
    "classification": TaskKind.SEQUENCE_CLASSIFICATION,
    "sequence-classification": TaskKind.SEQUENCE_CLASSIFICATION,
    "multi-label": TaskKind.MULTI_LABEL_CLASSIFICATION,
    "multi-label-classification": TaskKind.MULTI_LABEL_CLASSIFICATION,
    "multilabel": TaskKind.MULTI_LABEL_CLASSIFICATION,
    "regression": TaskKind.REGRESSION,
    "ner": TaskKind.TOKEN_CLASSIFICATION,
    "token-classification": TaskKind.TOKEN_CLASSIFICATION,
    "qa": TaskKind.EXTRACTIVE_QA,
    "extractive-qa": TaskKind.EXTRACTIVE_QA,
}


class JobState(_NamedIntEnum):
    """A training job's state (``JobState`` in the proto)."""

    UNSPECIFIED = 0
    VALIDATING = 1
    QUEUED = 2
    RUNNING = 3
    SUCCEEDED = 4
    FAILED = 5
    CANCELLING = 6
    CANCELLED = 7

    @property
    def terminal(self) -> bool:
        """SUCCEEDED, FAILED and CANCELLED never change again."""
        return self in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)

    @classmethod
    def parse(cls, value: Union["JobState", int, str, None]) -> "JobState":
        """A state from a JobState, its number or its name with or without ``JOB_STATE_`` (any case).

        None is UNSPECIFIED (= every state, in a filter). Raises ValueError for anything else.
        """
        if value is None:
            return cls.UNSPECIFIED
        if isinstance(value, cls):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return cls(value)
        if isinstance(value, str):
            key = value.strip().upper()
            if key.startswith("JOB_STATE_"):
                key = key[len("JOB_STATE_"):]
            if key in cls.__members__:
                return cls[key]
        raise ValueError(
            f"unknown job state {value!r} (use validating, queued, running, succeeded, failed, cancelling or cancelled)"
        )


class TaskState(_NamedIntEnum):
    """Whether a task can serve (``TaskState`` in the proto)."""

    UNSPECIFIED = 0
    PENDING = 1
    READY = 2


# --- Datasets ----------------------------------------------------------------


@dataclass(frozen=True)
class Dataset:
    """An uploaded dataset (``Dataset`` message)."""

    dataset_id: str
    num_examples: int
    num_bytes: int
    label_counts: Mapping[str, int] = field(hash=False)
    display_name: str
    created_at: Optional[_dt.datetime]
    content_sha256: str
    #: SHA-256 of the file's bytes for a dataset uploaded as a file; "" for one uploaded as examples.
    file_sha256: str
    proto: Any = field(repr=False, compare=False, hash=False)

    @classmethod
    def from_proto(cls, m: Any) -> "Dataset":
        return cls(
            dataset_id=m.dataset_id,
            num_examples=m.num_examples,
            num_bytes=m.num_bytes,
            label_counts=dict(sorted(m.label_counts.items())),
            display_name=m.display_name,
            created_at=_time(m.created_at_micros),
            content_sha256=m.content_sha256,
            file_sha256=m.file_sha256,
            proto=m,
        )


# --- Tasks --------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    """A task: its kind, labels, versions and adapter (``Task`` message)."""

    task_id: str
    kind: TaskKind
    state: TaskState
    labels: Tuple[str, ...]
    current_version: int
    versions: Tuple[int, ...]
    current_job_id: str
    bottleneck_size: int
    activation: str
    adapter_bytes: int
    num_parameters: int
    encoder_fingerprint: str
    created_at: Optional[_dt.datetime]
    updated_at: Optional[_dt.datetime]
    proto: Any = field(repr=False, compare=False, hash=False)
    # import_adapter's result only: what the import could not check (an AdapterHub
    # directory carries no fingerprint of its model); "" otherwise.
    import_warning: str = ""

    @classmethod
    def from_proto(cls, m: Any) -> "Task":
        # Tasks stored before kinds existed read as sequence classification.
        kind = TaskKind(m.task_kind) if m.task_kind else TaskKind.SEQUENCE_CLASSIFICATION
        return cls(
            task_id=m.task_id,
            kind=kind,
            state=TaskState(m.state),
            labels=tuple(m.labels),
            current_version=m.current_version,
            versions=tuple(m.versions),
            current_job_id=m.current_job_id,
            bottleneck_size=m.adapter_config.bottleneck_size,
            activation=m.adapter_config.activation,
            adapter_bytes=m.adapter_bytes,
            num_parameters=m.num_parameters,
            encoder_fingerprint=m.encoder_fingerprint,
            created_at=_time(m.created_at_micros),
            updated_at=_time(m.updated_at_micros),
            proto=m,
            import_warning=m.import_warning,
        )


@dataclass(frozen=True)
class ExportedAdapter:
    """An exported adapter file (docs/ADAPTER_FORMAT.md), or an AdapterHub directory's zip.

    ``data`` holds the bytes when no destination was given; ``path`` names the
    file (or the AdapterHub directory) written when one was.
    """

    task_id: str
    version: int
    size: int
    data: Optional[bytes] = field(default=None, repr=False)
    path: Optional[str] = None


# --- Training jobs ------------------------------------------------------------

#: The hyperparameters' names (fields of the ``Hyperparameters`` message).
HYPERPARAMETERS: Tuple[str, ...] = tuple(f.name for f in pb.Hyperparameters.DESCRIPTOR.fields)


@dataclass(frozen=True)
class JobProgress:
    """Where a job is within training."""

    epoch: int
    step: int
    total_steps: int
    total_epochs: int

    @property
    def fraction(self) -> float:
        """Steps done over all steps, in [0, 1] (0 before training starts)."""
        return self.step / self.total_steps if self.total_steps > 0 else 0.0

    @classmethod
    def from_proto(cls, m: Any) -> "JobProgress":
        return cls(epoch=m.epoch, step=m.step, total_steps=m.total_steps, total_epochs=m.total_epochs)


@dataclass(frozen=True)
class SelectionMetric:
    """The metric that selects a task's best epoch, as the server names it (``SelectionMetric`` message)."""

    field: str  # the EpochMetrics field it is: "val_accuracy", "micro_f1", "spearman", "f1"
    label: str  # how clients name it: "val accuracy", "val Spearman", ...
    value: float
    fraction: bool  # True: a fraction shown as a percentage; False: a correlation

    @classmethod
    def from_proto(cls, m: Any) -> "SelectionMetric":
        return cls(field=m.field, label=m.label, value=m.value, fraction=m.fraction)

    def __str__(self) -> str:
        return f"{self.label} {100 * self.value:.1f}%" if self.fraction else f"{self.label} {self.value:.4f}"


@dataclass(frozen=True)
class EpochMetrics:
    """One epoch's validation metrics; each kind fills its own (docs/API.md, "Task kinds")."""

    epoch: int
    train_loss: float
    val_loss: float
    val_accuracy: float
    learning_rate: float
    examples_per_second: float
    step: int
    f1: float
    exact_match: float
    micro_f1: float
    macro_f1: float
    spearman: float
    pearson: float
    mse: float
    # The server's; None from a server that predates it.
    selection: Optional[SelectionMetric] = None

    @classmethod
    def from_proto(cls, m: Any) -> "EpochMetrics":
        fields = {name: getattr(m, name) for name in cls.__dataclass_fields__ if name != "selection"}
        selection = SelectionMetric.from_proto(m.selection) if m.HasField("selection") else None
        return cls(**fields, selection=selection)

    def describe(self) -> str:
        """The metric that selects the task's best epoch, as adapterctl prints it ("val accuracy 91.2%")."""
        return str(self.selection) if self.selection is not None else "val metric -"


@dataclass(frozen=True)
class TrainingJob:
    """A training job (``TrainingJob`` message)."""

    job_id: str
    task_id: str
    state: JobState
    kind: TaskKind
    request_id: str
    hyperparameters: Mapping[str, Any] = field(hash=False)
    dataset_ids: Tuple[str, ...]
    validation_dataset_id: str
    error_message: str
    result_version: int
    progress: JobProgress
    best_metrics: Optional[EpochMetrics]
    labels: Tuple[str, ...]
    num_train_examples: int
    num_validation_examples: int
    attempts: int
    created_at: Optional[_dt.datetime]
    updated_at: Optional[_dt.datetime]
    started_at: Optional[_dt.datetime]
    finished_at: Optional[_dt.datetime]
    proto: Any = field(repr=False, compare=False, hash=False)

    @property
    def done(self) -> bool:
        """True once the job is SUCCEEDED, FAILED or CANCELLED."""
        return self.state.terminal

    @classmethod
    def from_proto(cls, m: Any) -> "TrainingJob":
        h = m.hyperparameters
        return cls(
            job_id=m.job_id,
            task_id=m.task_id,
            state=JobState(m.state),
            kind=TaskKind(m.task_kind),
            request_id=m.request_id,
            hyperparameters={name: getattr(h, name) for name in HYPERPARAMETERS if h.HasField(name)},
            dataset_ids=tuple(m.dataset_ids),
            validation_dataset_id=m.validation_dataset_id,
            error_message=m.error_message,
            result_version=m.result_version,
            progress=JobProgress.from_proto(m.progress),
            best_metrics=EpochMetrics.from_proto(m.best_metrics) if m.best_metrics.epoch > 0 else None,
            labels=tuple(m.labels),
            num_train_examples=m.num_train_examples,
            num_validation_examples=m.num_validation_examples,
            attempts=m.attempts,
            created_at=_time(m.created_at_micros),
            updated_at=_time(m.updated_at_micros),
            started_at=_time(m.started_at_micros),
            finished_at=_time(m.finished_at_micros),
            proto=m,
        )


@dataclass(frozen=True)
class StateChange:
    """A job's state transition (``from_state`` is UNSPECIFIED for the first)."""

    from_state: JobState
    to_state: JobState
    reason: str


@dataclass(frozen=True)
class JobWarning:
    """A non-fatal finding ("truncation", "label_imbalance", "resumed", ...)."""

    message: str
    kind: str


@dataclass(frozen=True)
class JobEvent:
    """One entry of a job's event log, as :meth:`adapterd.Client.watch` yields it.

    ``kind`` is "state_change", "epoch_metrics", "warning" or "progress", and
    names the one of the four payload fields that is set. ``job`` is the job as
    the server sent it with the event.
    """

    seq: int
    time: Optional[_dt.datetime]
    kind: str
    job: TrainingJob = field(repr=False, compare=False, hash=False)
    state_change: Optional[StateChange] = None
    epoch_metrics: Optional[EpochMetrics] = None
    warning: Optional[JobWarning] = None
    progress: Optional[JobProgress] = None

    @classmethod
    def from_proto(cls, m: Any, job: TrainingJob) -> "JobEvent":
        which = m.WhichOneof("kind") or ""
        kwargs: Dict[str, Any] = {}
        if which == "state_change":
            c = m.state_change
            kwargs["state_change"] = StateChange(JobState(getattr(c, "from")), JobState(c.to), c.reason)
        elif which == "epoch_metrics":
            kwargs["epoch_metrics"] = EpochMetrics.from_proto(m.epoch_metrics)
        elif which == "warning":
            kwargs["warning"] = JobWarning(m.warning.message, m.warning.kind)
        elif which == "progress":
            kwargs["progress"] = JobProgress.from_proto(m.progress)
        return cls(seq=m.seq, time=_time(m.time_micros), kind=which, job=job, **kwargs)


# --- Predictions --------------------------------------------------------------


@dataclass(frozen=True)
class LabelScore:
    """A label and its probability."""

    label: str
    score: float


@dataclass(frozen=True)
class Entity:
    """An entity token classification found: ``text == input[start:end]`` (code points)."""

    label: str
    start: int
    end: int
    text: str
    score: float


@dataclass(frozen=True)
class Answer:
    """An extractive-QA answer: ``text == context[start:end]``; "no answer" is empty text at 0, 0."""

    text: str
    start: int
    end: int
    score: float

    @property
    def is_no_answer(self) -> bool:
        """True for the "no answer" of a task trained with unanswerable questions."""
        return self.text == "" and self.start == 0 and self.end == 0


@dataclass(frozen=True)
class ClassificationPrediction:
    """Sequence classification: the most probable label, its softmax probability and (on request) every label's."""

    label: str
    score: float
    all_scores: Tuple[LabelScore, ...] = ()

    @property
    def scores(self) -> Dict[str, float]:
        """``all_scores`` as a dict (empty unless ``return_all_scores`` was asked for)."""
        return {s.label: s.score for s in self.all_scores}


@dataclass(frozen=True)
class MultiLabelPrediction:
    """Multi-label classification: every label at or over the threshold, highest first."""

    labels: Tuple[LabelScore, ...]
    all_scores: Tuple[LabelScore, ...] = ()

    @property
    def label_names(self) -> Tuple[str, ...]:
        return tuple(s.label for s in self.labels)

    @property
    def scores(self) -> Dict[str, float]:
        """Every label's sigmoid (empty unless ``return_all_scores`` was asked for)."""
        return {s.label: s.score for s in self.all_scores}


@dataclass(frozen=True)
class RegressionPrediction:
    """Regression: the value, in the training targets' units."""

    value: float


@dataclass(frozen=True)
class TokenClassificationPrediction:
    """Token classification: the entities found, in text order."""

    entities: Tuple[Entity, ...]


@dataclass(frozen=True)
class QuestionAnsweringPrediction:
    """Extractive QA: the best answers, best first (``top_k`` of them)."""

    answers: Tuple[Answer, ...]

    @property
    def best(self) -> Optional[Answer]:
        """The best answer, or None when the server returned none."""
        return self.answers[0] if self.answers else None


Prediction = Union[
    ClassificationPrediction,
    MultiLabelPrediction,
    RegressionPrediction,
    TokenClassificationPrediction,
    QuestionAnsweringPrediction,
]


def _scores(items: Any) -> Tuple[LabelScore, ...]:
    return tuple(LabelScore(s.label, s.score) for s in items)


def prediction_from_proto(m: Any, kind: TaskKind) -> Prediction:
    """The typed prediction of ``kind`` from a ``Prediction`` message."""
    if kind == TaskKind.MULTI_LABEL_CLASSIFICATION:
        return MultiLabelPrediction(labels=_scores(m.labels), all_scores=_scores(m.all_scores))
    if kind == TaskKind.REGRESSION:
        return RegressionPrediction(value=m.value)
    if kind == TaskKind.TOKEN_CLASSIFICATION:
        return TokenClassificationPrediction(
            entities=tuple(Entity(e.label, e.start, e.end, e.text, e.score) for e in m.entities)
        )
    if kind == TaskKind.EXTRACTIVE_QA:
        return QuestionAnsweringPrediction(answers=tuple(Answer(a.text, a.start, a.end, a.score) for a in m.answers))
    return ClassificationPrediction(label=m.label, score=m.score, all_scores=_scores(m.all_scores))


@dataclass(frozen=True)
class PredictResult(Sequence[Prediction]):
    """The predictions of one :meth:`adapterd.Client.predict` call: one per text, in order.

    Behaves as a sequence of predictions; ``version`` is the task version that
    served every one, ``kind`` says which prediction class they are.
    """

    task_id: str
    version: int
    kind: TaskKind
    predictions: Tuple[Prediction, ...]

    def __len__(self) -> int:
        return len(self.predictions)

    @overload
    def __getitem__(self, index: int) -> Prediction: ...

    @overload
    def __getitem__(self, index: slice) -> Tuple[Prediction, ...]: ...

    def __getitem__(self, index: Union[int, slice]) -> Union[Prediction, Tuple[Prediction, ...]]:
        return self.predictions[index]

    def __iter__(self) -> Iterator[Prediction]:
        return iter(self.predictions)


__all__ = [
    "TaskKind",
    "JobState",
    "TaskState",
    "Dataset",
    "Task",
    "ExportedAdapter",
    "HYPERPARAMETERS",
    "JobProgress",
    "EpochMetrics",
    "TrainingJob",
    "StateChange",
    "JobWarning",
    "JobEvent",
    "LabelScore",
    "Entity",
    "Answer",
    "ClassificationPrediction",
    "MultiLabelPrediction",
    "RegressionPrediction",
    "TokenClassificationPrediction",
    "QuestionAnsweringPrediction",
    "Prediction",
    "prediction_from_proto",
    "PredictResult",
]
