// The deck reference generated from the schema: plain text for `hone help deck`, Markdown for doc/deck.md.
#pragma once

#include <string>

namespace hone {

std::string deck_reference_text();
std::string deck_reference_markdown();

}  // namespace hone
