"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), v0, as KRaft serves them.

Describe is answered by any broker (and the controller) from its metadata image: each user's mechanisms and
iteration counts, never a salt or a key (`controller.scram_control.describe_credentials`). Alter goes to the
controller (brokers forward it, as KRaft brokers do); each user is answered with its own error and Kafka's
message (`controller.scram_control.alter_credentials`), the records it commits reach every broker through the
metadata log.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from insync import errors
from insync.controller.scram_control import (
    CredentialDeletion,
    CredentialUpsertion,
    UserResult,
    describe_credentials,
)
from insync.errors import KafkaError
from insync.metadata.image import MetadataImage
from insync.protocol.codec import DecodedRequest
from insync.protocol.kio import NO_THROTTLE, build, check_body, code, nested, response_class
from insync.wire.versions import ALTER_USER_SCRAM_CREDENTIALS, DESCRIBE_USER_SCRAM_CREDENTIALS

Alter = Callable[[Sequence[CredentialDeletion], Sequence[CredentialUpsertion]], list[UserResult]]


def describe_user_scram_credentials(request: DecodedRequest, image: MetadataImage) -> Any:
    body = request.body
    check_body(body, DESCRIBE_USER_SCRAM_CREDENTIALS)
    users = None if body.users is None else [user.name for user in body.users]
    cls = response_class(DESCRIBE_USER_SCRAM_CREDENTIALS, request.api_version)
    result_cls = nested(cls, "DescribeUserScramCredentialsResult")
    info_cls = nested(cls, "CredentialInfo")
    results = tuple(
        build(result_cls, user=described.user, error_code=code(described.error), error_message=described.message,
              credential_infos=tuple(build(info_cls, mechanism=mechanism, iterations=iterations)
                                     for mechanism, iterations in described.credentials))
        for described in describe_credentials(image, users))
    # Kafka's ScramImage sets no message on success: the field's default, "".
    return build(cls, throttle_time=NO_THROTTLE, error_code=code(errors.NONE), error_message="", results=results)


def refuse_describe(request: DecodedRequest, error: KafkaError, message: str) -> Any:
    """The whole request refused with `error` (CLUSTER_AUTHORIZATION_FAILED without DESCRIBE on the cluster)."""
    return build(response_class(DESCRIBE_USER_SCRAM_CREDENTIALS, request.api_version), throttle_time=NO_THROTTLE,
                 error_code=code(error), error_message=message, results=())


def alter_user_scram_credentials(request: DecodedRequest, alter: Alter) -> Any:
    body = request.body
    check_body(body, ALTER_USER_SCRAM_CREDENTIALS)
    deletions = [CredentialDeletion(d.name, int(d.mechanism)) for d in body.deletions]
    upsertions = [CredentialUpsertion(u.name, int(u.mechanism), int(u.iterations), bytes(u.salt),
                                      bytes(u.salted_password)) for u in body.upsertions]
    return alter_response(request, alter(deletions, upsertions))


def alter_response(request: DecodedRequest, results: list[UserResult]) -> Any:
    cls = response_class(ALTER_USER_SCRAM_CREDENTIALS, request.api_version)
    result_cls = nested(cls, "AlterUserScramCredentialsResult")
    return build(cls, throttle_time=NO_THROTTLE, results=tuple(
        build(result_cls, user=r.user, error_code=code(r.error), error_message=r.message) for r in results))


def refuse_alter(request: DecodedRequest, error: KafkaError, message: str) -> Any:
    """Every user of the request refused with `error` (NOT_CONTROLLER when the broker cannot forward it)."""
    names = dict.fromkeys(change.name for change in (*request.body.deletions, *request.body.upsertions))
    return alter_response(request, [UserResult(name, error, message) for name in names])
