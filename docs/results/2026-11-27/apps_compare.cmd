$ env ARDMA_BENCH_TRANSPORT=tcp bench/apps_compare.sh 3
