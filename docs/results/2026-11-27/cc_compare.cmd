$ bench/cc_compare.sh 2
