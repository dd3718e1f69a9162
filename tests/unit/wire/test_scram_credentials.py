"""DescribeUserScramCredentials as Kafka's ScramImage answers it, from the broker's image."""

from __future__ import annotations

import pytest
from apis_helpers import client_request, request_entity, wire

from insync.metadata.image import MetadataImage
from insync.wire import scram_credentials
from insync.wire.versions import DESCRIBE_USER_SCRAM_CREDENTIALS


@pytest.mark.parametrize("users", [None, ("zed",)])
def test_describe_sets_no_top_level_message(users: tuple[str, ...] | None) -> None:
    """Kafka sets none on the response: the field's default, "" (not null)."""
    named = None if users is None else tuple(
        request_entity(DESCRIBE_USER_SCRAM_CREDENTIALS, 0, "UserName", name=u) for u in users)
    request = client_request(DESCRIBE_USER_SCRAM_CREDENTIALS, 0, users=named)
    answer = wire(scram_credentials.describe_user_scram_credentials(request, MetadataImage()))
    assert (answer.error_code, answer.error_message) == (0, "")
    assert [(r.user, r.error_code) for r in answer.results] == [(u, 91) for u in users or ()]
