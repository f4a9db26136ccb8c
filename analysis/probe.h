/* probe.h: converts the H200 probe text files (pcie_probe.*.txt, pool_probe.*.txt,
 * kept in analysis/data/) into dhbench CSV lines, so the same fit reads them.
 *
 * pcie_probe lines "row_B path SMs GB/s": the zero-copy gathers host_zc (one
 * row per warp) and host_zc4 (four rows in flight per warp) become kernel
 * "fetch", versions "probe_zc" and "probe_zc4", pattern "uniform" over the
 * probe's 2 GiB pinned pool.  The probe did not record rows per launch, so
 * rows and median_us stay empty and gbps carries the figure (an "asymptotic"
 * line for the fit).  The "hbm" and "batchcpy" lines become kernels
 * "probe_hbm_gather" and "probe_batchcpy" (no cost form; the fit lists them).
 * Header lines (d2d_copy, h2d_memcpy_pinned, ...) become kernel "probe_<name>"
 * lines with gbps only.
 * pool_probe lines "[serving=1] thp=T pool=NGB rows=R sorted=S sms=M X GB/s":
 * version "probe_zc4", pattern uniform / uniform_sorted / serving /
 * serving_sorted (+thp when T=1), pool_bytes = N GiB, rows = R, and median_us
 * = R * 656 B / X, the time one launch took (the probe reports bandwidth of
 * 656-byte rows).  Serving lines carry ctx = 100000 (window rows) and k = 291
 * (missed rows per window), the probe's layout (measurements README).
 * Shell timing lines (real/user/sys) and blank lines are skipped; any other
 * line is an error naming file and line. */
#ifndef DH_PROBE_H
#define DH_PROBE_H

#include <stdio.h>

/* Append the CSV lines of one probe file to out (no header). */
int probe_convert(const char *path, FILE *out);

#endif
