"""Python client of adapterd, the multi-task adapter serving and training service.

    import adapterd

    with adapterd.Client("127.0.0.1:8500") as client:
        client.train("sentiment", "examples/sentiment_train.csv", epochs=3, progress=True)
        print(client.predict("sentiment", "great and fast, I love it")[0].label)

The gRPC stubs are the subpackage ``adapterd.v1`` (the proto package's own
name), generated from proto/adapterd/v1/adapterd_service.proto when the
package is built. In a source checkout they may live in another directory on
``sys.path`` (adapterd/_codegen.py): this package's ``__path__`` is extended
with every ``adapterd`` directory on ``sys.path`` so that ``adapterd.v1`` is
found there.
"""

from pkgutil import extend_path

__path__ = extend_path(__path__, __name__)

__version__ = "0.1.0"

from adapterd._retry import RetryPolicy  # noqa: E402
from adapterd._health import ServingStatus  # noqa: E402
from adapterd.client import Client, dataset_format, dataset_id_for_file  # noqa: E402
from adapterd.errors import (  # noqa: E402
    Aborted,
    AdapterdError,
    AlreadyExists,
    Cancelled,
    DataLoss,
    DeadlineExceeded,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    JobCancelled,
    JobFailed,
    NotFound,
    OutOfRange,
    PermissionDenied,
    QuotaExceeded,
    Unauthenticated,
    Unavailable,
    Unimplemented,
    Unknown,
)
from adapterd.records import (  # noqa: E402
    Answer,
    ClassificationPrediction,
    Dataset,
    Entity,
    EpochMetrics,
    SelectionMetric,
    ExportedAdapter,
    JobEvent,
    JobProgress,
    JobState,
    LabelScore,
    MultiLabelPrediction,
    Prediction,
    PredictResult,
    QuestionAnsweringPrediction,
    RegressionPrediction,
    Task,
    TaskKind,
    TaskState,
    TokenClassificationPrediction,
    TrainingJob,
)

__all__ = [
    "Client",
    "RetryPolicy",
    "ServingStatus",
    "dataset_format",
    "dataset_id_for_file",
    "AdapterdError",
    "Aborted",
    "AlreadyExists",
    "Cancelled",
    "DataLoss",
    "DeadlineExceeded",
    "FailedPrecondition",
    "Internal",
    "InvalidArgument",
    "JobCancelled",
    "JobFailed",
    "NotFound",
    "OutOfRange",
    "PermissionDenied",
    "QuotaExceeded",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "Unknown",
    "Answer",
    "ClassificationPrediction",
    "Dataset",
    "Entity",
    "EpochMetrics",
    "SelectionMetric",
    "ExportedAdapter",
    "JobEvent",
    "JobProgress",
    "JobState",
    "LabelScore",
    "MultiLabelPrediction",
    "Prediction",
    "PredictResult",
    "QuestionAnsweringPrediction",
    "RegressionPrediction",
    "Task",
    "TaskKind",
    "TaskState",
    "TokenClassificationPrediction",
    "TrainingJob",
    "__version__",
]
