$ env ARDMA_BENCH_TRANSPORT=ucx UCX_TLS=shm,self build-release/bin/latency_sweep --benchmark_format=csv
