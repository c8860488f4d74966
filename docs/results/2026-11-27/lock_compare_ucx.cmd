$ env ARDMA_BENCH_TRANSPORT=ucx UCX_TLS=shm,self bench/lock_compare.sh --benchmark_out=docs/results/2026-11-27/lock_bench_ucx.json --benchmark_out_format=json
