// TOML++ as hone includes it: every file that uses TOML++ includes this header, never <toml++/toml.h> itself, so that
// all of them (and the implementation compiled once in toml_impl.cpp) see the same settings:
//   * TOML_HEADER_ONLY=0 (the Makefile): declarations here, the implementation in toml_impl.cpp;
//   * TOML++'s internal assertions off, as in the library Debian builds (with NDEBUG): they end the process on
//     some malformed decks (a table header "[#") that the parser itself then reports as an ordinary error.
// Host-only header.
#pragma once

#ifndef TOML_ASSERT
#define TOML_ASSERT(expr) static_cast<void>(0)
#endif
#include <toml++/toml.h>
