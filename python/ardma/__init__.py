"""The Active RDMA toolkit's clients for Python.

    import ardma

    client = ardma.Client("127.0.0.1:15712")        # or "ucx://...", "etcd://.../cluster"
    dht = ardma.Dht(client)                          # mode="rdma": one-sided from here
    dht.put("sessions", b"alice", b"token-1")
    dht.get("sessions", b"alice")                    # b"token-1"
    with ardma.Lock(client, "report") as lock:       # FCFS, with a fencing token
        print(lock.token)

Every error is an ardma.Error; its subclass names the status code (ardma.NotFoundError, ...).
Calls release the GIL while they wait, and threads may share one Client. docs/python.md has more.
"""

import fnmatch
import io
import posixpath

from ardma._ardma import (  # noqa: F401  (re-exported)
    AbortedError,
    AlreadyExistsError,
    Batch,
    CancelledError,
    Client,
    DataLossError,
    DeadlineExceededError,
    Dht,
    Error,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    List,
    Lock,
    NotFoundError,
    OutOfRangeError,
    PermissionDeniedError,
    ResourceExhaustedError,
    Stat,
    UnauthenticatedError,
    UnavailableError,
    UnimplementedError,
    UnknownError,
    __version__,
    _Dfs,
    least_loaded,
)

__all__ = [
    "Client", "Batch", "Dht", "Lock", "List", "Dfs", "DfsFile", "Stat", "least_loaded", "Error",
    "AbortedError", "AlreadyExistsError", "CancelledError", "DataLossError",
    "DeadlineExceededError", "FailedPreconditionError", "InternalError", "InvalidArgumentError",
    "NotFoundError", "OutOfRangeError", "PermissionDeniedError", "ResourceExhaustedError",
    "UnauthenticatedError", "UnavailableError", "UnimplementedError", "UnknownError",
]


def _dht_items(self, table, count=100):
    """Every (key, value) of `table`, scanning `count` keys a step (Dht.scan's guarantee: a key
    present throughout comes at least once; one put or removed meanwhile may or may not)."""
    cursor = 0
    while True:
        cursor, items = self.scan(table, cursor, count)
        yield from items
        if cursor == 0:
            return


Dht.items = _dht_items


class Dfs(_Dfs):
    """The in-memory file system of one server (not a cluster's).

    Dfs(client, fs="default", mode="active")

    Paths are absolute ("/src/main.c"). stat/listdir/scandir/walk/glob as os and glob do;
    read_file/write_file for whole files, pread/pwrite for ranges, open() for a file object.
    """

    def listdir(self, path):
        """The names in directory `path` (NotFoundError if it does not exist)."""
        return [name for name, _ in self.scandir(path)]

    def exists(self, path):
        try:
            self.stat(path)
            return True
        except NotFoundError:
            return False

    def walk(self, top):
        """As os.walk (top-down): (dirpath, dirnames, filenames) for `top` and every directory
        under it. Symbolic links are listed with the files and not followed."""
        dirs, files = [], []
        for name, stat in self.scandir(top):
            (dirs if stat.is_dir() else files).append(name)
        yield top, dirs, files
        for name in dirs:
            yield from self.walk(posixpath.join(top, name))

    def glob(self, pattern, top="/"):
        """The paths under `top` whose whole path matches `pattern` (fnmatch: "*" also matches
        "/", so "/src/*.c" finds .c files at any depth under /src), in walk order."""
        for dirpath, dirs, files in self.walk(top):
            for name in dirs + files:
                path = posixpath.join(dirpath, name)
                if fnmatch.fnmatchcase(path, pattern):
                    yield path

    def open(self, path, mode="rb"):
        """A binary file object over `path`: "rb", "wb" (created or truncated), "ab", "r+b"."""
        return DfsFile(self, path, mode)


class DfsFile(io.RawIOBase):
    """A file of a Dfs, as a binary file object (read, write, seek, tell)."""

    def __init__(self, dfs, path, mode="rb"):
        super().__init__()
        if mode not in ("rb", "wb", "ab", "r+b", "rb+"):
            raise ValueError(f"mode must be rb, wb, ab or r+b, not {mode!r}")
        self._dfs, self.name, self.mode = dfs, path, mode
        if mode == "wb":
            dfs.create(path, exclusive=False)
            dfs.truncate(path, 0)
        elif mode == "ab" and not dfs.exists(path):
            dfs.create(path)
        stat = dfs.stat(path)
        if stat.is_dir():
            raise IsADirectoryError(path)
        self._pos = stat.size if mode == "ab" else 0

    def readable(self):
        return self.mode != "wb" and self.mode != "ab"

    def writable(self):
        return self.mode != "rb"

    def seekable(self):
        return True

    def tell(self):
        return self._pos

    def seek(self, offset, whence=io.SEEK_SET):
        if whence == io.SEEK_SET:
            self._pos = offset
        elif whence == io.SEEK_CUR:
            self._pos += offset
        elif whence == io.SEEK_END:
            self._pos = self._dfs.stat(self.name).size + offset
        else:
            raise ValueError(f"bad whence {whence}")
        if self._pos < 0:
            raise ValueError("negative position")
        return self._pos

    def readinto(self, buffer):
        if not self.readable():
            raise io.UnsupportedOperation("not readable")
        data = self._dfs.pread(self.name, self._pos, len(buffer))
        buffer[: len(data)] = data
        self._pos += len(data)
        return len(data)

    def readall(self):
        if not self.readable():
            raise io.UnsupportedOperation("not readable")
        size = self._dfs.stat(self.name).size
        data = self._dfs.pread(self.name, self._pos, max(0, size - self._pos)) if size > self._pos else b""
        self._pos += len(data)
        return data

    def write(self, data):
        if not self.writable():
            raise io.UnsupportedOperation("not writable")
        if self.mode == "ab":
            self._pos = self._dfs.stat(self.name).size
        data = bytes(data)
        self._dfs.pwrite(self.name, self._pos, data)  # (returns the file's new size)
        self._pos += len(data)
        return len(data)

    def truncate(self, size=None):
        size = self._pos if size is None else size
        self._dfs.truncate(self.name, size)
        return size
