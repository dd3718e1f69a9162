"""The controller's SCRAM credential decisions, after Kafka's `ScramControlManager`: pure functions of an image.

AlterUserScramCredentials carries deletions (user, mechanism) and upsertions (user, mechanism, iterations, salt,
salted password). Each user's changes succeed or fail together, with Kafka's errors and messages: an empty name
or an unknown mechanism, the same (user, mechanism) twice in one request (DUPLICATE_RESOURCE), iterations
outside 4096..16384 (UNACCEPTABLE_CREDENTIAL), deleting a credential that is not there (RESOURCE_NOT_FOUND).
An upsertion becomes a `UserScramCredentialRecord` holding the salt and the keys derived from the salted
password, which is dropped here: the metadata log never holds a password or a salted password.
DescribeUserScramCredentials answers from the image (`describe_credentials`), which brokers also hold.
"""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from insync import errors
from insync.errors import KafkaError
from insync.metadata.image import MetadataImage
from insync.metadata.records import RemoveUserScramCredentialRecord, UserScramCredentialRecord
from insync.security.scram import ITERATIONS_MAX, ITERATIONS_MIN, ScramMechanism, credential_from_salted


@dataclass(frozen=True, slots=True)
class CredentialDeletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class CredentialUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(frozen=True, slots=True)
class UserResult:
    user: str
    error: KafkaError = errors.NONE
    message: str | None = None


ScramRecord = UserScramCredentialRecord | RemoveUserScramCredentialRecord
Change = CredentialDeletion | CredentialUpsertion


def alter_credentials(image: MetadataImage, deletions: Sequence[CredentialDeletion],
                      upsertions: Sequence[CredentialUpsertion]) -> tuple[tuple[ScramRecord, ...], list[UserResult]]:
    """The records to commit and one result per user, in the order users first appear."""
    changes: list[Change] = [*deletions, *upsertions]
    twice = {key for key, count in Counter((c.name, c.mechanism) for c in changes).items() if count > 1}
    users = list(dict.fromkeys(change.name for change in changes))
    records: list[ScramRecord] = []
    results = []
    for name in users:
        mine = [change for change in changes if change.name == name]
        refusal = next((r for r in (_refusal(image, change, twice) for change in mine) if r is not None), None)
        if refusal is not None:
            results.append(UserResult(name, *refusal))
            continue
        records.extend(_record(change) for change in mine)
        results.append(UserResult(name))
    return tuple(records), results


def _refusal(image: MetadataImage, change: Change, twice: set[tuple[str, int]]) -> tuple[KafkaError, str] | None:
    if not change.name:
        return errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    mechanism = ScramMechanism.by_type(change.mechanism)
    if mechanism is None:
        return errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    if (change.name, change.mechanism) in twice:
        return errors.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"
    if isinstance(change, CredentialDeletion):
        if image.scram_credential(mechanism, change.name) is None:
            return errors.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"
        return None
    if change.iterations < ITERATIONS_MIN:
        return errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations"
    if change.iterations > ITERATIONS_MAX:
        return errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations"
    if not change.salt or not change.salted_password:
        return errors.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty"
    return None


def _record(change: Change) -> ScramRecord:
    if isinstance(change, CredentialDeletion):
        return RemoveUserScramCredentialRecord(change.name, change.mechanism)
    mechanism = ScramMechanism.by_type(change.mechanism)
    assert mechanism is not None, change.mechanism  # `_refusal` checked it
    made = credential_from_salted(mechanism, change.salt, change.salted_password, change.iterations)
    return UserScramCredentialRecord(change.name, change.mechanism, _b64(made.salt), _b64(made.stored_key),
                                     _b64(made.server_key), made.iterations)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@dataclass(frozen=True, slots=True)
class DescribedUser:
    user: str
    error: KafkaError
    message: str | None
    credentials: tuple[tuple[int, int], ...]  # (mechanism type, iterations)


def describe_credentials(image: MetadataImage, users: Sequence[str] | None) -> list[DescribedUser]:
    """Every user with a credential when `users` is None (or empty, as Kafka's null and empty list); otherwise
    each named user, RESOURCE_NOT_FOUND for one without any and DUPLICATE_RESOURCE for one named twice."""
    stored: Mapping[str, Mapping[int, object]] = image.scram_credentials
    if not users:
        return [_described(image, name) for name in sorted(stored)]
    counts = Counter(users)
    out = []
    for name in dict.fromkeys(users):
        if counts[name] > 1:
            out.append(DescribedUser(name, errors.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for the "
                                     f"same user twice in a single request: {name}", ()))
        elif name not in stored:
            out.append(DescribedUser(name, errors.RESOURCE_NOT_FOUND,
                                     f"Attempt to describe a user credential that does not exist: {name}", ()))
        else:
            out.append(_described(image, name))
    return out


def _described(image: MetadataImage, name: str) -> DescribedUser:
    credentials = image.scram_credentials[name]
    return DescribedUser(name, errors.NONE, "",  # Kafka's ScramImage sets no message: the field's default
                         tuple((mechanism, credentials[mechanism].iterations) for mechanism in sorted(credentials)))
