# Sourced by the recipes and `make demo` (POSIX sh): run Python with TCMalloc instead of glibc's malloc where it is
# installed (Debian/Ubuntu: apt install libtcmalloc-minimal4). glibc hands large freed blocks (such as the 8000 x 256
# embedding gradient made afresh at every step) back to the operating system and page-faults them in again at the next
# step; TCMalloc keeps them. Same numbers, faster training (measured: docs/results.md). TCMALLOC=path chooses the
# library, TCMALLOC= none.
if [ -z "${TCMALLOC+set}" ]; then
  TCMALLOC=""
  for lib in /usr/lib/*/libtcmalloc_minimal.so.4 /usr/lib64/libtcmalloc_minimal.so.4 /usr/local/lib/libtcmalloc_minimal.so.4; do
    if [ -f "$lib" ]; then TCMALLOC=$lib; break; fi
  done
fi
if [ -n "$TCMALLOC" ]; then
  [ -f "$TCMALLOC" ] || { echo "error: TCMALLOC=$TCMALLOC: no such file (TCMALLOC= runs with the system's malloc)" >&2; exit 2; }
  export LD_PRELOAD="$TCMALLOC${LD_PRELOAD:+:$LD_PRELOAD}"
  echo "memory allocator: $TCMALLOC"
fi
