$ env ARDMA_BENCH_TRANSPORT=tcp build-release/bin/dfs_bench --benchmark_min_time=0.3 --benchmark_out=docs/results/2026-11-27/dfs_bench.json --benchmark_out_format=json
