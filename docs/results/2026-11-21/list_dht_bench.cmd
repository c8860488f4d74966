$ build-release/bin/list_dht_bench --benchmark_filter=-threads:50|ClosedLoop --benchmark_min_time=0.3 --benchmark_out=docs/results/2026-11-21/list_dht_bench.json --benchmark_out_format=json
