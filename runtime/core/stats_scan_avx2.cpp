// The scan loops compiled with -mavx2 (see CMakeLists.txt); used only when the
// CPU reports AVX2.
#define OVF_SCAN_TABLE_NAME scan_table_avx2
#include "stats_scan.inc"
