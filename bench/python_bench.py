#!/usr/bin/env python3
"""Python Dht.get over UCX against redis-py GET over a Unix socket, and the binding's cost per
call over the C++ call (bench/python_compare.sh starts the servers and runs this).

  python_bench.py ARDMA_ADDRESS REDIS_SOCKET [--rounds N] [--calls N]

One thread, one call at a time on each side, the same keys and value sizes. Rounds alternate
between the sides so drift in the machine's load hits both. Prints calls/s per round and side,
the medians, the ratio ardma/redis-py, and the binding's cost: (Python loop - C++ loop) / calls,
both loops of Dht.get on the same client and key, in the same round.
"""

import argparse
import statistics
import time

import redis

import ardma
from ardma import _ardma

SIZES = [3, 1024]


def timed(fn, calls, *args):
    """Seconds for `calls` calls of fn(*args): a plain loop, no wrapper per call."""
    start = time.perf_counter()
    for _ in range(calls):
        fn(*args)
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("ardma_address")
    parser.add_argument("redis_socket")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=100000)
    a = parser.parse_args()

    client = ardma.Client(a.ardma_address)
    dht = ardma.Dht(client)
    r = redis.Redis(unix_socket_path=a.redis_socket)
    for size in SIZES:
        value = b"v" * size
        dht.put("pybench", f"key{size}", value)
        r.set(f"key{size}", value)
        assert dht.get("pybench", f"key{size}") == value and r.get(f"key{size}") == value
    print(f"transport: {client.address}; redis-py {redis.__version__} on {a.redis_socket}; "
          f"{a.calls} calls a round, one at a time")
    for size in SIZES:
        key = f"key{size}".encode()
        ours, theirs, cpp, overhead = [], [], [], []
        for _ in range(a.rounds):
            t_py = timed(dht.get, a.calls, "pybench", key)
            t_cpp = _ardma._time_dht_get(dht, "pybench", key, a.calls)
            t_redis = timed(r.get, a.calls, key)
            ours.append(a.calls / t_py)
            cpp.append(a.calls / t_cpp)
            theirs.append(a.calls / t_redis)
            overhead.append((t_py - t_cpp) / a.calls * 1e6)
        for name, rates in [("ardma Dht.get (Python)", ours), ("ardma DhtClient::Get (C++)", cpp),
                            ("redis-py GET", theirs)]:
            print(f"{size:5d} B  {name:28s} " + " ".join(f"{x:9.0f}" for x in rates) +
                  f"   median {statistics.median(rates):9.0f} calls/s")
        print(f"{size:5d} B  ratio Python ardma / redis-py: "
              f"{statistics.median(ours) / statistics.median(theirs):.2f}x;  binding cost per "
              f"call: median {statistics.median(overhead):.2f} us "
              f"(rounds: {' '.join(f'{x:.2f}' for x in overhead)})")


if __name__ == "__main__":
    main()
