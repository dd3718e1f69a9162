"""`insync certs create --dir DIR`: a CA, a node certificate and client certificates for a local TLS cluster
(see chaos/certs.py)."""

from __future__ import annotations

import argparse
from typing import Any

from insync.chaos import certs


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("certs", help="make TLS certificates for a local cluster")
    commands = parser.add_subparsers(dest="certs_command", metavar="ACTION")
    commands.required = True
    create = commands.add_parser("create", help="a CA, a node certificate and client certificates (PEM)")
    create.add_argument("--dir", required=True, help="where to write them")
    create.add_argument("--client", action="append", default=None, metavar="NAME",
                        help="a client certificate with subject CN=NAME (repeatable; default: client)")
    create.add_argument("--host", action="append", default=None, metavar="HOST",
                        help="a host name or address the node certificate is valid for (repeatable; default: "
                             "localhost and 127.0.0.1)")
    create.add_argument("--days", type=int, default=365, help="validity")
    create.set_defaults(func=_create)


def _create(args: argparse.Namespace) -> int:
    files = certs.create(args.dir, args.client or ["client"], args.host or list(certs.DEFAULT_HOSTS), args.days)
    print(f"CA certificate:   {files.ca}")
    print(f"node keystore:    {files.node}")
    for name in args.client or ["client"]:
        certificate, key = files.client(name)
        print(f"client {name}: {certificate} (key {key})")
    return 0
