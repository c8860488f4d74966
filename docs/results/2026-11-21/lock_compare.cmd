$ bench/lock_compare.sh --benchmark_out=docs/results/2026-11-21/lock_bench.json --benchmark_out_format=json
