"""grpc.health.v1.Health/Check without the grpcio-health-checking package.

Debian ships python3-grpcio without grpc_health. When that package is
importable its messages are used; otherwise the two tiny messages
(HealthCheckRequest {string service = 1}, HealthCheckResponse {ServingStatus
status = 1}) are built from a descriptor in a private descriptor pool, so
they never clash with another copy of grpc.health.v1 in the process.
"""

from __future__ import annotations

import enum
from typing import Any, Callable, Tuple

from google.protobuf import descriptor_pb2, descriptor_pool

HEALTH_CHECK_METHOD = "/grpc.health.v1.Health/Check"


class ServingStatus(enum.IntEnum):
    """grpc.health.v1.HealthCheckResponse.ServingStatus."""

    UNKNOWN = 0
    SERVING = 1
    NOT_SERVING = 2
    SERVICE_UNKNOWN = 3

    def __str__(self) -> str:
        return self.name


def _message_class(pool: descriptor_pool.DescriptorPool, full_name: str) -> Any:
    descriptor = pool.FindMessageTypeByName(full_name)
    try:  # protobuf >= 4.22
        from google.protobuf.message_factory import GetMessageClass

        return GetMessageClass(descriptor)
    except ImportError:
        from google.protobuf import message_factory

        return message_factory.MessageFactory(pool).GetPrototype(descriptor)


def _build_messages() -> Tuple[Any, Any]:
    file = descriptor_pb2.FileDescriptorProto(name="adapterd_client/grpc_health_v1.proto", package="grpc.health.v1")
    file.syntax = "proto3"
    request = file.message_type.add(name="HealthCheckRequest")
    request.field.add(
        name="service",
        number=1,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
    )
    response = file.message_type.add(name="HealthCheckResponse")
    status_enum = response.enum_type.add(name="ServingStatus")
    for status in ServingStatus:
        status_enum.value.add(name=status.name, number=int(status))
    response.field.add(
        name="status",
        number=1,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_ENUM,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        type_name=".grpc.health.v1.HealthCheckResponse.ServingStatus",
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return (
        _message_class(pool, "grpc.health.v1.HealthCheckRequest"),
        _message_class(pool, "grpc.health.v1.HealthCheckResponse"),
    )


def health_messages() -> Tuple[Any, Any]:
    """(HealthCheckRequest, HealthCheckResponse) message classes."""
    try:
        from grpc_health.v1 import health_pb2

        return health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse
    except ImportError:
        return _build_messages()


HealthCheckRequest, HealthCheckResponse = health_messages()


def check_callable(channel: Any) -> Callable[..., Any]:
    """A unary-unary callable for Health/Check on ``channel``."""
    return channel.unary_unary(
        HEALTH_CHECK_METHOD,
        request_serializer=HealthCheckRequest.SerializeToString,
        response_deserializer=HealthCheckResponse.FromString,
    )
