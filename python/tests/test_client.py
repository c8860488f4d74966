"""ardma.Client: the raw operations, batches, code shipping and stats, over TCP and UCX."""

import pytest

import ardma
from conftest import ACTIVE


def test_ping_and_round_trips(client):
    before = client.round_trips
    client.ping()
    assert client.round_trips == before + 1
    assert not client.is_cluster


def test_read_write_cas_fetch_add(client):
    addr = client.allocate(64)
    client.write(addr, b"hello, world")
    assert client.read(addr, 12) == b"hello, world"
    client.write(addr + 16, (5).to_bytes(8, "little"))
    assert client.cas(addr + 16, 5, 9) == (True, 5)
    assert client.cas(addr + 16, 5, 11) == (False, 9)
    assert client.fetch_add(addr + 16, 3) == 9
    assert int.from_bytes(client.read(addr + 16, 8), "little") == 12
    client.free(addr)
    with pytest.raises(ardma.FailedPreconditionError):
        client.free(addr)  # a double free


def test_a_batch_is_one_round_trip_with_results_in_order(client):
    addr = client.allocate(32)
    client.write(addr, bytes(32))
    batch = client.batch().write(addr, b"abcd").fetch_add(addr + 8, 7).read(addr, 4)
    batch.cas(addr + 8, 7, 1)
    assert len(batch) == 4
    before = client.round_trips
    assert batch.send() == [None, 0, b"abcd", (True, 7)]
    assert client.round_trips == before + 1
    assert batch.send() == []  # sent operations are not sent again


def test_load_and_execute(client):
    code = (ACTIVE / "ardma_test.so").read_bytes()
    library = client.load(code, "test")
    assert len(library) == 32
    assert client.load(code, "test") == library  # the same bytes, the same hash
    assert client.execute("test.echo", b"ping") == b"ping"
    assert client.execute("test.echo", "text", library=library) == b"text"
    with pytest.raises(ardma.NotFoundError):
        client.execute("test.no_such_function")
    with pytest.raises(ardma.InvalidArgumentError):
        client.execute("test.echo", b"", library=b"short")
    with pytest.raises(ardma.InvalidArgumentError):
        client.load(code, "test", kind="cobol")


def test_stats(client):
    client.ping()
    stats = client.stats()
    assert stats["heap.size"] == 64 << 20
    assert all(isinstance(v, int) for v in stats.values())
