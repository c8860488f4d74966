$ bench/scaling.sh 20000
