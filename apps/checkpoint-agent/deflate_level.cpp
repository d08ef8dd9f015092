// libgit2 1.5 deflates every object it packs at zlib's default level (6) and
// has no setting for another. A checkpoint is packed once, sent once and read
// back rarely, often racing a shutdown's grace period, where level 6 costs
// 20 % more CPU for 1.4 % fewer bytes on eval output
// (docs/design/benchmark-history.md "What changed at 60f1de3"). git itself
// lets pack.compression choose.
//
// So the agent defines zlib's deflateInit_, which libgit2 calls through the
// dynamic linker and reaches here before libz's own (apps/CMakeLists.txt
// exports the symbol): a request for the default level gets level 1; an
// explicit level is kept. The rest is what zlib's deflateInit_ does.
#include <zlib.h>

extern "C" int deflateInit_(z_streamp stream, int level, const char* version, int stream_size) {
  if (level == Z_DEFAULT_COMPRESSION) level = Z_BEST_SPEED;
  constexpr int kDefaultMemLevel = 8;  // zlib's DEF_MEM_LEVEL
  return deflateInit2_(stream, level, Z_DEFLATED, MAX_WBITS, kDefaultMemLevel, Z_DEFAULT_STRATEGY,
                       version, stream_size);
}
