$ env ARDMA_BENCH_TRANSPORT=tcp bench/lock_compare.sh --benchmark_out=docs/results/2026-11-27/lock_bench.json --benchmark_out_format=json
