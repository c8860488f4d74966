$ bench/reshard_compare.sh 1000000
