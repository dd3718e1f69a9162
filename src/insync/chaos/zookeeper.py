"""A standalone ZooKeeper server on 127.0.0.1 for local clusters and tests (`metadata.store=zookeeper`).

It runs Debian's ZooKeeper (`apt-get install zookeeper`, part of `make setup`) as a child process:
`java -cp /usr/share/java/zookeeper.jar org.apache.zookeeper.server.ZooKeeperServerMain zoo.cfg`, with its data
and log in a directory of its own, bound to 127.0.0.1 with the admin server off. `start()` returns once the port
answers `ruok` with `imok`; `stop()` terminates it (SIGTERM, then SIGKILL after a deadline).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

from insync.config import ConfigError
from insync.waiting import WaitTimeout, wait_until

ZOOKEEPER_JARS = ("/usr/share/java/zookeeper.jar", "/etc/zookeeper/conf")
START_DEADLINE_S = 30.0
STOP_DEADLINE_S = 10.0
TICK_MS = 500  # sessions may be as short as 2 ticks: tests use 1-3 s sessions


def available() -> str | None:
    """Why a ZooKeeper server cannot be started here, or None if it can."""
    if shutil.which("java") is None:
        return "no java on PATH (make setup installs a Java runtime)"
    if not os.path.exists(ZOOKEEPER_JARS[0]):
        return f"{ZOOKEEPER_JARS[0]} is missing (make setup installs Debian's zookeeper package)"
    return None


def _ruok(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0) as sock:
            sock.sendall(b"ruok")
            return sock.recv(16) == b"imok"
    except OSError:
        return False


class ZooKeeperServer:
    """One ZooKeeper server process; `with ZooKeeperServer(dir, port) as zk: zk.connect("/chroot")`."""

    def __init__(self, directory: str | Path, port: int) -> None:
        self.directory = Path(directory)
        self.port = port
        self._process: subprocess.Popen[bytes] | None = None

    def connect(self, chroot: str = "") -> str:
        """A `zookeeper.connect` value for this server."""
        assert chroot == "" or chroot.startswith("/"), chroot
        return f"127.0.0.1:{self.port}{chroot}"

    def start(self) -> ZooKeeperServer:
        problem = available()
        if problem is not None:
            raise ConfigError(f"cannot start ZooKeeper: {problem}")
        data = self.directory / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.directory / "zoo.cfg"
        config.write_text(f"tickTime={TICK_MS}\ndataDir={data}\nclientPort={self.port}\nclientPortAddress=127.0.0.1\n"
                          "admin.enableServer=false\n4lw.commands.whitelist=ruok\nminSessionTimeout=1000\n"
                          "maxSessionTimeout=60000\n")
        log = open(self.directory / "zookeeper.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            self._process = subprocess.Popen(
                ["java", "-Xmx256m", "-cp", ":".join(ZOOKEEPER_JARS),
                 "org.apache.zookeeper.server.ZooKeeperServerMain", str(config)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            log.close()
        process = self._process

        def answering() -> bool:
            if process.poll() is not None:
                raise ConfigError(f"it exited with status {process.returncode}")
            return _ruok(self.port)

        try:
            wait_until(answering, START_DEADLINE_S, "ruok answered", interval_s=0.1)
        except (ConfigError, WaitTimeout) as exc:
            self.stop()
            raise ConfigError(f"ZooKeeper did not start on 127.0.0.1:{self.port} ({exc}); see "
                              f"{self.directory / 'zookeeper.log'}") from None
        return self

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_DEADLINE_S)

    def __enter__(self) -> ZooKeeperServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
