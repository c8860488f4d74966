"""A cluster's client (etcd://...): the services route by key over a real etcd and two members."""

import pytest

import ardma


def test_services_over_a_cluster(cluster, mode):
    client = ardma.Client(cluster.address)
    assert client.is_cluster
    dht = ardma.Dht(client, mode=mode)
    table = f"c{mode}"
    for i in range(60):
        dht.put(table, f"key{i}", f"value{i}")
    assert dht.get(table, "key42") == b"value42"
    assert dht.size(table) == 60
    assert dict(dht.items(table, count=8)) == {f"key{i}".encode(): f"value{i}".encode()
                                              for i in range(60)}
    # The keys are spread over both members: each member alone holds some, not all.
    per_member = [ardma.Dht(ardma.Client(m), mode=mode).size(table) for m in cluster.members]
    assert sum(per_member) == 60 and all(0 < n < 60 for n in per_member), per_member
    with ardma.Lock(client, f"lock{mode}", mode=mode) as lock:
        assert lock.token > 0
    lst = ardma.List(client, mode=mode)
    lst.append(f"list{mode}", 1)
    assert lst.items(f"list{mode}") == [1]
    with pytest.raises(ardma.FailedPreconditionError, match="one server"):
        client.read(0, 8)  # raw memory has no key to route by
