// hone's version and the git commit it was built from.
#pragma once

namespace hone {
const char* version();     // e.g. "0.1.0"
const char* git_commit();  // short hash, "-dirty" appended when built from a modified tree
}  // namespace hone
