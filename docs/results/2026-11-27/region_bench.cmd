$ env UCX_TLS=shm,self build-release/bin/region_bench --benchmark_min_time=0.2 --benchmark_out=docs/results/2026-11-27/region_bench.json --benchmark_out_format=json
