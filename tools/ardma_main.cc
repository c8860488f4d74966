// ardma: the admin CLI, for looking at and poking a live ardmad (ardma_cli.h).
#include "tools/ardma_cli.h"

int main(int argc, char** argv) { return ardma::cli::Main(argc, argv); }
