// Where a model named by a path is read from. A Hugging Face folder is read as it is; a GGUF file (llama.cpp's
// format, model.path = "FILE.gguf") is converted once into a Hugging Face folder in hone's model cache and read
// from there by every part of hone that reads model folders (weights, config, tokenizer, sharded loading,
// checkpoints' hf/ copies), so that a GGUF runs wherever a folder does.
//
// The cache: $HONE_CACHE_DIR, else $XDG_CACHE_HOME/hone, else $HOME/.cache/hone; a GGUF's folder is
// gguf/<file stem>-<key>/, the key hashing the file's absolute path, size and modification time (a changed file
// gets a new folder). The folder is written under a temporary name and renamed when complete, so a crash never
// leaves a half folder in use, and concurrent writers (ranks of one node) agree on the one that lands first.
#pragma once

#include <string>

namespace hone {

// path ends in ".gguf" (case-insensitive).
bool is_gguf_path(const std::string& path);

// hone's cache folder (not created).
std::string model_cache_dir();

// The folder of a GGUF file's conversion, whether or not it exists yet.
std::string gguf_cache_folder(const std::string& gguf_path);

// The Hugging Face folder to read for `path`: path itself unless it names a .gguf file, whose cached conversion
// is made first when missing (fp32 weights: the dequantized values exactly). UserError for a missing or broken
// GGUF, naming it.
std::string model_folder(const std::string& path);

}  // namespace hone
