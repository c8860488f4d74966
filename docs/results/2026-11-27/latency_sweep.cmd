$ env ARDMA_BENCH_TRANSPORT=tcp build-release/bin/latency_sweep --benchmark_format=csv
