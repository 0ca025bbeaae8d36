// TOML++'s implementation, compiled once into hone: the library is part of the executable, not a shared object
// the target machine must have (doc/building.md, "One binary"). Every other file includes <toml++/toml.h> with
// TOML_HEADER_ONLY=0 (the Makefile's flags) and gets declarations only.
#define TOML_IMPLEMENTATION
#include <toml++/toml.h>
