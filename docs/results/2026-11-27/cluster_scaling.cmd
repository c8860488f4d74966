$ bench/cluster_scaling.sh 200000
