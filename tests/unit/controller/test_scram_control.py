"""SCRAM credential alterations and descriptions as the controller decides them (Kafka's ScramControlManager),
and their replay into the metadata image."""

from __future__ import annotations

from insync import errors
from insync.controller.scram_control import (
    CredentialDeletion,
    CredentialUpsertion,
    UserResult,
    alter_credentials,
    describe_credentials,
)
from insync.metadata.image import MetadataImage
from insync.metadata.records import (
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
    record_from_dict,
)
from insync.security.scram import ScramMechanism, credential, salted_password

SHA512 = ScramMechanism.SCRAM_SHA_512
SHA256 = ScramMechanism.SCRAM_SHA_256


def upsertion(name: str, mechanism: ScramMechanism = SHA512, iterations: int = 4096,
              password: str = "pw") -> CredentialUpsertion:
    return CredentialUpsertion(name, mechanism.type, iterations, b"salt",
                               salted_password(mechanism, password, b"salt", iterations))


def replayed(image: MetadataImage, records: tuple[object, ...]) -> MetadataImage:
    for record in records:
        image = image.replay(record)  # type: ignore[arg-type]
    return image


def test_upsertion_stores_keys_never_the_password() -> None:
    records, results = alter_credentials(MetadataImage(), [], [upsertion("alice")])
    assert results == [UserResult("alice")]
    (record,) = records
    assert isinstance(record, UserScramCredentialRecord)
    assert "pw" not in str(record.to_dict()) and record_from_dict(record.to_dict()) == record
    image = replayed(MetadataImage(), records)
    assert image.scram_credential(SHA512, "alice") == credential(SHA512, "pw", b"salt", 4096)
    assert image.scram_credential(SHA256, "alice") is None


def test_deletion_removes_the_mechanism_then_the_user() -> None:
    image = replayed(MetadataImage(), alter_credentials(MetadataImage(), [], [upsertion("alice"),
                                                                               upsertion("alice", SHA256)])[0])
    records, results = alter_credentials(image, [CredentialDeletion("alice", SHA512.type)], [])
    assert results == [UserResult("alice")] and records == (RemoveUserScramCredentialRecord("alice", 2),)
    image = replayed(image, records)
    assert set(image.scram_credentials["alice"]) == {SHA256.type}
    image = replayed(image, alter_credentials(image, [CredentialDeletion("alice", SHA256.type)], [])[0])
    assert "alice" not in image.scram_credentials


def test_refusals_with_kafkas_messages_and_per_user_atomicity() -> None:
    records, results = alter_credentials(
        MetadataImage(),
        [CredentialDeletion("bob", SHA512.type), CredentialDeletion("carol", 7)],
        [upsertion("bob", SHA256), upsertion("dave", iterations=100), upsertion("erin", iterations=20000),
         upsertion(""), upsertion("frank"), upsertion("frank"), upsertion("gina")])
    assert results == [
        UserResult("bob", errors.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist"),
        UserResult("carol", errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        UserResult("dave", errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        UserResult("erin", errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        UserResult("", errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        UserResult("frank", errors.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request"),
        UserResult("gina"),
    ]
    assert [r.name for r in records] == ["gina"]  # bob's upsertion went down with his deletion


def test_describe_all_named_unknown_and_duplicate() -> None:
    image = replayed(MetadataImage(), alter_credentials(MetadataImage(), [], [upsertion("alice"),
                                                                               upsertion("bob", SHA256, 8192)])[0])
    assert [(d.user, d.credentials) for d in describe_credentials(image, None)] == [
        ("alice", ((2, 4096),)), ("bob", ((1, 8192),))]
    described = describe_credentials(image, ["bob", "zed", "alice", "alice"])
    assert [(d.user, d.error, d.message) for d in described] == [  # Kafka's ScramImage's words
        ("bob", errors.NONE, ""),
        ("zed", errors.RESOURCE_NOT_FOUND, "Attempt to describe a user credential that does not exist: zed"),
        ("alice", errors.DUPLICATE_RESOURCE,
         "Cannot describe SCRAM credentials for the same user twice in a single request: alice")]
