"""The services' classes, in both modes over TCP and UCX: Dht, Lock, List, Dfs, least_loaded."""

import io

import pytest

import ardma


def test_dht(client, mode, unique):
    dht = ardma.Dht(client, mode=mode)
    assert dht.mode == mode
    assert dht.put(unique, b"alice", b"1") is True
    assert dht.put(unique, "bob", "2") is True         # str is UTF-8 bytes
    assert dht.put(unique, b"alice", b"3") is False    # replaced
    assert dht.get(unique, b"alice") == b"3"
    assert dht.get(unique, "bob") == b"2"
    assert dht.insert(unique, b"alice", b"4") == b"3"  # present: not set
    assert dht.insert(unique, b"carol", bytearray(b"5")) is None
    assert dht.contains(unique, b"carol") and not dht.contains(unique, b"dave")
    assert dht.size(unique) == 3
    assert dht.remove(unique, b"bob") is True
    assert dht.remove(unique, b"bob") is False
    with pytest.raises(ardma.NotFoundError):
        dht.get(unique, b"bob")
    with pytest.raises(LookupError):
        dht.get(unique, b"bob")
    for i in range(200):
        dht.put(unique, f"k{i}", b"\x00\xff" * i)
    items = dict(dht.items(unique, count=7))
    assert len(items) == 202
    assert items[b"k150"] == b"\x00\xff" * 150
    cursor, page = dht.scan(unique, 0, 5)
    assert cursor != 0 and 0 < len(page)


def test_lock_is_fcfs_with_growing_tokens(client, mode, unique):
    lock = ardma.Lock(client, unique, mode=mode)
    assert not lock.held and lock.token is None
    with lock as held:
        assert held is lock and lock.held
        first = lock.token
        other = ardma.Lock(client, unique, mode=mode, timeout=0.2)
        assert other.try_acquire() is False
        with pytest.raises(ardma.DeadlineExceededError):
            other.acquire()
        assert lock.inspect()["holders"] == 1
        lock.renew()
    assert not lock.held
    second = lock.acquire()
    assert second > first
    with pytest.raises(ardma.FailedPreconditionError):
        lock.acquire()  # held already
    lock.release()
    with pytest.raises(ardma.FailedPreconditionError):
        lock.release()
    readers = [ardma.Lock(client, unique + "_rw", mode=mode, shared=True) for _ in range(3)]
    for r in readers:
        assert r.try_acquire()
    for r in readers:
        r.release()


def test_list(client, mode, unique):
    lst = ardma.List(client, mode=mode)
    lst.append(unique, 7)
    lst.append(unique, b"bytes")
    lst.prepend(unique, "text")
    assert lst.size(unique) == 3
    assert lst.items(unique) == [b"text", 7, b"bytes"]
    assert lst.get(unique, 1) == 7
    assert lst.remove(unique, 0) == b"text"
    assert lst.items(unique) == [7, b"bytes"]
    with pytest.raises(ardma.OutOfRangeError):
        lst.get(unique, 5)


def test_dfs(client, mode, unique):
    fs = ardma.Dfs(client, mode=mode)
    top = "/" + unique
    fs.mkdir(top)
    fs.mkdir(top + "/src")
    fs.write_file(top + "/src/a.c", b"int a;\n")
    fs.write_file(top + "/src/b.h", "int b();\n")
    fs.write_file(top + "/README", b"read me")
    assert fs.read_file(top + "/src/a.c") == b"int a;\n"
    assert sorted(fs.listdir(top)) == ["README", "src"]
    st = fs.stat(top + "/README")
    assert st.is_file() and st.size == 7 and st.type == "file"
    assert fs.stat(top + "/src").is_dir()
    walked = {d: (sorted(ds), sorted(fs_)) for d, ds, fs_ in fs.walk(top)}
    assert walked == {top: (["src"], ["README"]), top + "/src": ([], ["a.c", "b.h"])}
    assert list(fs.glob(top + "/*.c", top)) == [top + "/src/a.c"]
    with fs.open(top + "/log", "wb") as f:
        assert f.write(b"one ") == 4
        assert f.write(b"two") == 3
        assert f.tell() == 7
    with fs.open(top + "/log", "ab") as f:
        f.write(b" three")
    with fs.open(top + "/log", "rb") as f:
        assert f.read(3) == b"one"
        f.seek(4)
        assert f.read() == b"two three"
    with io.BufferedReader(fs.open(top + "/log")) as f:
        assert f.readline() == b"one two three"
    assert fs.pwrite(top + "/log", 0, b"ONE") == 13  # the file's new size
    assert fs.pread(top + "/log", 0, 7) == b"ONE two"
    fs.rename(top + "/log", top + "/log2")
    assert not fs.exists(top + "/log") and fs.exists(top + "/log2")
    fs.symlink("README", top + "/link")
    assert fs.readlink(top + "/link") == "README"
    fs.unlink(top + "/log2")
    with pytest.raises(ardma.NotFoundError):
        fs.stat(top + "/log2")
    with pytest.raises(ardma.Error):
        fs.rmdir(top + "/src")  # not empty


def test_least_loaded(server):
    # An address that cannot be polled is never chosen.
    assert ardma.least_loaded(["127.0.0.1:1", server.address], interval=0.05) == server.address
    with pytest.raises(ardma.InvalidArgumentError):
        ardma.least_loaded([server.address], scheme="guess")
