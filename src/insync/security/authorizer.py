"""insync's standard authorizer: Kafka's `StandardAuthorizer` decision, as a pure function of the ACLs.

`authorize(principal, host, operation, resource_type, name)` decides one action on one literal resource:
1. a principal listed in `super.users` may do anything;
2. otherwise the ACLs whose pattern applies (a LITERAL of the same name, the LITERAL `*`, every PREFIXED the
   name starts with) and that name the principal (or `User:*`), the host (or `*`) and the operation decide: any
   DENY denies; READ, WRITE, DELETE or ALTER allowed imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS;
3. when nothing matched, a resource with no ACL at all follows `allow.everyone.if.no.acl.found` (false by
   default, as in Kafka); one with ACLs, just none for this principal, is denied.
The `Decision` keeps the rule that decided, so the authorization log quotes it in Kafka's wording
(`kafka.authorizer.logger`). `authorized_operations` is the bit field Metadata, DescribeGroups and
DescribeCluster report. Where Kafka walks a map sorted by reversed name, the LITERAL ACLs are found by their name
and the PREFIXED ones scanned: a cluster holds few prefixes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from insync.security.acl import (
    SUPPORTED_OPERATIONS,
    WILDCARD,
    WILDCARD_PRINCIPAL,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from insync.security.principal import KafkaPrincipal

IMPLIES_DESCRIBE = frozenset((AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                              AclOperation.ALTER))
IMPLIES_DESCRIBE_CONFIGS = frozenset((AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS))
# Kafka's SecurityUtils.resourceTypeName: how the log names resource types.
RESOURCE_TYPE_NAMES = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group", ResourceType.CLUSTER: "Cluster",
                       ResourceType.TRANSACTIONAL_ID: "TransactionalId",
                       ResourceType.DELEGATION_TOKEN: "DelegationToken", ResourceType.USER: "User"}


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    rule: str  # Kafka's MatchingRule.toString: SuperUser, DefaultAllow, DefaultDeny, MatchingAcl(acl=...)

    def __bool__(self) -> bool:
        return self.allowed


SUPER_USER = Decision(True, "SuperUser")
DEFAULT_ALLOW = Decision(True, "DefaultAllow")
DEFAULT_DENY = Decision(False, "DefaultDeny")


def entry_result(binding: AclBinding, principal: str, host: str, operation: AclOperation) -> bool | None:
    """Kafka's StandardAuthorizerData.findResult: None when the entry does not apply, else allow or deny."""
    entry = binding.entry
    if entry.principal not in (principal, WILDCARD_PRINCIPAL) or entry.host not in (host, WILDCARD):
        return None
    allow = entry.permission_type == AclPermissionType.ALLOW
    if entry.operation != AclOperation.ALL:
        if allow and operation == AclOperation.DESCRIBE:
            implied = entry.operation in IMPLIES_DESCRIBE
        elif allow and operation == AclOperation.DESCRIBE_CONFIGS:
            implied = entry.operation in IMPLIES_DESCRIBE_CONFIGS
        else:
            implied = entry.operation == operation
        if not implied:
            return None
    return allow


