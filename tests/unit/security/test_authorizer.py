"""The standard authorizer against the cases of Kafka's AuthorizerTest and StandardAuthorizerTest."""

from __future__ import annotations

import pytest

from insync.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from insync.security.authorizer import Authorizer, audit_message
from insync.security.principal import KafkaPrincipal, user

TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LITERAL, PREFIXED = PatternType.LITERAL, PatternType.PREFIXED
Op = AclOperation
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ALICE, BOB = user("alice"), user("bob")
HOST = "192.168.1.1"


def acl(name: str, operation: AclOperation, permission: AclPermissionType = ALLOW, principal: str = str(ALICE),
        host: str = "*", resource_type: ResourceType = TOPIC, pattern: PatternType = LITERAL) -> AclBinding:
    return AclBinding(ResourcePattern(resource_type, name, pattern),
                      AccessControlEntry(principal, host, operation, permission))


def authorizer(*acls: AclBinding, super_users: tuple[str, ...] = (), allow_if_no_acl: bool = False) -> Authorizer:
    return Authorizer.create(acls, super_users, allow_if_no_acl)


def allowed(auth: Authorizer, operation: AclOperation, name: str = "foo", principal: KafkaPrincipal = ALICE,
            host: str = HOST, resource_type: ResourceType = TOPIC) -> bool:
    return auth.authorize(principal, host, operation, resource_type, name).allowed


def test_no_acl_denies_by_default_and_allows_with_allow_everyone() -> None:
    assert not allowed(authorizer(), Op.READ)
    assert allowed(authorizer(allow_if_no_acl=True), Op.READ)


def test_allow_everyone_does_not_apply_once_the_resource_has_acls() -> None:
    auth = authorizer(acl("foo", Op.READ, principal=str(BOB)), allow_if_no_acl=True)
    assert not allowed(auth, Op.READ)  # foo has an ACL, not for alice
    assert allowed(auth, Op.READ, name="bar")  # bar has none


def test_super_users_may_do_anything_even_against_a_deny() -> None:
    auth = authorizer(acl("foo", Op.ALL, DENY, principal=str(BOB)), super_users=(str(BOB),))
    decision = auth.authorize(BOB, HOST, Op.WRITE, TOPIC, "foo")
    assert decision.allowed and decision.rule == "SuperUser"


@pytest.mark.parametrize(("granted", "asked", "expected"), [
    (Op.READ, Op.READ, True),
    (Op.READ, Op.WRITE, False),
    (Op.READ, Op.DESCRIBE, True),
    (Op.WRITE, Op.DESCRIBE, True),
    (Op.DELETE, Op.DESCRIBE, True),
    (Op.ALTER, Op.DESCRIBE, True),
    (Op.CREATE, Op.DESCRIBE, False),
    (Op.ALTER_CONFIGS, Op.DESCRIBE_CONFIGS, True),
    (Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS, False),
    (Op.DESCRIBE, Op.READ, False),
    (Op.ALL, Op.WRITE, True),
    (Op.ALL, Op.CLUSTER_ACTION, True),
])
def test_implied_operations_of_an_allow(granted: AclOperation, asked: AclOperation, expected: bool) -> None:
    assert allowed(authorizer(acl("foo", granted)), asked) is expected


def test_a_deny_implies_nothing() -> None:
    """A DENY of READ does not deny DESCRIBE (StandardAuthorizerData.findResult)."""
    auth = authorizer(acl("foo", Op.ALL), acl("foo", Op.READ, DENY))
    assert not allowed(auth, Op.READ)
    assert allowed(auth, Op.DESCRIBE)


def test_deny_takes_precedence_over_allow_whichever_pattern_holds_it() -> None:
    auth = authorizer(acl("foo", Op.READ), acl("f", Op.READ, DENY, pattern=PREFIXED))
    decision = auth.authorize(ALICE, HOST, Op.READ, TOPIC, "foo")
    assert not decision.allowed and "patternType=PREFIXED" in decision.rule
    assert not allowed(authorizer(acl("foo", Op.READ), acl("*", Op.ALL, DENY)), Op.READ)


def test_wildcard_principal_host_and_resource() -> None:
    assert allowed(authorizer(acl("foo", Op.READ, principal="User:*")), Op.READ)
    assert allowed(authorizer(acl("*", Op.READ)), Op.READ, name="anything")
    assert not allowed(authorizer(acl("*", Op.READ)), Op.READ, resource_type=GROUP)


def test_hosts_must_match() -> None:
    auth = authorizer(acl("foo", Op.READ, host=HOST))
    assert allowed(auth, Op.READ)
    assert not allowed(auth, Op.READ, host="10.0.0.1")
    denied_one_host = authorizer(acl("foo", Op.READ), acl("foo", Op.READ, DENY, host="10.0.0.1"))
    assert allowed(denied_one_host, Op.READ)
    assert not allowed(denied_one_host, Op.READ, host="10.0.0.1")


