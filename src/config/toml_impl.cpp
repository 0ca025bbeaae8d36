// TOML++'s implementation, compiled once into hone: the library is part of the executable, not a shared object
// the target machine must have (doc/building.md, "One binary"). Every other file includes config/toml.h (the same
// settings) and gets declarations only.
#define TOML_IMPLEMENTATION
#include "config/toml.h"
