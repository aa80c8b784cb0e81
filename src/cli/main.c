/* peloton: Peloton's command line over pelotond's native API (docs/cli.md). */
#include "cli.h"

int main(int argc, char **argv) { return cli_main(argc, argv); }
