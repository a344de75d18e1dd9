// The scan loops for the baseline x86-64 (SSE2) instruction set.
#define OVF_SCAN_TABLE_NAME scan_table_base
#include "stats_scan.inc"
