/* jemalloc's options for the release binaries (linked into them only; the
 * ASan builds keep the sanitizer's allocator). jemalloc reads this symbol at
 * start-up; MALLOC_CONF in the environment still overrides it.
 *
 * thp: jemalloc asks for transparent huge pages (madvise), where the kernel
 * allows them. The daemons' caches grow by kilobytes per pod (informers keep
 * every object), and first touches of 4 KiB pages were a fifth of the
 * controllers' CPU in a burst of pods; with 2 MiB pages they are rare
 * (docs/benchmarks.md). Where THP is off this asks for nothing. */
const char *malloc_conf = "thp:always,metadata_thp:always";
