"""Threads sharing one client: calls release the GIL while they wait, and stay correct."""

import threading
import time

import ardma


def test_eight_threads_wait_at_once(server, transport, unique):
    """Eight threads of one client each wait (2 s, then DeadlineExceededError) for a lock another
    client holds. Had a waiting call kept the GIL, the waits would run one after another; they
    all overlap: every wait begins before the first one ends."""
    holder = ardma.Client(server.address)
    held = [ardma.Lock(holder, f"{unique}_{i}") for i in range(8)]
    for lock in held:
        lock.acquire()
    shared = ardma.Client(server.address_for(transport))
    spans, errors = [None] * 8, []

    def wait(i):
        start = time.monotonic()
        try:
            ardma.Lock(shared, f"{unique}_{i}", timeout=2.0).acquire()
            errors.append(f"thread {i} got a held lock")
        except ardma.DeadlineExceededError:
            pass
        spans[i] = (start, time.monotonic())

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(8)]
    wall = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - wall
    assert not errors
    assert max(s for s, _ in spans) < min(e for _, e in spans), spans
    print(f"8 waits of 2 s on one client: {wall:.2f} s wall")
    for lock in held:
        lock.release()


def test_a_waiting_call_lets_this_thread_run(server, transport, unique):
    """A thread blocked in acquire() must not stop this one from releasing what it waits for."""
    holder = ardma.Lock(ardma.Client(server.address), unique)
    holder.acquire()
    client = ardma.Client(server.address_for(transport))
    got = []
    waiter = threading.Thread(target=lambda: got.append(ardma.Lock(client, unique).acquire()))
    waiter.start()
    deadline = time.monotonic() + 30
    while holder.inspect()["waiters"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)  # Python runs here while the waiter waits in C++
    assert holder.inspect()["waiters"] == 1
    holder.release()
    waiter.join(30)
    assert got and got[0] > 0


def test_eight_threads_share_one_client_correctly(server, transport, mode, unique):
    client = ardma.Client(server.address_for(transport))
    dht = ardma.Dht(client, mode=mode)
    failures = []

    def work(t):
        try:
            for i in range(100):
                key = f"{t}-{i}".encode()
                dht.put(unique, key, key * 3)
                if dht.get(unique, key) != key * 3:
                    failures.append(key)
        except ardma.Error as e:
            failures.append(repr(e))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    assert dht.size(unique) == 800
