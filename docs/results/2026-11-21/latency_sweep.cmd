$ build-release/bin/latency_sweep --benchmark_format=csv
