/*
 * tb/smaps.h - the page size the kernel gave a mapping, read back from /proc/self/smaps, and
 * small sysfs/procfs numbers (code in src/tb_smaps.c: no malloc, so the LD_PRELOAD hugepage
 * shim, which replaces malloc, links it too).
 */
#ifndef TB_SMAPS_H
#define TB_SMAPS_H

/* Malloc-free lookup of the mapping containing addr in /proc/self/smaps.
 * Returns 0 when found; values in kB (-1 when the field is missing). */
int tb_smaps_lookup(const void *addr, long *kernel_page_kib, long *anon_huge_kib, long *rss_kib);
/* Read a long from a sysfs/procfs file, -1 on error. */
long tb_read_long_file(const char *path);

#endif
