$ env ARDMA_BENCH_TRANSPORT=ucx UCX_TLS=shm,self build-release/bin/dfs_bench --benchmark_min_time=0.3 --benchmark_out=docs/results/2026-11-27/dfs_bench_ucx.json --benchmark_out_format=json
