$ bench/apps_compare.sh 3
