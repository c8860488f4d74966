$ bench/redis_compare.sh 3
