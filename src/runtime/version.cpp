// Version strings, baked in by the Makefile (this one object is rebuilt when the commit changes).
#include "runtime/version.h"

#ifndef HONE_VERSION
#define HONE_VERSION "0.0.0"
#endif
#ifndef HONE_GIT_COMMIT
#define HONE_GIT_COMMIT "unknown"
#endif

namespace hone {
const char* version() { return HONE_VERSION; }
const char* git_commit() { return HONE_GIT_COMMIT; }
}  // namespace hone