@dataclass(frozen=True, slots=True)
class Authorizer:
    acls: tuple[AclBinding, ...] = ()
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False
    # The ACLs that may apply to a resource, found without a scan: LITERAL ones by (type, name), the `*` wildcard
    # among them; PREFIXED ones by type, checked one by one (a cluster holds few).
    _literal: Mapping[tuple[ResourceType, str], tuple[AclBinding, ...]] = field(init=False, repr=False)
    _prefixed: Mapping[ResourceType, tuple[AclBinding, ...]] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        literal: dict[tuple[ResourceType, str], list[AclBinding]] = {}
        prefixed: dict[ResourceType, list[AclBinding]] = {}
        for binding in self.acls:  # bounded by the cluster's ACLs
            pattern = binding.pattern
            if pattern.pattern_type == PatternType.PREFIXED:
                prefixed.setdefault(pattern.resource_type, []).append(binding)
            else:
                literal.setdefault((pattern.resource_type, pattern.name), []).append(binding)
        object.__setattr__(self, "_literal", {key: tuple(found) for key, found in literal.items()})
        object.__setattr__(self, "_prefixed", {key: tuple(found) for key, found in prefixed.items()})

    @staticmethod
    def create(acls: Iterable[AclBinding], super_users: Iterable[str], allow_if_no_acl: bool) -> Authorizer:
        return Authorizer(tuple(acls), frozenset(super_users), allow_if_no_acl)

    def _applying(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        """The ACLs whose pattern covers the literal resource `name` (`ResourcePattern.applies_to`)."""
        found = [*self._literal.get((resource_type, name), ()),
                 *(self._literal.get((resource_type, WILDCARD), ()) if name != WILDCARD else ())]
        found.extend(b for b in self._prefixed.get(resource_type, ()) if name.startswith(b.pattern.name))
        return found

    def authorize(self, principal: KafkaPrincipal, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> Decision:
        assert operation not in (AclOperation.ANY, AclOperation.ALL, AclOperation.UNKNOWN), operation
        assert resource_type not in (ResourceType.ANY, ResourceType.UNKNOWN), resource_type
        if str(principal) in self.super_users:
            return SUPER_USER
        allow: AclBinding | None = None
        has_resource_acls = False
        for binding in self._applying(resource_type, name):  # bounded by the cluster's ACLs
            assert binding.pattern.applies_to(resource_type, name), (binding, name)
            has_resource_acls = True
            result = entry_result(binding, str(principal), host, operation)
            if result is False:
                return Decision(False, f"MatchingAcl(acl={binding})")
            if result is True:
                allow = binding
        if allow is not None:
            return Decision(True, f"MatchingAcl(acl={allow})")
        if has_resource_acls:
            return DEFAULT_DENY
        return DEFAULT_ALLOW if self.allow_everyone_if_no_acl_found else DEFAULT_DENY

    def authorize_any(self, principal: KafkaPrincipal, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """Kafka's authorizeByResourceType: may the principal `operation` on SOME resource of the type? Yes for a
        super user; no under a DENY of the literal `*`; else yes if one ALLOW pattern (literal or prefix) is not
        covered by a DENY (a DENY of the same literal, or a DENY prefix of it). No implied operations here."""
        if str(principal) in self.super_users:
            return True
        allows: list[ResourcePattern] = []
        denies: list[ResourcePattern] = []
        for binding in self.acls:  # bounded by the cluster's ACLs
            entry = binding.entry
            if (binding.pattern.resource_type != resource_type or entry.operation not in (operation, AclOperation.ALL)
                    or entry.principal not in (str(principal), WILDCARD_PRINCIPAL) or entry.host not in (host, WILDCARD)):
                continue
            (allows if entry.permission_type == AclPermissionType.ALLOW else denies).append(binding.pattern)
        if any(d.pattern_type == PatternType.LITERAL and d.name == WILDCARD for d in denies):
            return False
        return any(not _covered(allow, denies) for allow in allows)

    def authorized_operations(self, principal: KafkaPrincipal, host: str, resource_type: ResourceType, name: str) -> int:
        """Kafka's bit field: bit `op` set for each of the resource type's operations the principal may do."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits


def _covered(allow: ResourcePattern, denies: list[ResourcePattern]) -> bool:
    """Whether a DENY pattern takes away everything `allow` grants."""
    for deny in denies:
        if deny.pattern_type == PatternType.PREFIXED and allow.name.startswith(deny.name):
            return True
        if allow.pattern_type == PatternType.LITERAL and deny.pattern_type == PatternType.LITERAL and deny.name == allow.name:
            return True
    return False


def audit_message(principal: KafkaPrincipal, decision: Decision, operation: AclOperation, host: str,
                  resource_type: ResourceType, name: str, api_name: str) -> str:
    """The line Kafka's authorizer writes to `kafka.authorizer.logger` (always a literal resource, one reference)."""
    verdict = "Allowed" if decision.allowed else "Denied"
    return (f"Principal = {principal} is {verdict} operation = {operation.name} from host = {host} on resource = "
            f"{RESOURCE_TYPE_NAMES[resource_type]}:LITERAL:{name} for request = {api_name} with "
            f"resourceRefCount = 1 based on rule {decision.rule}")