def test_principal_types_are_distinct() -> None:
    auth = authorizer(acl("foo", Op.READ, principal="Group:alice"))
    assert not allowed(auth, Op.READ)
    assert allowed(auth, Op.READ, principal=KafkaPrincipal("Group", "alice"))


@pytest.mark.parametrize(("pattern_name", "pattern", "resource", "expected"), [
    ("foo", PREFIXED, "foo", True),
    ("foo", PREFIXED, "foobar", True),
    ("foo", PREFIXED, "fo", False),
    ("foo", LITERAL, "foobar", False),
    ("f", PREFIXED, "foobar", True),   # testSingleCharacterResourceAcls
    ("*", PREFIXED, "foo", False),     # `*` is only a wildcard in a LITERAL pattern
    ("*", PREFIXED, "*foo", True),
    ("foo", LITERAL, "Foo", False),    # names are case-sensitive
])
def test_prefixed_and_literal_patterns(pattern_name: str, pattern: PatternType, resource: str,
                                       expected: bool) -> None:
    assert allowed(authorizer(acl(pattern_name, Op.WRITE, pattern=pattern)), Op.WRITE, name=resource) is expected


def test_resource_types_do_not_leak() -> None:
    auth = authorizer(acl("foo", Op.READ, resource_type=GROUP))
    assert allowed(auth, Op.READ, resource_type=GROUP)
    assert not allowed(auth, Op.READ, resource_type=TOPIC)


def test_an_acl_for_another_principal_denies_by_default_rule() -> None:
    decision = authorizer(acl("foo", Op.READ, principal=str(BOB)), allow_if_no_acl=True).authorize(
        ALICE, HOST, Op.READ, TOPIC, "foo")
    assert not decision.allowed and decision.rule == "DefaultDeny"


def test_authorized_operations_bit_field() -> None:
    auth = authorizer(acl("foo", Op.READ), acl("foo", Op.DELETE, DENY))
    field = auth.authorized_operations(ALICE, HOST, TOPIC, "foo")
    assert field == (1 << Op.READ) | (1 << Op.DESCRIBE)
    cluster = authorizer(acl("kafka-cluster", Op.ALL, resource_type=CLUSTER))
    expected = sum(1 << op for op in (Op.CREATE, Op.CLUSTER_ACTION, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS,
                                      Op.IDEMPOTENT_WRITE, Op.ALTER, Op.DESCRIBE))
    assert cluster.authorized_operations(ALICE, HOST, CLUSTER, "kafka-cluster") == expected
    assert authorizer().authorized_operations(ALICE, HOST, GROUP, "g") == 0


def test_audit_message_in_kafkas_wording() -> None:
    decision = authorizer().authorize(BOB, "127.0.0.1", Op.WRITE, TOPIC, "t")
    assert audit_message(BOB, decision, Op.WRITE, "127.0.0.1", TOPIC, "t", "Produce") == (
        "Principal = User:bob is Denied operation = WRITE from host = 127.0.0.1 on resource = Topic:LITERAL:t "
        "for request = Produce with resourceRefCount = 1 based on rule DefaultDeny")
    allow = authorizer(acl("t", Op.WRITE, principal=str(BOB))).authorize(BOB, "h", Op.WRITE, TOPIC, "t")
    assert allow.rule.startswith("MatchingAcl(acl=StandardAcl(resourceType=TOPIC, resourceName=t, "
                                 "patternType=LITERAL, principal=User:bob, host=*, operation=WRITE, "
                                 "permissionType=ALLOW)")


@pytest.mark.parametrize(("acls", "expected"), [
    ((), False),
    ((acl("t", Op.WRITE),), True),
    ((acl("t", Op.ALL),), True),
    ((acl("t", Op.READ),), False),  # no implied operations here
    ((acl("t", Op.WRITE), acl("t", Op.WRITE, DENY)), False),
    ((acl("t", Op.WRITE), acl("t", Op.WRITE, DENY, pattern=PREFIXED)), False),
    ((acl("tx", Op.WRITE, pattern=PREFIXED), acl("t", Op.WRITE, DENY, pattern=PREFIXED)), False),
    ((acl("t", Op.WRITE), acl("u", Op.WRITE, DENY)), True),
    ((acl("t", Op.WRITE, pattern=PREFIXED), acl("tx", Op.WRITE, DENY, pattern=PREFIXED)), True),
    ((acl("t", Op.WRITE), acl("*", Op.WRITE, DENY)), False),
    ((acl("t", Op.WRITE, principal=str(BOB)),), False),
])
def test_authorize_any_by_resource_type(acls: tuple[AclBinding, ...], expected: bool) -> None:
    assert authorizer(*acls).authorize_any(ALICE, HOST, Op.WRITE, TOPIC) is expected
    assert authorizer(*acls, super_users=(str(ALICE),)).authorize_any(ALICE, HOST, Op.WRITE, TOPIC)
