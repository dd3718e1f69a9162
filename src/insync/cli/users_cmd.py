"""`insync users`: SCRAM users, what `kafka-configs.sh --entity-type users --alter --add-config 'SCRAM-SHA-512=
[password=...]'` and `--describe` do, as three verbs.

    insync users add --user NAME --password PW [--mechanism SCRAM-SHA-512] [--iterations 8192]
    insync users delete --user NAME [--mechanism SCRAM-SHA-512]
    insync users list [--user NAME ...]

`add` sends AlterUserScramCredentials with a fresh random salt and the salted password computed here, as Kafka's
admin client does: the password never leaves this process. A user may hold a credential for each mechanism;
`add` replaces the one for its mechanism. `list` prints each user's mechanisms and iteration counts
(DescribeUserScramCredentials: salts and keys are never shown). Errors are the controller's, e.g.
RESOURCE_NOT_FOUND for deleting a credential the user does not have.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from insync.admin import ADMIN_TIMEOUT_S, admin_client, kafka_error_text
from insync.config import ConfigError
from insync.security.scram import ITERATIONS_MAX, ITERATIONS_MIN

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_ITERATIONS = 8192  # kafka-configs.sh's default iterations is 4096; librdkafka's and KIP-554's examples 8192


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("users", help="add, delete and list SCRAM users")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    for verb, text in (("add", "add a user or change its password"), ("delete", "delete a user's credential"),
                       ("list", "list users and their mechanisms")):
        sub = verbs.add_parser(verb, help=text)
        sub.add_argument("--bootstrap-server", default=DEFAULT_BOOTSTRAP, help="host:port of any broker")
        if verb == "list":
            sub.add_argument("--user", action="append", default=[], help="only these users")
        else:
            sub.add_argument("--user", required=True)
            sub.add_argument("--mechanism", default="SCRAM-SHA-512", choices=MECHANISMS)
        if verb == "add":
            sub.add_argument("--password", required=True)
            sub.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                             help=f"{ITERATIONS_MIN}..{ITERATIONS_MAX}")
        sub.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialDeletion,
        UserScramCredentialUpsertion,
    )

    admin = admin_client(args.bootstrap_server)
    if args.verb == "list":
        return _list(admin, args.user)
    mechanism = ScramMechanism[args.mechanism.replace("-", "_")]
    if args.verb == "add":
        if not ITERATIONS_MIN <= args.iterations <= ITERATIONS_MAX:
            raise ConfigError(f"--iterations must be in {ITERATIONS_MIN}..{ITERATIONS_MAX}, got {args.iterations}")
        change: Any = UserScramCredentialUpsertion(args.user, ScramCredentialInfo(mechanism, args.iterations),
                                                   args.password.encode())
    else:
        change = UserScramCredentialDeletion(args.user, mechanism)
    future = admin.alter_user_scram_credentials([change], request_timeout=ADMIN_TIMEOUT_S)[args.user]
    try:
        future.result(timeout=ADMIN_TIMEOUT_S)
    except Exception as exc:  # confluent-kafka's KafkaException carries the controller's error
        print(f"Error: {kafka_error_text(exc)}", file=sys.stderr)
        return 1
    done = "Added" if args.verb == "add" else "Deleted"
    print(f"{done} {args.mechanism} credential for user {args.user}.")
    return 0


def _list(admin: Any, users: list[str]) -> int:
    try:
        if users:
            futures = admin.describe_user_scram_credentials(users, request_timeout=ADMIN_TIMEOUT_S)
            described = {user: future.result(timeout=ADMIN_TIMEOUT_S) for user, future in futures.items()}
        else:
            described = admin.describe_user_scram_credentials(request_timeout=ADMIN_TIMEOUT_S).result(
                timeout=ADMIN_TIMEOUT_S)
    except Exception as exc:
        print(f"Error: {kafka_error_text(exc)}", file=sys.stderr)
        return 1
    for user in sorted(described):
        infos = ", ".join(f"{info.mechanism.name.replace('_', '-')} (iterations {info.iterations})"
                          for info in described[user].scram_credential_infos)
        print(f"{user}: {infos}")
    return 0
