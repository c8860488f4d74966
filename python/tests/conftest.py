"""Fixtures of the Python package's tests: a real ardmad (from $ARDMA_BIN_DIR, else build/bin) on
127.0.0.1:0 with UCX on, and clients of it over each transport."""

import hashlib
import os
import pathlib
import subprocess
import tempfile
import time

import pytest

# UCX over shared memory, set before the first UCX use in this process (deterministic in CI).
os.environ.setdefault("UCX_TLS", "shm,self")

import ardma  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("ARDMA_BIN_DIR", ROOT / "build" / "bin"))
ACTIVE = BIN.parent / "active"
TRANSPORTS = ["tcp", "ucx"]
MODES = ["active", "rdma"]


def wait_for(predicate, timeout=10.0, what="a condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


class Server:
    """An ardmad process; stopped (and its directory removed) by stop()."""

    def __init__(self, *flags):
        self.dir = tempfile.TemporaryDirectory(prefix="ardma_py_")
        port_file = pathlib.Path(self.dir.name) / "port"
        self.log = open(pathlib.Path(self.dir.name) / "log", "w+")
        self.process = subprocess.Popen(
            [str(BIN / "ardmad"), "--listen", "127.0.0.1:0", "--memory", "64M", "--ucx", "on",
             "--port-file", str(port_file), *flags],
            stdout=self.log, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: port_file.exists() and port_file.read_text().strip()
                     or self.process.poll() is not None, what="ardmad's port file")
            if self.process.poll() is not None:
                raise RuntimeError(f"ardmad exited: {self.output()}")
        except BaseException:
            self.stop()
            raise
        self.address = port_file.read_text().strip()

    def output(self):
        self.log.seek(0)
        return self.log.read()

    def address_for(self, transport):
        return self.address if transport == "tcp" else f"ucx://{self.address}"

    def stop(self):
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()
        self.dir.cleanup()


@pytest.fixture(scope="session")
def server():
    s = Server()
    yield s
    s.stop()


@pytest.fixture(params=TRANSPORTS)
def transport(request):
    return request.param


@pytest.fixture
def client(server, transport):
    return ardma.Client(server.address_for(transport))


@pytest.fixture(params=MODES)
def mode(request):
    return request.param


@pytest.fixture
def unique(request):
    """A short name no other test uses (tables, locks, lists and paths live on one server)."""
    return "t" + hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:12]


class Cluster:
    """A real etcd and `members` ardmad members with a slot map (as scripts/cluster.sh)."""

    def __init__(self, members=2):
        self.dir = tempfile.TemporaryDirectory(prefix="ardma_pycluster_")
        self.processes, self.members = [], []
        try:
            self._start_etcd()
            for i in range(members):
                self._start_member(i)
            subprocess.run([str(BIN / "ardma"), "--server", self.address, "cluster", "create"],
                           check=True, capture_output=True, timeout=30)
        except BaseException:
            self.stop()
            raise

    def _start_etcd(self):
        import random
        for _ in range(5):  # etcd cannot bind port 0: try free-looking ports
            port = random.randrange(20000, 50000)
            etcd = subprocess.Popen(
                ["/usr/bin/etcd", "--name", "py", "--data-dir", f"{self.dir.name}/etcd",
                 "--listen-client-urls", f"http://127.0.0.1:{port}",
                 "--advertise-client-urls", f"http://127.0.0.1:{port}",
                 "--listen-peer-urls", f"http://127.0.0.1:{port + 1}",
                 "--initial-advertise-peer-urls", f"http://127.0.0.1:{port + 1}",
                 "--initial-cluster", f"py=http://127.0.0.1:{port + 1}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            self.address = f"etcd://127.0.0.1:{port}/py"
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and etcd.poll() is None:
                status = subprocess.run([str(BIN / "ardma"), "--server", self.address, "cluster",
                                         "status"], capture_output=True, timeout=30)
                if status.returncode == 0:
                    self.processes.append(etcd)
                    return
                time.sleep(0.1)
            etcd.kill()
            etcd.wait()
            subprocess.run(["rm", "-rf", f"{self.dir.name}/etcd"], check=True)
        raise RuntimeError("etcd did not start")

    def _start_member(self, i):
        port_file = pathlib.Path(self.dir.name) / f"port{i}"
        member = subprocess.Popen(
            [str(BIN / "ardmad"), "--listen", "127.0.0.1:0", "--port-file", str(port_file),
             "--memory", "32M", "--quiet", "--cluster", self.address, "--cluster-ttl", "2s"])
        self.processes.append(member)
        wait_for(lambda: port_file.exists() and port_file.read_text().strip(),
                 what=f"member {i}'s port file")
        self.members.append(port_file.read_text().strip())

    def stop(self):
        for p in reversed(self.processes):
            if p.poll() is None:
                p.terminate()
        for p in self.processes:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.dir.cleanup()


@pytest.fixture(scope="session")
def cluster():
    c = Cluster()
    yield c
    c.stop()
