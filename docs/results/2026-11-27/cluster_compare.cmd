$ bench/cluster_compare.sh 3
