$ env ARDMA_BENCH_TRANSPORT=tcp bench/scaling.sh 20000
