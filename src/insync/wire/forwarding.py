"""What a broker answers for a request it forwards to the controller when no controller answers: every resource
of the request refused with NOT_CONTROLLER (which admin clients retry, the next try going to the next voter), in
the response shape of the request's API."""

from __future__ import annotations

from typing import Any

from insync import errors
from insync.config import BrokerConfig
from insync.errors import KafkaError
from insync.metadata.image import MetadataImage
from insync.protocol.codec import DecodedRequest
from insync.wire import acls, configs, reassignments, scram_credentials, topics, versions


def refuse_forwarded(request: DecodedRequest, config: BrokerConfig, image: MetadataImage, message: str,
                     error: KafkaError = errors.NOT_CONTROLLER) -> Any:
    """`error` is NOT_CONTROLLER at a broker; a controller refuses a principal without ClusterAction with
    CLUSTER_AUTHORIZATION_FAILED (`access_refusals.controller_refusal`)."""
    key = request.api_key
    if key in (versions.INCREMENTAL_ALTER_CONFIGS, versions.ALTER_CONFIGS):
        return configs.refuse_alter_configs(request, error, message)
    if key in (versions.ALTER_PARTITION_REASSIGNMENTS, versions.LIST_PARTITION_REASSIGNMENTS):
        return reassignments.refuse(request, error, message)
    if key in (versions.CREATE_ACLS, versions.DELETE_ACLS):
        return acls.refuse(request, error, message)
    if key == versions.ALTER_USER_SCRAM_CREDENTIALS:
        return scram_credentials.refuse_alter(request, error, message)
    return topics.refuse_all(request, config, image, error, message)
