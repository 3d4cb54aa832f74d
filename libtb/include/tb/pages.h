/*
 * tb/pages.h - memory regions with a chosen page size (--pages 1G|2M|thp|4k|auto), and the
 * page size really obtained, read back after the first touch (code in src/tb_pages.c).
 */
#ifndef TB_PAGES_H
#define TB_PAGES_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stddef.h>
#include <sys/mman.h>

#include "tb/json.h"
#include "tb/smaps.h"

/* mmap(2)'s hugetlb page-size flags, for C libraries whose headers predate them (used by
 * tb_pages.c and the LD_PRELOAD shim rankstep/hugepreload.c: macros only, nothing to link). */
#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << MAP_HUGE_SHIFT)
#endif
#ifndef MAP_HUGE_1GB
#define MAP_HUGE_1GB (30 << MAP_HUGE_SHIFT)
#endif

typedef enum { TB_PG_AUTO = 0, TB_PG_1G, TB_PG_2M, TB_PG_THP, TB_PG_4K } tb_pgkind;

typedef struct {
    tb_pgkind requested;
    tb_pgkind method;    /* how the mapping was finally made */
    int strict;
    int mem_node;        /* NUMA node the mapping is bound to, -1 = default policy */
    void *base;          /* start of the mapping (aligned to the page size) */
    size_t bytes;        /* bytes asked for */
    size_t len;          /* mapping length (rounded up to the page size) */
    long kib;            /* page size obtained (read back after first touch), KiB */
    long anon_huge_kib;  /* AnonHugePages of the mapping (THP) */
    long rss_kib;        /* Rss of the mapping */
    int fallback;        /* the requested page size was not obtained */
    char note[1024];     /* what was tried */
} tb_region;

int tb_parse_pages(const char *s, tb_pgkind *out); /* 0 ok, -1 unknown */
const char *tb_pgkind_name(tb_pgkind k);         /* "1G", "2M", "thp", "4k", "auto" */
const char *tb_pgkind_method(tb_pgkind k);       /* "hugetlb-1G", "hugetlb-2M", "thp", "4k" */
/* Map `bytes` (not touched). Exits 3 with a one-line hint if strict and the requested
 * hugetlb pages cannot be mapped. mem_node >= 0: bind the mapping to that NUMA node
 * (mbind MPOL_BIND, before the first touch) and only use hugetlb pages free on it. */
void tb_region_alloc(tb_region *r, tb_pgkind req, size_t bytes, int strict, int mem_node);
/* After the first touch: read back the page size from /proc/self/smaps, set kib, fallback
 * and note. Exits 3 with a hint if strict and the page size is not the requested one. */
void tb_region_probe(tb_region *r);
void tb_region_free(tb_region *r);
void tb_json_pages(tb_json *j, const tb_region *r); /* "pages": {...} */

#endif
