/* cli.c: placeholder until the analysis module lands. */
#include "cli.h"

int
datc_analyze_main (int argc, char **argv)
{
  g_printerr ("datc analyze: not built yet\n");
  return 2;
}

int
datc_report_main (int argc, char **argv)
{
  g_printerr ("datc report: not built yet\n");
  return 2;
}
