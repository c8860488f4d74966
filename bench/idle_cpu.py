#!/usr/bin/env python3
"""CPU an idle ardmad and an idle ardma-ccd use, from the kernel's accounting (schedstat).

  PYTHONPATH=build/python python3 bench/idle_cpu.py [BIN_DIR] [SECONDS]

Starts ardmad (UCX over shared memory: UCX_TLS=shm,self), opens 0 and then 100 idle connections
(half over UCX, through the Python client), and prints the share of a core ardmad's threads used
over SECONDS (default 60); then an idle ardma-ccd over TCP and over UCX, and ardmad beside it.
"""
import os
import subprocess
import sys
import tempfile
import time

import ardma

BIN = sys.argv[1] if len(sys.argv) > 1 else "build/bin"
SECONDS = float(sys.argv[2]) if len(sys.argv) > 2 else 60.0


def cpu(pid):
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                total += int(f.read().split()[0])
        except OSError:
            pass
    return total / 1e9


def share(pids):
    before = [cpu(p) for p in pids]
    time.sleep(SECONDS)
    return [100 * (cpu(p) - b) / SECONDS for p, b in zip(pids, before)]


os.environ["UCX_TLS"] = "shm,self"
work = tempfile.mkdtemp()
server = subprocess.Popen([f"{BIN}/ardmad", "--listen", "127.0.0.1:0", "--port-file",
                           f"{work}/port", "--quiet"])
try:
    while not os.path.exists(f"{work}/port") or not open(f"{work}/port").read().strip():
        time.sleep(0.05)
    address = open(f"{work}/port").read().strip()
    print(f"| idle for {SECONDS:.0f} s | ardmad | ardma-ccd |\n|---|---:|---:|")
    for n in (0, 100):
        clients = [ardma.Client(("ucx://" if i % 2 else "") + address) for i in range(n)]
        for c in clients:
            c.ping()
        (s,) = share([server.pid])
        print(f"| ardmad, {n} connections (half UCX) | {s:.3f}% | |")
        del clients
    for prefix in ("", "ucx://"):
        ccd = subprocess.Popen([f"{BIN}/ardma-ccd", "--server", prefix + address],
                               stderr=subprocess.DEVNULL)
        time.sleep(2)
        s, c = share([server.pid, ccd.pid])
        print(f"| ardma-ccd over {prefix or 'tcp://'} | {s:.3f}% | {c:.3f}% |")
        ccd.terminate()
        ccd.wait()
finally:
    server.terminate()
    server.wait()
